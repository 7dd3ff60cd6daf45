"""``python -m train.prepare``: raw text to the corpus format (see :mod:`tcnlm_tf.data.prepare`)."""

from __future__ import annotations

import argparse

from tcnlm_tf.arguments import integer, random_seed
from tcnlm_tf.data import prepare
from tcnlm_tf.errors import UserError, exit_on_user_error

DESCRIPTION = """\
Turn raw text into the corpus format used for training: one document per line, sentences
separated by a TAB, tokens separated by a single space, lower-cased. Sentences are split by
an NLTK Punkt model trained on the corpus itself (a TAB or a blank line always ends a
sentence); words by NLTK's Treebank-style tokenizer ("don't" -> "do n't"). Documents are
shuffled with --seed and split into train.txt, valid.txt and test.txt in --output, or all
written to --output-name with --no-split. Empty documents are skipped, undecodable bytes
replaced, documents longer than --max-doc-tokens truncated; all are counted in the summary."""

EPILOG = """\
examples:
  python -m train.prepare --input raw_articles/ --output data/mycorpus
  python -m train.prepare --input docs.txt --output data/mycorpus --split 0.9,0.05,0.05 --seed 1
  python -m train.prepare --input my_train.txt --output data/mycorpus --no-split \\
      --output-name train.txt"""


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m train.prepare",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--input",
        required=True,
        metavar="PATH",
        help="a text file, or a directory searched recursively for --glob",
    )
    parser.add_argument(
        "--output",
        required=True,
        metavar="DIR",
        help="directory to write the corpus files into (created)",
    )
    parser.add_argument(
        "--glob",
        default=prepare.DEFAULT_GLOB,
        metavar="PATTERN",
        help="which files to read from an input directory (default: %(default)s)",
    )
    parser.add_argument(
        "--one-per-line",
        action="store_true",
        help="one document per line in every input file (the default for a single input file; "
        "otherwise each file in a directory is one document)",
    )
    split = parser.add_mutually_exclusive_group()
    split.add_argument(
        "--split",
        default=",".join(f"{f:g}" for f in prepare.DEFAULT_SPLIT),
        metavar="TRAIN,VALID,TEST",
        help="train,valid,test fractions: positive, summing to 1 (default: %(default)s)",
    )
    split.add_argument(
        "--no-split",
        action="store_true",
        help="write all documents to one file, --output-name, instead",
    )
    parser.add_argument(
        "--output-name",
        metavar="NAME",
        help=f"file name for --no-split (default: {prepare.DEFAULT_OUTPUT_NAME})",
    )
    parser.add_argument(
        "--seed",
        type=random_seed,
        default=0,
        metavar="N",
        help="seed of the train/valid/test shuffle (default: %(default)s)",
    )
    parser.add_argument(
        "--max-doc-tokens",
        type=integer(1),
        default=prepare.DEFAULT_MAX_DOC_TOKENS,
        metavar="N",
        help="truncate longer documents to this many tokens (default: %(default)s)",
    )
    parser.add_argument(
        "--encoding",
        default=prepare.DEFAULT_ENCODING,
        metavar="NAME",
        help="encoding of the input; undecodable bytes are replaced and counted "
        "(default: %(default)s)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")
    return parser


@exit_on_user_error
def main(argv: list[str] | None = None) -> prepare.PrepareSummary:
    """Parse ``argv``, prepare the corpus, print the summary; return it."""
    args = build_parser().parse_args(argv)
    if args.output_name is not None and not args.no_split:
        raise UserError(
            "--output-name only applies with --no-split "
            "(split mode writes train.txt, valid.txt, test.txt)"
        )
    summary = prepare.prepare_corpus(
        args.input,
        args.output,
        one_per_line=True if args.one_per_line else None,
        glob=args.glob,
        encoding=args.encoding,
        split=None if args.no_split else prepare.parse_fractions(args.split),
        seed=args.seed,
        output_name=args.output_name or prepare.DEFAULT_OUTPUT_NAME,
        max_doc_tokens=args.max_doc_tokens,
        force=args.force,
    )
    print(summary.report())
    return summary


if __name__ == "__main__":
    main()
