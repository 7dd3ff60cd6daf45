"""``python -m evaluate.score --saved-model saved_models/<name>/<version> --text-file F``:
test perplexity of a corpus-format file through an exported SavedModel, without the training
run, so an export can be checked where only it was copied.

Each sentence goes to the ``score`` signature with the context the model was trained with:
topic models get the rest of the document (or the sentences before it, if trained with
``--context preceding``), a document-mode LSTM and the LCLM the sentences before it (the LCLM
reads the last of them), a sentence-mode LSTM nothing (the export says which in its
``context_kind`` variable). The
total equals ``python -m evaluate.perplexity --run`` on the same file.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from evaluate.common import read_documents
from tcnlm_tf.arguments import integer
from tcnlm_tf.data.corpus import write_text
from tcnlm_tf.errors import UserError, exit_on_user_error


def load_saved_model(path: Path):
    """The export at ``path`` (a version directory) as a
    :class:`~tcnlm_tf.serving.api.LoadedModel`, with a clear error otherwise."""
    if not (path / "saved_model.pb").is_file():   # before the slow TensorFlow import
        raise UserError(f"{path} is not a SavedModel version directory (no saved_model.pb): "
                        "pass saved_models/<name>/<version> as written by "
                        "`python -m train.export`")
    from tcnlm_tf.serving.api import load_export
    return load_export(path)


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m evaluate.score",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--saved-model", type=Path, required=True,
                   help="a version directory written by `python -m train.export`")
    p.add_argument("--text-file", type=Path, required=True,
                   help="corpus-format file: one document per line, sentences separated by "
                        "a TAB, tokens by a space")
    p.add_argument("--batch-size", type=integer(1), default=64,
                   help="sentences per request (default: 64)")
    p.add_argument("--output", type=Path, help="also write the result as JSON here")
    args = p.parse_args(argv)
    if not args.text_file.is_file():
        raise UserError(f"--text-file {args.text_file} not found")
    model = load_saved_model(args.saved_model)
    documents = read_documents(args.text_file)
    result = model.corpus_score(documents, args.batch_size)
    print(f"{args.text_file}: {result['sentences']} sentences, {result['tokens']} tokens, "
          f"perplexity {result['perplexity']:.2f} (context: {result['context']})")
    if args.output:
        write_text(args.output, json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
