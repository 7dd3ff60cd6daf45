"""``python -m evaluate.coherence --run runs/<name>``: topic coherence (NPMI) of the learned
topics, as in both papers: for each topic the mean NPMI over all pairs of its top N words,
averaged over topics, for N = 5, 10, 15, 20, and the mean over N. Word and pair probabilities
are counted in sliding windows of ``--window`` tokens (20, as Lau et al.'s toolkit; 0 = whole
documents) over a reference corpus (default: the run's training split), laid and scored as
that toolkit, which computed the TDLM paper's coherence, does (``--convention toolkit``: windows
overhang a document's ends, a pair never seen together scores 0) or with whole windows only
and -1 for such a pair (``limit``, the convention of records that name none;
``tcnlm_tf.metrics.coherence`` says both). Beside it, topic diversity: the share of distinct
words among all topics' top 10 and top 25 words (Dieng et al. 2020 report the 25), which
says whether coherent topics are also different ones. ``coherence.json`` keeps the
convention, the diversity and the top words scored; TensorBoard gets the NPMI mean and the
diversities as the scalars ``coherence/npmi`` and ``coherence/diversity_<N>`` at the
training step of the weights scored (metrics of the HParams dashboard, ``train.summaries``;
a warning when they cannot be written)."""
from __future__ import annotations

import json

from evaluate.common import parser, split_file, stream_documents
from evaluate.topics import top_words
from tcnlm_tf.arguments import integer
from tcnlm_tf.data.corpus import write_text
from tcnlm_tf.errors import exit_on_user_error
from tcnlm_tf.metrics.coherence import (CONVENTIONS, DIVERSITY_NS, coherence_summary,
                                        count_cooccurrences, topic_diversity)

NS = (5, 10, 15, 20)


def coherence(run, reference, window: int = 20, convention: str = CONVENTIONS[0]) -> dict:
    """The coherence summary of ``run``'s topics against ``reference`` documents (any
    iterable, read once: :func:`~tcnlm_tf.metrics.coherence.count_cooccurrences`), their
    diversity (``{N: share}``, at each N the topic vocabulary has words for) and the top
    words scored (``top_words``: per topic, most probable first, as many as the largest N
    of either)."""
    topics = top_words(run, max(*NS, *DIVERSITY_NS))
    scored = [topic[:max(NS)] for topic in topics]
    counts = count_cooccurrences(reference, {w for t in scored for w in t}, window, convention)
    return {**coherence_summary(scored, counts, NS),
            "diversity": {n: topic_diversity(topics, n) for n in DIVERSITY_NS
                          if min(map(len, topics)) >= n},   # a topic vocabulary that small
            "top_words": topics}


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict:
    p = parser("coherence", __doc__.split(": ", 1)[1])
    p.add_argument("--reference", help="reference corpus file in the corpus format "
                   "(default: the run's training split)")
    p.add_argument("--window", type=integer(0), default=20,
                   help="sliding-window size in tokens; 0 = whole documents (default: 20)")
    p.add_argument("--convention", choices=CONVENTIONS, default=CONVENTIONS[0],
                   help="toolkit: as Lau et al.'s topic_interpretability, which computed the "
                        "TDLM paper's NPMI (windows overhang each document's ends, a pair never "
                        "seen together scores 0); limit: whole windows only, such a pair "
                        "scores -1, as a record that names no convention was scored "
                        "(default: toolkit)")
    args = p.parse_args(argv)
    from tcnlm_tf.runs.loading import load_run, require_topic_model
    from train.summaries import (NPMI_TAG, checkpoint_step, diversity_tag, write_or_warn,
                                 write_scalars)

    run = load_run(args.run, data_dir=args.data_dir)
    require_topic_model(run, "evaluate.coherence")
    path = args.reference or split_file(run, "train")
    summary = coherence(run, stream_documents(path), args.window, args.convention)
    for n, value in summary["per_n"].items():
        print(f"NPMI top-{n}: {value:.4f}")
    print(f"NPMI mean over N={list(NS)}: {summary['mean']:.4f} "
          f"(reference {path}, window {args.window}, {args.convention} convention)")
    print("topic diversity (distinct share of all topics' top N words): " + ", ".join(
        f"top-{n} {value:.3f}" for n, value in summary["diversity"].items()))
    result = {"reference": str(path), "window": args.window, "convention": args.convention,
              **summary}
    write_text(run.files.coherence, json.dumps(result, indent=2) + "\n")
    board = run.files.tensorboard
    scalars = {NPMI_TAG: summary["mean"], **{diversity_tag(n): value
                                             for n, value in summary["diversity"].items()}}
    if write_or_warn(board, "the coherence scalars", lambda: write_scalars(
            board, checkpoint_step(run.checkpoint), scalars), written=str(run.files.coherence)):
        print(f"TensorBoard: {', '.join(scalars)} in {board}")
    return result


if __name__ == "__main__":
    main()
