"""The ``scaling`` section: how the time of one training epoch grows (a) with the corpus: the
LSTM language model (``--scaling-hidden`` units, ``--scaling-embedding`` embedding) on
synthetic corpora of ``--corpus-docs`` training documents (further settings: the models
section's ``--synthetic``), and (b) with the number of topics: TCNLM with each of
``--topic-counts`` topics on the smallest of those corpora.

Each run is a fresh ``Trainer`` (temporary run directory, corpora in a temporary cache) that
trains one epoch with :meth:`~train.trainer.Trainer.train_epoch` and
:meth:`~train.trainer.Trainer.end_epoch` (validation, checkpoint); the wall time of the two
calls is set beside the time the trainer's own rate predicts, training tokens /
``epoch_summary["tokens_per_sec"]`` (the rate of the progress line). Their ratio checks that
an epoch costs no more than its progress line says; the validation pass and the checkpoint
are inside the wall time only, so a ratio a few per cent above 1 is expected. Each run's
first steps trace its ``tf.function`` steps, a cost of about the same size in every run.
Least-squares lines give the seconds per 1,000 training tokens and per topic, and the ratio
of the largest to the smallest epoch time.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.harness import print_table, synthetic_flags, train_run_config
from tcnlm_tf.arguments import integer, integer_list
from tcnlm_tf.errors import UserError


#: the Keras backends it runs under (it times TensorFlow training steps)
BACKENDS = ("tensorflow",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    scale = parser.add_argument_group("scaling")
    scale.add_argument("--corpus-docs", type=integer_list(1), default=[250, 500, 1000],
                       help="training documents of the synthetic corpora (default: "
                            "250,500,1000)")
    scale.add_argument("--topic-counts", type=integer_list(1), default=[50, 100, 150],
                       help="TCNLM topic counts, on the smallest corpus (default: 50,100,150)")
    scale.add_argument("--scaling-hidden", type=integer(1), default=64,
                       help="hidden size of the scaling runs (default: 64)")
    scale.add_argument("--scaling-embedding", type=integer(1), default=32,
                       help="embedding size of the scaling runs (default: 32)")


def check(args: argparse.Namespace) -> None:
    """When the section runs: two different ``--corpus-docs`` and ``--topic-counts`` at
    least, for a slope."""
    for flag, values in (("--corpus-docs", args.corpus_docs),
                         ("--topic-counts", args.topic_counts)):
        if "scaling" in args.sections and len(set(values)) < 2:
            raise UserError(f"{flag} needs two different values at least, for a slope; "
                            f"got {values}")


def least_squares_slope(xs: list[float], ys: list[float]) -> float:
    """The slope of the least-squares line through the points (xs, ys) (two distinct x at
    least)."""
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    return (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
            / sum((x - mean_x) ** 2 for x in xs))


def one_epoch(flags: list[str], cache_dir: Path) -> dict[str, float]:
    """Trains one epoch of the run ``python -m train.run FLAGS`` would start, in a fresh
    temporary run directory: ``tokens`` (predicted training tokens), ``wall`` (seconds of
    ``train_epoch()`` + ``end_epoch()``), ``rate`` (the trainer's tokens/s)."""
    from tcnlm_tf.data.loading import load_corpus
    from train.trainer import Trainer

    quiet = lambda _: None  # noqa: E731
    config = train_run_config(flags)
    corpus = load_corpus(config.data, cache_dir=cache_dir, log=quiet)
    with tempfile.TemporaryDirectory(prefix="tcnlm-benchmark-") as run_dir:
        trainer = Trainer(config, corpus, Path(run_dir), log=quiet)
        trainer.prepare()
        start = time.perf_counter()
        trainer.train_epoch()
        trainer.end_epoch()
        wall = time.perf_counter() - start
    return {"tokens": corpus.splits["train"].num_predicted_tokens(config.data.line_end),
            "wall": wall,
            "rate": trainer.epoch_summary["tokens_per_sec"]}


def run(args: argparse.Namespace) -> None:
    """One epoch per run (see the module docstring): the LSTM over synthetic corpora of
    ``--corpus-docs`` documents, then TCNLM with each of ``--topic-counts`` topics on the
    smallest; per run the training tokens, the wall seconds, the trainer's rate and the time
    that rate predicts; then least-squares slopes."""
    size = ["--hidden-size", str(args.scaling_hidden), "--embedding-dim",
            str(args.scaling_embedding), "--seed", str(args.seed), "--epochs", "1",
            "--dataset", "synthetic"] + synthetic_flags(args.synthetic)
    corpus_docs = sorted(set(args.corpus_docs))
    print(f"scaling, one epoch per run (Trainer.train_epoch + end_epoch, fresh trainer "
          f"each): {args.scaling_hidden} units, embedding {args.scaling_embedding}; "
          f"predicted = train tokens / the trainer's tokens/s", flush=True)
    runs = []
    with tempfile.TemporaryDirectory(prefix="tcnlm-benchmark-cache-") as cache:
        for docs in corpus_docs:
            runs.append(("lstm", docs, None, one_epoch(
                size + synthetic_flags([f"train_docs={docs}"]) + ["--model", "lstm"],
                Path(cache))))
        for topics in sorted(set(args.topic_counts)):
            runs.append(("tcnlm", corpus_docs[0], topics, one_epoch(
                size + synthetic_flags([f"train_docs={corpus_docs[0]}"])
                + ["--model", "tcnlm", "--num-topics", str(topics)], Path(cache))))
    rows = []
    for model, docs, topics, r in runs:
        predicted = r["tokens"] / r["rate"]
        rows.append((model, f"{docs:,}", "-" if topics is None else str(topics),
                     f"{r['tokens']:,}", f"{r['wall']:.2f}", f"{r['rate']:,.0f}",
                     f"{predicted:.2f}", f"{r['wall'] / predicted:.3f}"))
    print_table(("model", "train docs", "topics", "train tokens", "wall s", "tokens/s",
                 "predicted s", "wall / (tokens ÷ rate)"), rows, left=1)
    by_size = [r for model, _, topics, r in runs if topics is None]
    by_topics = [(topics, r) for _, _, topics, r in runs if topics is not None]

    def spread(values):
        return f"largest / smallest epoch time {max(values) / min(values):.2f}x"

    walls = [r["wall"] for r in by_size]
    predicted = [r["tokens"] / r["rate"] for r in by_size]
    kilotokens = [r["tokens"] / 1000 for r in by_size]
    topic_walls = [r["wall"] for _, r in by_topics]
    print("slopes (least-squares lines):")
    print(f"  corpus size, wall time: {least_squares_slope(kilotokens, walls):.4f} s per 1,000 "
          f"training tokens; {spread(walls)}")
    print(f"  corpus size, predicted time: {least_squares_slope(kilotokens, predicted):.4f} s "
          f"per 1,000 training tokens; {spread(predicted)}")
    print(f"  topic count, wall time: "
          f"{least_squares_slope([t for t, _ in by_topics], topic_walls):.4f} s per topic; "
          f"{spread(topic_walls)}")
