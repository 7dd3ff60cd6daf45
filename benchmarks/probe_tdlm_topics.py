"""Why do a TDLM's topics share their word lists? A probe of a trained run.

Under ``--context preceding`` every document's first sentence has an empty context, on which
TDLM's attention is uniform (d = 0, so p = softmax(A d) = 1/k, Lau et al. 2017 eq. 1): the
language model's gradient on s = B^T p (eq. 2) then reaches every topic vector B_k in equal
parts. This prints, for the run's best weights:

* which topics share their word lists: a topic is in a shared group when at least
  ``--min-topics`` others have ``--min-words`` or more of its top 10 words (Sec. 5's
  softmax(B W + b));
* how much the topic model attends to each group: the mean attention p over the whole
  documents of the training split (what its own task reads), and how concentrated it is
  (:func:`attention_concentration`: how few topics take 99 % of it, how many get almost
  none, how peaked one document's attention is);
* where the language model's gradient on each B_k comes from: of ``--batches`` training
  batches (the run's protocol, in a fixed order), the share |g_e| / (|g_e| + |g_o|) of the
  gradient g_e of the examples whose context is empty (no topic-vocabulary word: d = 0)
  against g_o of the others (the loss as in evaluation, without dropout);
* how alike the topic vectors are within each group (mean cosine);
* how many of each topic's top 10 words are among the 10 that the output bias b alone ranks
  first (the topic vocabulary's commonest), for the topics that take 99 % of the attention
  and for the others;
* where the run directory has the ``coherence.json`` that ``evaluate.compare`` writes: the
  mean NPMI of the topics that take 99 % of the attention and of the others;
* how many examples of the whole training split have an empty context under each protocol
  (``rest``: the document minus the sentence; ``preceding``: the text before it).

Exploratory, for the coherence of a TDLM's topics (docs/evaluation.md, "Topics and
coherence"); a few minutes on 2 CPU cores for an APNEWS run."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from tcnlm_tf.arguments import integer
from tcnlm_tf.errors import UserError, exit_on_user_error


def shared_groups(top: list[tuple[int, ...]], min_words: int, min_topics: int) -> np.ndarray:
    """bool [k]: topics whose top words (``top``, one tuple of word ids per topic) share
    ``min_words`` or more with at least ``min_topics`` other topics."""
    sets = [set(t) for t in top]
    return np.array([sum(len(a & b) >= min_words for j, b in enumerate(sets) if j != i)
                     >= min_topics for i, a in enumerate(sets)])


def empty_contexts(run, arrays) -> dict[str, tuple[int, int]]:
    """{protocol: (examples whose context has no topic-vocabulary word, examples)} over the
    sentence-mode examples of ``arrays`` (the run's sequence length), for each protocol of
    ``--context`` (``tcnlm_tf.config.CONTEXTS``)."""
    from tcnlm_tf.config import CONTEXTS
    from tcnlm_tf.data import pipeline

    examples = pipeline.sentence_examples(arrays, run.config.data.seq_len)
    counts = {}
    for protocol in CONTEXTS:
        rows = pipeline.protocol_context(arrays, examples, protocol)
        words = (rows[:, 1] - rows[:, 0]) + (rows[:, 3] - rows[:, 2])
        counts[protocol] = (int(np.sum(words == 0)), len(words))
    return counts


def attention_concentration(attention: np.ndarray, share: float = 0.99) -> dict:
    """How few topics the attention p [N, k] of N documents uses: ``topics_for_share``, the
    fewest topics whose mean attention adds up to ``share`` of it (``used``: which, in
    increasing order); ``unused``, the topics whose mean attention is under 1 % of uniform's
    1/k; ``document_max``, the mean over documents of their largest p_k (1/k: uniform, 1: one
    topic per document)."""
    usage = attention.mean(axis=0)
    order = np.argsort(-usage, kind="stable")
    k = attention.shape[1]
    count = int(np.searchsorted(np.cumsum(usage[order]), share * usage.sum()) + 1)
    return {"topics_for_share": count, "share": share, "used": sorted(order[:count].tolist()),
            "unused": int(np.sum(usage < 0.01 / k)),
            "document_max": float(attention.max(axis=1).mean())}


def gradient_parts(run, arrays, batches: int):
    """(dL/dB from the examples with an empty context, dL/dB from the others, their counts)
    over the first ``batches`` training batches of ``arrays`` (a split encoded in the run's
    vocabularies) in the run's protocol, the loss summed as in evaluation (no dropout); the
    two parts add up to the whole gradient."""
    import tensorflow as tf

    from tcnlm_tf.data import pipeline
    from tcnlm_tf.models.base import token_nll

    variable = run.model.topic_model.attention.topic_outputs
    dataset = pipeline.model_dataset(run.model, run.config, arrays, "train", shuffle_seed=0)
    parts = [np.zeros(variable.shape, np.float64), np.zeros(variable.shape, np.float64)]
    counts = [0, 0]
    for batch in dataset.take(batches):
        empty = tf.reduce_all(tf.equal(batch["bow"], 0), axis=1)
        selections = (empty, tf.logical_not(empty))
        with tf.GradientTape(persistent=True) as tape:     # one forward pass, two gradients
            nll = token_nll(run.model(batch, training=False).target_log_probs,
                            batch["weights"])
            sums = [tf.reduce_sum(nll * tf.cast(selected, tf.float32)[:, None])
                    for selected in selections]
        for index, selected in enumerate(selections):
            parts[index] += tf.convert_to_tensor(tape.gradient(sums[index], variable)).numpy()
            counts[index] += int(tf.reduce_sum(tf.cast(selected, tf.int32)))
        del tape
    return parts[0], parts[1], counts


def mean_cosine(vectors: np.ndarray) -> float:
    """Mean cosine over the distinct pairs of rows of ``vectors`` (nan for fewer than 2)."""
    if len(vectors) < 2:
        return float("nan")
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cos = unit @ unit.T
    return float(cos[~np.eye(len(cos), dtype=bool)].mean())


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.probe_tdlm_topics",
                                allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True, help="a TDLM run directory (train.run)")
    p.add_argument("--batches", type=integer(1), default=60,
                   help="training batches the gradient is summed over (60)")
    p.add_argument("--min-words", type=integer(1), default=5,
                   help="top-10 words two topics share to count as alike (5)")
    p.add_argument("--min-topics", type=integer(1), default=5,
                   help="alike topics that make a topic part of a shared group (5)")
    p.add_argument("--list", action="store_true",
                   help="also every topic, by mean attention: its attention, its share of "
                        "the gradient from empty contexts, its group and its top 10 words")
    args = p.parse_args(argv)
    from evaluate.common import read_documents, split_file
    from tcnlm_tf.metrics.evaluation import document_topics
    from tcnlm_tf.runs.loading import encode_documents, load_run

    run = load_run(args.run)
    if run.config.model.model != "tdlm":
        raise UserError(f"--run {args.run} is a {run.config.model.model} run; the probe "
                        "reads TDLM's attention and topic vectors")
    topic_model = run.model.topic_model
    words = topic_model.topic_word().numpy()
    vocab = run.lm_vocab if words.shape[1] == len(run.lm_vocab) else run.topic_vocab
    top = [tuple(np.argsort(-row)[:10]) for row in words]
    shared = shared_groups(top, args.min_words, args.min_topics)
    documents = read_documents(split_file(run, "train"))
    attention = document_topics(run, documents)
    usage = attention.mean(axis=0)
    concentration = attention_concentration(attention)
    arrays = encode_documents(run, documents)
    empty, other, counts = gradient_parts(run, arrays, args.batches)
    whole_split = empty_contexts(run, arrays)
    share = np.linalg.norm(empty, axis=1) / (np.linalg.norm(empty, axis=1)
                                             + np.linalg.norm(other, axis=1))
    vectors = topic_model.topic_vectors().numpy()
    commonest = np.bincount(np.concatenate([top[i] for i in np.flatnonzero(shared)]),
                            minlength=len(vocab)) if shared.any() else np.zeros(1, int)
    result = {"checkpoint": run.checkpoint, "topics": len(top), "shared": int(shared.sum()),
              "shared_words": [vocab.words[i] for i in np.argsort(-commonest)[:8]]
              if shared.any() else [],
              "examples": {"empty": counts[0], "other": counts[1]},
              "empty_in_split": whole_split, "attention": concentration}
    for name, group in (("shared", shared), ("other", ~shared)):
        result[name + "_group"] = {
            "attention": float(usage[group].mean()) if group.any() else float("nan"),
            "empty_gradient_share": float(share[group].mean()) if group.any() else float("nan"),
            "vector_cosine": mean_cosine(vectors[group])}
    print(f"{args.run} ({run.checkpoint}), {len(top)} topics, context "
          f"{run.config.data.context}")
    print(f"{result['shared']} topics in shared groups (>= {args.min_words} of their top 10 "
          f"words with >= {args.min_topics} others); their commonest words: "
          f"{' '.join(result['shared_words'])}")
    print(f"attention on the {len(documents)} training documents: "
          f"{concentration['topics_for_share']} topics take {concentration['share']:.0%} of it, "
          f"{concentration['unused']} get under 1 % of uniform's 1/{len(top)}; a document's "
          f"largest p_k is {concentration['document_max']:.3f} on average")
    bias_top = np.argsort(-topic_model.word_output.bias.numpy())[:10]
    in_bias_top = np.array([len(set(bias_top.tolist()) & set(t)) for t in top])
    used = np.isin(np.arange(len(top)), concentration["used"])
    result["bias_top_words"] = [vocab.words[i] for i in bias_top]
    result["in_bias_top"] = {"used": float(in_bias_top[used].mean()),
                             "others": float(in_bias_top[~used].mean()) if (~used).any()
                             else float("nan")}
    others = (f" and {result['in_bias_top']['others']:.1f} (the others)" if (~used).any()
              else "")
    print(f"of their top 10 words, {result['in_bias_top']['used']:.1f} (those topics){others} "
          "are on average among the 10 that the output bias b alone ranks first: "
          f"{' '.join(result['bias_top_words'])}")
    coherence = Path(args.run) / "coherence.json"
    if coherence.is_file():
        npmi = np.asarray(json.loads(coherence.read_text())["per_topic"])
        result["npmi_used"] = float(npmi[used].mean())
        result["npmi_others"] = float(npmi[~used].mean()) if (~used).any() else float("nan")
        others = (f", {result['npmi_others']:.4f} over the other {(~used).sum()}"
                  if (~used).any() else "")
        print(f"mean NPMI ({coherence.name}): {result['npmi_used']:.4f} over those "
              f"{used.sum()} topics{others}")
    print(f"{args.batches} training batches: {counts[0]} examples with an empty context, "
          f"{counts[1]} others (uniform attention would be {1 / len(top):.4f})")
    print(f"the whole training split, {whole_split['rest'][1]} examples, with an empty context: "
          + ", ".join(f"{empty_count} ({empty_count / total:.1%}) under {protocol}"
                      for protocol, (empty_count, total) in whole_split.items()))
    print("| topics | mean attention on training documents | share of the gradient on B_k "
          "from empty contexts | mean cosine of their B_k |\n| --- | --- | --- | --- |")
    for name in ("shared", "other"):
        group = result[name + "_group"]
        print(f"| {name} | {group['attention']:.4f} | {group['empty_gradient_share']:.3f} | "
              f"{group['vector_cosine']:.3f} |")
    if args.list:
        print("\n| topic | mean attention | share from empty contexts | group | top 10 words |"
              "\n| --- | --- | --- | --- | --- |")
        for k in np.argsort(-usage):
            print(f"| {k} | {usage[k]:.4f} | {share[k]:.3f} | "
                  f"{'shared' if shared[k] else 'other'} | "
                  f"{' '.join(vocab.words[i] for i in top[k])} |")
    return result


if __name__ == "__main__":
    main()
