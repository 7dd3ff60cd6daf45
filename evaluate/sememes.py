"""``python -m evaluate.sememes --run runs/<name> --text "..."``: what an SDLM-decoded model
predicts for the word after a text, and why (Gu et al. 2018, Sec. 4.3 and Table 5): the 5
most probable next words P(w|g) (eq. 9), the 5 sememes of largest q_k (eq. 4, the sememe
predictor's gate on expert k) and the 5 sememes the next word's sense most probably carries,
sum over the senses s of sememe k of P(s|g) (eq. 8); the private sememes of words without a
knowledge-base entry are not listed. The two sememe columns differ: q_k only scales expert
k's scores g^T U_k w_s, which may be negative, so a q_k near 1 does not by itself say that
the next word carries sememe k. Each ``--text`` is read as the start of a
sentence (after ``<eos>``); ``--document`` gives models with a document context theirs. The
tables also go to TensorBoard (``<run>/tensorboard/sememes``, Text tab); a folder there that
cannot be written (a full disk, a read-only directory) is a warning."""
from __future__ import annotations

import json

from evaluate.common import parser
from tcnlm_tf.errors import UserError, exit_on_user_error

TOP = 5


def predictions(run, kb, text: str, document: str = "", top: int = TOP) -> dict:
    """``{"text", "words": [(word, p)], "sememes": [(sememe, q)], "carried": [(sememe, p)]}``
    for the position after ``text``."""
    import numpy as np
    import tensorflow as tf

    from tcnlm_tf.data.pipeline import EOS_ID, UNK_ID
    from tcnlm_tf.metrics.evaluation import document_batch
    from tcnlm_tf.models.base import Context

    model = run.model
    ids = [EOS_ID] + [run.lm_vocab.index.get(w, UNK_ID) for w in text.split()]
    context = Context()
    if model.context_inputs:
        sentences = [s.split() for s in document.split("\t") if s.split()]
        context = model.context(document_batch(run, [sentences]), training=False)
    hidden, _ = model.encode(tf.constant([ids], tf.int32), context, training=False)
    last = hidden[:, -1]
    word_probs = np.exp(model.log_probs(last, context).numpy()[0])
    q = model.softmax.sememe_probs(last).numpy()[0]
    carried = model.softmax.carried_sememe_probs(last).numpy()[0]
    real = np.arange(kb.num_real_sememes)   # the private sememes come after the real ones
    best_words = np.argsort(-word_probs)[:top]

    def by(values):
        return [(kb.sememes[k], float(values[k])) for k in real[np.argsort(-values[real])[:top]]]

    return {"text": text,
            "words": [(run.lm_vocab.words[i], float(word_probs[i])) for i in best_words],
            "sememes": by(q), "carried": by(carried)}


def format_prediction(result: dict) -> str:
    lines = [f"after: {result['text'] or '(sentence start)'}",
             f"  {'next word':<24} {'P(w|g)':>8}    {'sememe':<28} {'q_k':>6}    "
             f"{'sememe':<28} {'P(carried)':>10}"]
    for (word, p), (sememe, q), (held, c) in zip(result["words"], result["sememes"],
                                                 result["carried"]):
        lines.append(f"  {word:<24} {p:8.4f}    {sememe:<28} {q:6.3f}    {held:<28} {c:10.4f}")
    return "\n".join(lines)


def write_tensorboard(directory, results: list[dict]) -> None:
    """The tables of ``results`` as text ``sememes/<i>`` in TensorBoard's ``directory``."""
    import tensorflow as tf

    writer = tf.summary.create_file_writer(str(directory))
    with writer.as_default():
        for i, result in enumerate(results):
            rows = ["| next word | P(w\\|g) | sememe | q_k | sememe | P(carried) |",
                    "| --- | --- | --- | --- | --- | --- |"]
            rows += [f"| {w} | {p:.4f} | {s} | {q:.3f} | {h} | {c:.4f} |"
                     for (w, p), (s, q), (h, c) in zip(result["words"], result["sememes"],
                                                       result["carried"])]
            tf.summary.text(f"sememes/{i}", f"after: *{result['text']}*\n\n" + "\n".join(rows),
                            step=0)
    writer.flush()


@exit_on_user_error
def main(argv: list[str] | None = None) -> list[dict]:
    p = parser("sememes", __doc__.split(": ", 1)[1].split("\n\n")[0],
               epilog='example: python -m evaluate.sememes --run runs/apnews-sdlm '
                      '--text "the u.s. trade deficit is estimated at $ 40 billion"')
    p.add_argument("--text", action="append", required=True,
                   help="the words before the predicted position (repeatable)")
    p.add_argument("--document", default="",
                   help="TAB-separated sentences: the document context of models that read one")
    args = p.parse_args(argv)
    from tcnlm_tf.data import knowledge
    from tcnlm_tf.decoders.output_layers import knowledge_base_path
    from tcnlm_tf.runs.loading import load_run
    from train.summaries import write_or_warn

    run = load_run(args.run, data_dir=args.data_dir)
    path = knowledge_base_path(run.directory)
    if run.config.model.decoder != "sdlm" or not path.is_file():
        raise UserError(f"{run.directory} is not an SDLM-decoded run (--decoder "
                        f"{run.config.model.decoder}); train one with --model sdlm or "
                        "--decoder sdlm")
    kb = knowledge.load(path)
    results = [predictions(run, kb, text, args.document) for text in args.text]
    for result in results:
        print(format_prediction(result))
    board = run.files.tensorboard / "sememes"
    write_or_warn(board, "the tables", lambda: write_tensorboard(board, results),
                  written="the tables printed")
    print(json.dumps(results, ensure_ascii=False))
    return results


if __name__ == "__main__":
    main()
