"""``python -m evaluate.recovery --run runs/<name>``: on the synthetic corpus, how well the
learned topics recover the generator's true topics: Hungarian matching of learned to true
topics on the cosine similarity of their word distributions, restricted to the words both
vocabularies share; reports the mean matched cosine."""
from __future__ import annotations

import json

from evaluate.common import parser
from tcnlm_tf.data.corpus import write_text
from tcnlm_tf.errors import UserError, exit_on_user_error


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict:
    p = parser("recovery", __doc__.split(": ", 1)[1])
    args = p.parse_args(argv)
    from tcnlm_tf.data import synthetic
    from tcnlm_tf.data.loading import source_dir
    from evaluate.topics import topic_words
    from tcnlm_tf.metrics.recovery import topic_recovery
    from tcnlm_tf.runs.loading import load_run, require_topic_model

    run = load_run(args.run, data_dir=args.data_dir)
    require_topic_model(run, "evaluate.recovery")
    if run.config.data.dataset != "synthetic":
        raise UserError(f"{run.directory} was trained on {run.config.data.dataset}: topic "
                        "recovery needs the synthetic corpus, whose true topics are known")
    truth = synthetic.load_truth(source_dir(run.config.data))
    result = topic_recovery(truth.topic_word, truth.words, *topic_words(run))
    print(f"mean matched cosine: {result['mean_matched_cosine']:.4f} "
          f"({result['num_true']} true topics, {result['num_learned']} learned, "
          f"{result['shared_vocab_size']} shared words)")
    write_text(run.files.recovery, json.dumps(result, indent=2, default=float) + "\n")
    return result


if __name__ == "__main__":
    main()
