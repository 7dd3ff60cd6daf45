"""The ``models`` section: whole-model training throughput of every model of the registry
(:data:`tcnlm_tf.models.registry.MODELS`) and of the LSTM with the decoders no model uses by
default (``lstm-tied``, ``lstm-mos``) at the small preset, under each precision of
``--precisions`` (``train.run --precision``; default float32 and mixed_bfloat16).

Each row is configured as ``evaluate.compare`` configures it (the row's own flags, e.g. the
naive MoE's 30 experts of 100 units, and ``--num-topics`` for the models that take it unless
the row pins it) and built as ``train.run`` builds it (``build_parser`` /
``config_from_args``, ``load_corpus``, ``Trainer`` in a temporary run directory). Every
(row, precision) pair is a contender of the same rounds; the table gives each precision's
tokens/s, its ratio to the LSTM's under the same precision, and the speed-up of each further
precision over the first. One step is :meth:`train.trainer.Trainer.train_step` (forward,
backward, gradient all-reduce and clipping, optimiser update) on one of the first
``--model-batches`` batches of the unshuffled training split, the same batches for every
model. Models with further training tasks (TDLM's topic model) are timed on their
language-model step only. Throughput is predicted tokens (the step's ``tokens``) per second;
one extra line gives the naive MoE's throughput divided by TCNLM's (Wang et al. 2018
factorise the topic-dependent LSTM to avoid the MoE's cost).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from itertools import islice
from pathlib import Path

from benchmarks.harness import (name_list, print_table, ratio, synthetic_flags,
                                time_contenders, train_run_config)
from tcnlm_tf.arguments import dataset_name, integer
from tcnlm_tf.config import default_cache_dir
from tcnlm_tf.data.synthetic import SyntheticConfig
from tcnlm_tf.decoders.registry import decoder_rows
from tcnlm_tf.errors import UserError
from tcnlm_tf.models.registry import MODELS, compare_rows

#: the reference row
REFERENCE_MODEL = "lstm"
#: the default rows: every registered model, and the LSTM with each decoder's compare rows
#: (the decoders no model uses by default: the adaptive softmax is lstm's, sdlm the sdlm model's)
DEFAULT_MODEL_ROWS = (*MODELS, *decoder_rows())


#: the Keras backends it runs under (it times TensorFlow training steps)
BACKENDS = ("tensorflow",)


def add_arguments(parser: argparse.ArgumentParser,
                  default_rows: tuple[str, ...] = DEFAULT_MODEL_ROWS,
                  which: str = "every model and decoder") -> None:
    """The section's flags; ``default_rows`` (described as ``which``) are ``--models``'s
    default."""
    row_names = tuple(compare_rows())
    models = parser.add_argument_group("models")
    models.add_argument("--models", default=",".join(default_rows),
                        type=name_list(row_names, "--models"),
                        help="comma list of evaluate.compare rows, out of "
                             f"{','.join(row_names)} (default: {which}, "
                             f"{','.join(default_rows)})")
    models.add_argument("--dataset", type=dataset_name, default=None, metavar="NAME",
                        help="corpus of the models section (default: apnews when --data-dir "
                             "holds apnews/train.txt, else synthetic)")
    models.add_argument("--data-dir", type=Path, default=Path("../shared/data"),
                        help="directory holding <dataset>/{train,valid,test}.txt "
                             "(default: ../shared/data)")
    models.add_argument("--cache-dir", type=Path, default=None,
                        help="prepared-corpus cache of the models section (default: "
                             f"$TCNLM_CACHE_DIR or .cache, now {default_cache_dir()}); "
                             "the scaling section always uses a temporary one")
    models.add_argument("--model-batches", type=integer(1), default=3,
                        help="training batches the models are timed on, cycled through "
                             "(default: 3)")
    models.add_argument("--synthetic", action="append", default=[], metavar="KEY=VALUE",
                        help="synthetic-corpus setting (a field of "
                             "tcnlm_tf.data.synthetic.SyntheticConfig), repeatable; applies to "
                             "the synthetic corpora of the models and scaling sections "
                             "(scaling sets train_docs itself)")


def check(args: argparse.Namespace) -> None:
    """Every ``--synthetic`` item is KEY=VALUE with KEY a field of ``SyntheticConfig``; no
    ``--dataset``: apnews when ``--data-dir`` holds it, else synthetic."""
    fields = {f.name for f in dataclasses.fields(SyntheticConfig)}
    for item in args.synthetic:
        key = item.split("=", 1)[0].strip()
        if "=" not in item or key not in fields:
            raise UserError(f"--synthetic {item!r}: expected KEY=VALUE with KEY one of "
                            f"{', '.join(sorted(fields))}")
    if args.dataset is None:
        args.dataset = ("apnews" if (args.data_dir / "apnews" / "train.txt").is_file()
                        else "synthetic")


def run(args: argparse.Namespace) -> None:
    """Times ``Trainer.train_step`` (one optimiser step of the language model: forward,
    backward, all-reduce, clipping, update) of every chosen row under every chosen precision
    on the same training batches [batch size, sequence length] (plus each model's context
    inputs); all (row, precision) pairs alternate in the same rounds."""
    import tensorflow as tf

    from train.trainer import count_parameters

    contenders, described, notes, shapes, corpora = {}, {}, [], set(), {}
    no_due = tf.constant(0.0)
    with tempfile.TemporaryDirectory(prefix="tcnlm-benchmark-") as scratch:
        for name in args.models:
            for precision in args.precisions:
                built = row_trainer(args, name, precision, Path(scratch) / f"{name}-{precision}",
                                    corpora, notes)
                if built is None:
                    break
                trainer, batches = built

                def step(i, trainer=trainer, batches=batches):
                    sums, _ = trainer.train_step(batches[i % len(batches)], None, no_due)
                    return float(sums["tokens"])

                contenders[(name, precision)] = step
                described[name] = (row_size(trainer.config), count_parameters(trainer.model))
                shapes.add((trainer.config.train.batch_size, trainer.config.data.seq_len,
                            len(batches)))
                if trainer.tasks and precision == args.precisions[0]:
                    notes.append(f"{name}: language-model step only; its "
                                 f"{', '.join(task.name for task in trainer.tasks)} training "
                                 "step(s) are not timed")
        if not contenders:
            raise UserError("no model left to time: " + "; ".join(notes))
        print(f"models, one training step each (Trainer.train_step): {args.dataset} corpus, "
              f"small preset, " + ", ".join(f"batch {b} x {n}, cycling through the first {k} "
                                            "training batch(es)" for b, n, k in sorted(shapes))
              + f"; precisions {', '.join(args.precisions)}", flush=True)
        times = time_contenders(contenders, args.warmup, args.rounds, args.steps)
    print_model_table(times, described, args.precisions)
    for note in notes:
        print(f"  {note}")
    for precision in args.precisions:
        if ("moe", precision) in times and ("tcnlm", precision) in times:
            print(f"naive MoE tokens/s / TCNLM tokens/s ({precision}): "
                  f"{times['moe', precision]['rate'] / times['tcnlm', precision]['rate']:.2f} "
                  f"(moe {described['moe'][0]}; tcnlm {described['tcnlm'][0]})")


def row_trainer(args: argparse.Namespace, name: str, precision: str, run_dir: Path,
                corpora: dict, notes: list[str]):
    """``(trainer, batches)`` for compare row ``name`` under ``precision``, configured as
    ``evaluate.compare`` configures it (its own flags, ``--num-topics`` unless it pins it) and
    built as ``train.run`` builds it, in ``run_dir``; ``batches``: the first
    ``--model-batches`` training batches, distributed. Reads the corpus once per data
    configuration (``corpora`` caches them). None, with a line appended to ``notes``, for an
    SDLM row over WordNet where WordNet is not installed."""
    from tcnlm_tf.data import knowledge
    from tcnlm_tf.data.loading import load_corpus
    from train.trainer import Trainer

    model, flags = compare_rows()[name]
    shared = ["--dataset", args.dataset, "--preset", "small", "--seed", str(args.seed)]
    if args.dataset == "synthetic":
        shared += synthetic_flags(args.synthetic)
    else:
        shared += ["--data-dir", str(args.data_dir)]
    takes_topics = "num_topics" in MODELS[model].option_names
    topics = (["--num-topics", str(args.num_topics)]
              if takes_topics and "--num-topics" not in flags else [])
    config = train_run_config(shared + flags + topics + ["--precision", precision])
    if config.model.decoder == "sdlm" and \
            config.model.decoder_option("knowledge_base") == "wordnet":
        try:
            knowledge.find_wordnet_dir()
        except UserError as err:
            notes.append(f"{name}: skipped, it needs --knowledge-base wordnet: {err}")
            return None
    key = repr(config.data)
    if key not in corpora:
        corpora[key] = load_corpus(config.data, cache_dir=args.cache_dir,
                                   log=lambda m: print(m, file=sys.stderr))
    trainer = Trainer(config, corpora[key], run_dir, log=lambda _: None)
    trainer.prepare()
    return trainer, list(islice(trainer.distribute(trainer.dataset("train")),
                                args.model_batches))


def row_size(config) -> str:
    """``1x600, adaptive`` (and ``, T=50`` for a model with topics): a row's size."""
    m = config.model
    size = f"{m.num_layers}x{m.hidden_size}, {m.decoder}"
    if "num_topics" in MODELS[m.model].option_names:
        size += f", T={m.option('num_topics')}"
    return size


def print_model_table(times: dict[tuple[str, str], dict[str, float]],
                      described: dict[str, tuple[str, int]], precisions: list[str]) -> None:
    """One row per model: its size and parameters, then per precision its ms/step,
    tokens/s and tokens/s relative to the LSTM's under the same precision, then each
    further precision's tokens/s relative to the first's (the speed-up)."""
    names = list(dict.fromkeys(name for name, _ in times))
    header = ["model", "size", "parameters", "tokens/step"]
    for precision in precisions:
        header += [f"{precision} ms/step", f"{precision} tokens/s",
                   f"x {REFERENCE_MODEL} ({precision})"]
    header += [f"{p} / {precisions[0]}" for p in precisions[1:]]
    rows = []
    for name in names:
        size, parameters = described[name]
        first = times[name, precisions[0]]
        row = [name, size, f"{parameters:,}", f"{first['work']:,.0f}"]
        for precision in precisions:
            measured = times[name, precision]
            reference = times.get((REFERENCE_MODEL, precision), {}).get("rate")
            row += [f"{measured['seconds'] * 1e3:.2f}", f"{measured['rate']:,.0f}",
                    ratio(measured["rate"], reference)]
        row += [ratio(times[name, p]["rate"], first["rate"]) for p in precisions[1:]]
        rows.append(tuple(row))
    print_table(tuple(header), rows, left=2)
