"""``python -m evaluate.infer --run runs/<name> --text-file F [--document N]``: the inferred
topic distribution t of a document (the posterior mean of the topic model), as numbers with
each leading topic's top words, as a bar chart like the TCNLM paper's Figure 2
(``<run>/topics_doc<N>.png``), and in TensorBoard (image ``topics/document_<N>``). A
TensorBoard folder that cannot be written (a full disk, a read-only directory) is a warning;
the numbers and the chart stand without it."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from evaluate.common import parser, png_bytes, read_documents, split_file
from evaluate.topics import top_words
from tcnlm_tf.arguments import integer
from tcnlm_tf.data.corpus import write_bytes
from tcnlm_tf.errors import UserError, exit_on_user_error


def bar_chart(topics: np.ndarray, labels: list[str], title: str) -> bytes:
    """PNG bytes of a bar chart of ``topics`` [T], the leading topics labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 0.18 * len(topics)), 3.2))
    ax.bar(np.arange(len(topics)), topics, color="#4472c4")
    for k in np.argsort(-topics)[:3]:
        ax.annotate(labels[k], (k, topics[k]), ha="center", va="bottom", fontsize=8)
    ax.set_xlabel("topic")
    ax.set_ylabel("proportion")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return png_bytes(fig)


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict:
    p = parser("infer", __doc__.split(": ", 1)[1])
    p.add_argument("--text-file", help="file in the corpus format (default: the run's test split)")
    p.add_argument("--document", type=integer(0), default=0,
                   help="which line (0-based) (default: 0)")
    p.add_argument("--samples", type=integer(0), default=0,
                   help="average this many posterior samples instead of the mean (default: 0)")
    args = p.parse_args(argv)
    from tcnlm_tf.metrics.evaluation import document_topics
    from tcnlm_tf.runs.loading import load_run, require_topic_model
    from train.summaries import write_image, write_or_warn

    run = load_run(args.run, data_dir=args.data_dir)
    require_topic_model(run, "evaluate.infer")
    path = Path(args.text_file) if args.text_file else split_file(run, "test")
    documents = read_documents(path)
    if not 0 <= args.document < len(documents):
        raise UserError(f"--document {args.document} out of range: {path} has "
                        f"{len(documents)} usable documents (0..{len(documents) - 1})")
    t = document_topics(run, [documents[args.document]], args.samples)[0]
    words = top_words(run, 5)
    labels = [f"{k}: {' '.join(w[:2])}" for k, w in enumerate(words)]
    for k in np.argsort(-t)[:5]:
        print(f"topic {k:3d}  {t[k]:.3f}  {' '.join(words[k])}")
    png = bar_chart(t, labels, f"{path.name}, document {args.document}")
    image_path, board = run.files.topic_plot(args.document), run.files.tensorboard
    write_bytes(image_path, png)
    shown = write_or_warn(board, "the bar chart", lambda: write_image(
        board, f"topics/document_{args.document}", png),
        written=f"{image_path} and the topic proportions printed")
    print(f"bar chart: {image_path}" + (f"; TensorBoard: {board}" if shown else ""))
    result = {"file": str(path), "document": args.document, "topics": t.tolist()}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
