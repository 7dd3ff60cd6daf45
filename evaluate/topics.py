"""``python -m evaluate.topics --run runs/<name>``: the top words of every learned topic
(the model's topic-word distributions: TCNLM's beta, eq. 6; TDLM's softmax(B W + b), its
Sec. 5), written to ``<run>/topics.txt`` and to TensorBoard (text ``topics/top_words``, at
the training step of the weights loaded).

``--projector`` also writes the model's word embeddings, with their words, and its topics,
the rows of its topic-word matrix each labelled with its top words, for TensorBoard's
projector (``train.summaries``). A TensorBoard file that cannot be written (a full disk, a
read-only directory) is a warning; ``topics.txt`` stands without it.

``--export FILE.npz`` also writes the model's topics as the OCTIS toolkit's model output, so
its metrics (and gensim's) run on them unchanged: one ``numpy.savez_compressed`` file with
``topics`` (the top words of each topic), ``topic-word-matrix`` (beta, [T, V]: the topic
vocabulary's words in the order of ``FILE.vocabulary.json``, ``{"0": word, ...}``, as OCTIS
reads a vocabulary), ``topic-document-matrix`` (theta, [T, D], of the run's training
documents) and ``test-topic-document-matrix`` (theta of its test documents), read back with
``dict(numpy.load(FILE, allow_pickle=True))`` as OCTIS's ``load_model_output`` does."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from evaluate.common import parser, read_documents, split_file
from tcnlm_tf.arguments import integer
from tcnlm_tf.data.corpus import write_bytes, write_text
from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.metrics.topic_words import model_top_words, topic_labels, topic_word_matrix

#: documents whose topic proportions are inferred at once for --export
EXPORT_BATCH = 256


def topic_words(run) -> tuple[np.ndarray, list[str]]:
    """The topics of a loaded run as word distributions [T, V'] and the words of their
    columns (:func:`tcnlm_tf.metrics.topic_words.topic_word_matrix`)."""
    return topic_word_matrix(run.model, run.lm_vocab, run.topic_vocab)


def top_words(run, n: int) -> list[list[str]]:
    """The ``n`` most probable words of each topic of a loaded run, most probable first
    (special tokens never listed)."""
    return model_top_words(run.model, run.lm_vocab, run.topic_vocab, n)


def theta(run, split: str) -> np.ndarray:
    """Topic proportions of every document of the run's ``split``, [T, D] (OCTIS's shape)."""
    from tcnlm_tf.metrics.evaluation import document_topics

    documents = read_documents(split_file(run, split))
    return np.concatenate([document_topics(run, documents[i:i + EXPORT_BATCH])
                           for i in range(0, len(documents), EXPORT_BATCH)]).T


def export_octis(run, topics: list[list[str]], path: Path) -> Path:
    """Write the OCTIS model output of ``run`` to ``path`` (an .npz) and its vocabulary to
    ``<path stem>.vocabulary.json``; returns the vocabulary's path."""
    beta, words = topic_words(run)
    output = {"topics": np.array(topics, dtype=object), "topic-word-matrix": beta,
              "topic-document-matrix": theta(run, "train"),
              "test-topic-document-matrix": theta(run, "test")}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **output)
    write_bytes(path, buffer.getvalue())
    vocabulary = path.with_name(path.name.removesuffix(".npz") + ".vocabulary.json")
    write_text(vocabulary, json.dumps({str(i): w for i, w in enumerate(words)},
                                      ensure_ascii=False) + "\n")
    return vocabulary


@exit_on_user_error
def main(argv: list[str] | None = None) -> list[list[str]]:
    p = parser("topics", __doc__.split(": ", 1)[1])
    p.add_argument("--top-n", type=integer(1), default=10, help="words per topic (default: 10)")
    p.add_argument("--export", type=Path, metavar="FILE.npz",
                   help="also write the topics as OCTIS's model output (topics, topic-word "
                   "matrix, topic-document matrices of the training and test documents) to "
                   "FILE.npz and the vocabulary to FILE.vocabulary.json")
    p.add_argument("--projector", action="store_true",
                   help="also write the word embeddings, with their words, and the topics, "
                   "each labelled with its top words, for TensorBoard's projector")
    args = p.parse_args(argv)
    if args.export and args.export.suffix != ".npz":
        raise UserError(f"--export {args.export}: the OCTIS model output is an .npz file; "
                        "name it FILE.npz")
    import tensorflow as tf
    from tcnlm_tf.runs.loading import load_run, require_topic_model
    from train.summaries import (checkpoint_step, projector_tables, write_or_warn,
                                 write_projector, write_topics)

    run = load_run(args.run, data_dir=args.data_dir)
    require_topic_model(run, "evaluate.topics")
    topics = top_words(run, args.top_n)
    lines = topic_labels(topics)
    path = run.files.topics
    write_text(path, "\n".join(lines) + "\n")
    print("\n".join(lines))
    board, step = run.files.tensorboard, checkpoint_step(run.checkpoint)

    def text() -> None:
        write_topics(tf.summary.create_file_writer(str(board)), topics, step)

    def embeddings() -> None:
        write_projector(board, projector_tables(run.model, run.lm_vocab, run.topic_vocab,
                                                topics), step)

    shown = write_or_warn(board, "the topics", text, written=str(path))
    print(f"written to {path}" + (f" and TensorBoard ({board})" if shown else ""))
    if args.projector and write_or_warn(board, "the projector's embeddings", embeddings,
                                        written=str(path)):
        print(f"embeddings for TensorBoard's projector: {board}")
    if args.export:
        vocabulary = export_octis(run, topics, args.export)
        print(f"OCTIS model output: {args.export} (vocabulary {vocabulary})")
    return topics


if __name__ == "__main__":
    main()
