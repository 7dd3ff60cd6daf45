"""``python -m evaluate.topics --run runs/<name>``: the top words of every learned topic
(the model's topic-word distributions: TCNLM's beta, eq. 6; TDLM's softmax(B W + b), its
Sec. 5), written to ``<run>/topics.txt`` and to TensorBoard (text ``topics/top_words``)."""
from __future__ import annotations

import numpy as np

from evaluate.common import parser
from tcnlm_tf.arguments import integer
from tcnlm_tf.data.corpus import write_text
from tcnlm_tf.errors import exit_on_user_error


def topic_words(run) -> tuple[np.ndarray, list[str]]:
    """The topics as word distributions [T, V'] and the words of their columns."""
    vocab = run.lm_vocab if run.model.topic_vocabulary == "lm" else run.topic_vocab
    return run.model.topic_word().numpy(), list(vocab.words)


def top_words(run, n: int) -> list[list[str]]:
    """The ``n`` most probable words of each topic (special tokens never listed)."""
    beta, words = topic_words(run)
    beta = beta.copy()
    beta[:, [i for i, w in enumerate(words) if w.startswith("<") and w.endswith(">")]] = -np.inf
    order = np.argsort(-beta, axis=1)[:, :n]
    return [[words[i] for i in row] for row in order]


@exit_on_user_error
def main(argv: list[str] | None = None) -> list[list[str]]:
    p = parser("topics", __doc__.split(": ", 1)[1])
    p.add_argument("--top-n", type=integer(1), default=10, help="words per topic (default: 10)")
    args = p.parse_args(argv)
    import tensorflow as tf
    from tcnlm_tf.runs.loading import load_run, require_topic_model

    run = load_run(args.run, data_dir=args.data_dir)
    require_topic_model(run, "evaluate.topics")
    topics = top_words(run, args.top_n)
    lines = [f"topic {k}: {' '.join(words)}" for k, words in enumerate(topics)]
    path = run.files.topics
    write_text(path, "\n".join(lines) + "\n")
    print("\n".join(lines))
    table = "| topic | top words |\n| --- | --- |\n" + "\n".join(
        f"| {k} | {' '.join(words)} |" for k, words in enumerate(topics))
    with tf.summary.create_file_writer(str(run.files.tensorboard)).as_default(step=0):
        tf.summary.text("topics/top_words", table)
    print(f"written to {path} and TensorBoard ({run.files.tensorboard})")
    return topics


if __name__ == "__main__":
    main()
