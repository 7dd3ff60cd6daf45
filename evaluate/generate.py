"""``python -m evaluate.generate --run runs/<name> --topic I``: sentences conditioned on one
topic (t = e_I: for TCNLM only the I-th factor of W_b and U_b, as in its paper's Table 5;
for TDLM s = B_I, its Sec. 7) or on a mixture (``--mixture 3:0.5,7:0.5``), from a zero
state, each continuing ``--prompt`` if given: greedy, sampled with a temperature (and
``--top-k``, ``--top-p``), or the best of a beam search (``--beams``), each ending at
``<eos>`` or after ``--max-words`` words."""
from __future__ import annotations

import json

from evaluate.common import parser
from tcnlm_tf.arguments import finite_float, integer, probability, random_seed
from tcnlm_tf.config import MAX_GENERATED_WORDS
from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.samplers import MAX_BEAMS


def parse_mixture(text: str) -> dict[int, float]:
    """'3:0.5,7:0.5' -> {3: 0.5, 7: 0.5}."""
    try:
        pairs = [item.split(":") for item in text.split(",") if item.strip()]
        return {int(k): float(w) for k, w in pairs}
    except ValueError:
        raise UserError(f"--mixture {text!r}: expected TOPIC:WEIGHT pairs such as 3:0.5,7:0.5")


@exit_on_user_error
def main(argv: list[str] | None = None) -> list[str]:
    p = parser("generate", __doc__.split(": ", 1)[1])
    which = p.add_mutually_exclusive_group()
    which.add_argument("--topic", type=integer(0), help="condition on this topic alone")
    which.add_argument("--mixture", help="condition on a mixture, e.g. 3:0.5,7:0.5")
    p.add_argument("--num", type=integer(1), default=3, help="sentences to generate (default: 3)")
    p.add_argument("--prompt", default="",
                   help="words to continue, tokenised as the corpus (default: none)")
    decoding = p.add_mutually_exclusive_group()
    decoding.add_argument("--greedy", action="store_true",
                          help="most probable word at each step")
    decoding.add_argument("--beams", type=integer(2, MAX_BEAMS),
                          help=f"beam search with this many beams (2 to {MAX_BEAMS}): the "
                               "most probable sentence found")
    p.add_argument("--top-k", type=integer(1), default=None,
                   help="sample among the k most probable words only")
    p.add_argument("--top-p", type=probability, default=None,
                   help="sample among the smallest set of most probable words whose "
                        "probability reaches p (nucleus sampling), in (0, 1]")
    p.add_argument("--temperature", type=finite_float, default=0.75,
                   help="sampling temperature (default: 0.75, as TDLM's Table 8)")
    p.add_argument("--max-words", type=integer(1), default=MAX_GENERATED_WORDS,
                   help=f"length cap (default: {MAX_GENERATED_WORDS})")
    p.add_argument("--seed", type=random_seed, default=0, help="sampling seed (default: 0)")
    p.add_argument("--no-unk", action="store_true",
                   help="never generate <unk> (sample among the known words only)")
    args = p.parse_args(argv)
    if args.temperature <= 0:
        raise UserError("--temperature must be positive (use --greedy for argmax decoding)")
    if (args.greedy or args.beams) and (args.top_k or args.top_p):
        raise UserError("--top-k and --top-p choose among words to sample: drop them with "
                        "--greedy or --beams")
    from tcnlm_tf.metrics.evaluation import generate, topic_vector
    from tcnlm_tf.models.base import has_topics
    from tcnlm_tf.runs.loading import load_run

    run = load_run(args.run, data_dir=args.data_dir)
    topic_model = has_topics(run.model)
    if topic_model and args.topic is None and args.mixture is None:
        raise UserError(f"{run.directory} is a topic model: give --topic I or --mixture I:W,...")
    if not topic_model and (args.topic is not None or args.mixture):
        raise UserError(f"{run.directory} is a --model {run.config.model.model} run without "
                        "topics: drop --topic/--mixture")
    t = (topic_vector(run.model.num_topics, args.topic,
                      parse_mixture(args.mixture) if args.mixture else None)
         if topic_model else None)
    prompt = args.prompt.split()
    sentences = [" ".join(prompt + s) for s in generate(
        run, t, args.num, args.temperature, args.greedy, args.max_words, args.seed,
        allow_unk=not args.no_unk, top_k=args.top_k or 0, top_p=args.top_p or 1.0,
        beams=args.beams or 0, prompt=prompt)]
    label = (f"topic {args.topic}" if args.topic is not None
             else f"mixture {args.mixture}" if args.mixture else "no topic")
    how = ("greedy" if args.greedy else f"beam search, {args.beams} beams" if args.beams
           else f"temperature {args.temperature}"
           + (f", top-k {args.top_k}" if args.top_k else "")
           + (f", top-p {args.top_p}" if args.top_p else ""))
    print(f"{label} ({how}):")
    for sentence in sentences:
        print(f"  {sentence}")
    print(json.dumps({"condition": label, "sentences": sentences}))
    return sentences


if __name__ == "__main__":
    main()
