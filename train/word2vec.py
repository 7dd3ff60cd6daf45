"""``python -m train.word2vec``: train word2vec vectors on a corpus's training split and write
them in the word2vec format that ``train.run --embeddings`` reads.

The TDLM paper initialises every model's word embeddings with the 300-d word2vec vectors
trained on Google News (its footnote 10: the baselines too). That file cannot be downloaded
here; users who have it pass it to ``--embeddings`` directly. This command stands in for it
on any corpus, without a download: skip-gram vectors trained with gensim on the training
split only (validation and test text never reaches the embeddings). Its defaults are the
settings of the TDLM authors' own ``word2vec_train.py`` (jhlau/topically-driven-language-model:
skip-gram, window 5, 5 negative samples, sub-sampling 1e-5, minimum count 2, 100 epochs,
each document one word sequence), with the vector size of the project's embeddings (300).
"""
from __future__ import annotations

import argparse
import time
import zlib
from pathlib import Path

from tcnlm_tf.arguments import dataset_name, finite_float, integer, random_seed
from tcnlm_tf.cli.command_line import key_value
from tcnlm_tf.config import (DATASETS, DataConfig, check_data_dir_given, default_cache_dir,
                             default_data_dir)
from tcnlm_tf.data.corpus import read_corpus_file
from tcnlm_tf.data.embeddings import BINARY, TEXT, write_vectors
from tcnlm_tf.data.loading import source_dir
from tcnlm_tf.errors import UserError, exit_on_user_error

FORMATS = (BINARY, TEXT)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m train.word2vec", allow_abbrev=False,
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  python -m train.word2vec --dataset apnews --data-dir ../shared/data "
               "--output apnews-w2v.bin\n"
               "  python -m train.run --dataset apnews --data-dir ../shared/data --model tdlm "
               "--embeddings apnews-w2v.bin\n"
               "With one worker (the default) and the same --seed the vectors are the same "
               "on every run;\nseveral workers train faster but not reproducibly (gensim's "
               "threads race).")
    parser.add_argument("--dataset", type=dataset_name, default="synthetic", metavar="NAME",
                        help=f"corpus whose train.txt is read: {', '.join(DATASETS)} or the "
                        "folder <data-dir>/NAME of your own (default: %(default)s)")
    parser.add_argument("--data-dir", default=None,
                        help=f"directory holding <dataset>/train.txt (default: $TCNLM_DATA_DIR "
                        f"or ./data, now {default_data_dir()})")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help=f"where the synthetic corpus is generated (default: "
                        f"$TCNLM_CACHE_DIR or ./.cache, now {default_cache_dir()})")
    parser.add_argument("--synthetic", type=key_value, action="append", metavar="KEY=VALUE",
                        help="synthetic-corpus setting, repeatable, as train.run's")
    parser.add_argument("--output", type=Path, required=True, metavar="FILE",
                        help="the vectors file to write (replaced atomically)")
    parser.add_argument("--format", choices=FORMATS, default="binary",
                        help="binary (the word2vec C tool's and Google News's format) or text "
                        "(default: %(default)s)")
    parser.add_argument("--dim", type=integer(1), default=300,
                        help="vector size; must equal the model's --embedding-dim "
                        "(default: %(default)s)")
    parser.add_argument("--window", type=integer(1), default=5, help="context window (default: 5)")
    parser.add_argument("--min-count", type=integer(1), default=2,
                        help="words seen fewer times get no vector (default: 2)")
    parser.add_argument("--negative", type=integer(1), default=5,
                        help="negative samples per word (default: 5)")
    parser.add_argument("--sample", type=finite_float, default=1e-5,
                        help="sub-sampling threshold of frequent words (default: 1e-5)")
    parser.add_argument("--cbow", action="store_true",
                        help="train CBOW instead of skip-gram")
    parser.add_argument("--epochs", type=integer(1), default=100,
                        help="passes over the training split (default: %(default)s)")
    parser.add_argument("--workers", type=integer(1), default=1,
                        help="training threads (default: 1, reproducible)")
    parser.add_argument("--seed", type=random_seed, default=0, help="random seed (default: 0)")
    return parser


def _check(args: argparse.Namespace) -> None:
    check_data_dir_given(args.dataset, args.data_dir)
    if not 0 <= args.sample < 1:
        raise UserError(f"--sample must be in [0, 1) (got {args.sample})")
    if args.synthetic and args.dataset != "synthetic":
        raise UserError("--synthetic settings only apply to --dataset synthetic")
    if args.output.is_dir():
        raise UserError(f"--output {args.output} is a directory; give a file name")


def _stable_hash(text: str) -> int:
    """gensim seeds each word's initial vector from ``hash(word + seed)``; Python's ``hash``
    of a string changes between processes, this one does not."""
    return zlib.crc32(text.encode("utf-8"))


def train_vectors(documents: list[list[str]], args: argparse.Namespace):
    """gensim ``KeyedVectors`` trained on ``documents`` (each a list of tokens)."""
    from gensim.models import Word2Vec

    return Word2Vec(documents, vector_size=args.dim, window=args.window,
                    min_count=args.min_count, sample=args.sample, negative=args.negative,
                    hs=0, sg=0 if args.cbow else 1, epochs=args.epochs, workers=args.workers,
                    seed=args.seed, hashfxn=_stable_hash).wv


@exit_on_user_error
def main(argv: list[str] | None = None) -> Path:
    args = build_parser().parse_args(argv)
    _check(args)
    data = DataConfig(dataset=args.dataset, synthetic=dict(args.synthetic or []))
    if args.data_dir is not None:
        data.data_dir = args.data_dir
    path = source_dir(data, args.cache_dir) / "train.txt"
    documents, stats = read_corpus_file(path)
    # one word sequence per document, as the TDLM authors' LineSentence on a corpus file
    sequences = [[token for sentence in document for token in sentence]
                 for document in documents]
    print(f"word2vec: {stats.documents:,} documents, {stats.tokens:,} tokens from {path}; "
          f"{'CBOW' if args.cbow else 'skip-gram'}, {args.dim} dimensions, {args.epochs} "
          f"epochs, {args.workers} worker(s)", flush=True)
    start = time.perf_counter()
    vectors = train_vectors(sequences, args)
    if not len(vectors):
        raise UserError(f"no word of {path} occurs --min-count {args.min_count} times: "
                        "nothing to train; lower --min-count")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_vectors(args.output, list(vectors.index_to_key), vectors.vectors, args.format)
    print(f"wrote {len(vectors):,} {args.dim}-d vectors to {args.output} ({args.format}) in "
          f"{time.perf_counter() - start:.0f} s; use them with train.run --embeddings "
          f"{args.output}")
    return args.output


if __name__ == "__main__":
    main()
