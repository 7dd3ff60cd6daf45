"""The timing harness of ``python -m benchmarks.run`` and of the other benchmarks of this
folder: what runs the contenders, what prints the figures, and the flags every section
shares. It knows none of the sections (``benchmarks/sections/``).

Timing protocol (:func:`time_contenders`). Every contender is a ``tf.function`` training
step built before any timing. Each gets ``--warmup`` untimed calls (the first one traces);
then ``--rounds`` rounds each time every contender once, in turn, for ``--steps`` steps, the
first contender of a round rotating from round to round (so a contender is not always timed
right after the same other one, on a machine whose load varies). The tables give the median
over the rounds of the time per step, and ratios to the section's reference row. Every
figure is computed in the run.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Callable

from tcnlm_tf.arguments import integer, random_seed
from tcnlm_tf.errors import UserError
from tcnlm_tf.precision import PRECISIONS


def machine_line() -> str:
    """One line: CPU model, cores, load, Python and TensorFlow versions."""
    import tensorflow as tf

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = "load avg {:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())
    except (OSError, AttributeError):
        load = "load avg n/a"
    return (f"machine: {model}, {os.cpu_count()} logical CPUs, {load}, "
            f"{platform.system()} {platform.machine()}, Python {platform.python_version()}, "
            f"TensorFlow {tf.__version__}")


def ratio(value: float, reference: float | None) -> str:
    return f"{value / reference:.2f}x" if reference else "-"


# --------------------------------------------------------------------------------- flags


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are :class:`UserError` (one line, exit status 2)."""

    def error(self, message):
        raise UserError(f"{message} ({self.prog} --help lists the flags)")


def name_list(choices: tuple[str, ...], flag: str) -> Callable[[str], list[str]]:
    """argparse type: a comma list of names out of ``choices`` -> those names in the order of
    ``choices``, without duplicates."""

    def parse(text: str) -> list[str]:
        chosen = [v.strip() for v in text.split(",") if v.strip()]
        unknown = [v for v in chosen if v not in choices]
        if unknown or not chosen:
            raise UserError(f"{flag} {text!r}: "
                            f"{'unknown ' + ', '.join(unknown) if unknown else 'none given'}; "
                            f"choose from {','.join(choices)}")
        return [c for c in choices if c in chosen]

    return parse


def add_timing_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the timing protocol (module docstring), which every section that times
    contenders reads: ``--warmup``, ``--rounds``, ``--steps``, ``--precisions``, ``--seed``."""
    timing = parser.add_argument_group("timing (recurrent, models, decoders)")
    timing.add_argument("--warmup", type=integer(0), default=2,
                        help="untimed calls per contender before the rounds; the first traces "
                             "(default: 2)")
    timing.add_argument("--rounds", type=integer(1), default=5,
                        help="timed rounds; each times every contender once (default: 5)")
    timing.add_argument("--steps", type=integer(1), default=3,
                        help="training steps per contender per round (default: 3)")
    timing.add_argument("--precisions", default="float32,mixed_bfloat16",
                        type=name_list(PRECISIONS, "--precisions"),
                        help=f"precisions timed side by side, out of {','.join(PRECISIONS)}: "
                             "the recurrent layers' dtype policy, the models' train.run "
                             "--precision (default: float32,mixed_bfloat16)")
    timing.add_argument("--seed", type=random_seed, default=0,
                        help="seed of the weights, inputs and knowledge bases (default: 0)")


def train_run_config(flags: list[str]):
    """The ``RunConfig`` that ``python -m train.run FLAGS`` trains, validated (for the
    sections that time a ``Trainer``)."""
    from tcnlm_tf.command_line import build_parser as train_parser
    from tcnlm_tf.command_line import config_from_args

    config = config_from_args(train_parser().parse_args(flags))
    config.validate()
    return config


def synthetic_flags(items: list[str]) -> list[str]:
    """``["A=1", "B=2"]`` -> ``["--synthetic", "A=1", "--synthetic", "B=2"]`` (train.run)."""
    return [flag for item in items for flag in ("--synthetic", item)]


# -------------------------------------------------------------------------------- timing


def time_contenders(contenders: dict[str, Callable[[int], float]], warmup: int, rounds: int,
                    steps: int) -> dict[str, dict[str, float]]:
    """The common protocol (module docstring). ``contenders[name](i)`` runs training step
    ``i`` (0, 1, ...; a round always runs steps ``0..steps-1``), waits for its results and
    returns the work it did (tokens; 0 where nobody counts). Returns, per contender,
    ``seconds``: the median over the rounds of the seconds per step, ``rate``: the median
    over the rounds of work per second, and ``work``: the median work per step."""
    for run in contenders.values():
        for i in range(warmup):
            run(i)
    names = list(contenders)
    seconds = {name: [] for name in names}
    rates = {name: [] for name in names}
    works = {name: [] for name in names}
    for round_ in range(rounds):
        first = round_ % len(names)
        for name in names[first:] + names[:first]:
            start = time.perf_counter()
            work = sum(contenders[name](i) for i in range(steps))
            elapsed = time.perf_counter() - start
            seconds[name].append(elapsed / steps)
            rates[name].append(work / elapsed)
            works[name].append(work / steps)
    return {name: {"seconds": statistics.median(seconds[name]),
                   "rate": statistics.median(rates[name]),
                   "work": statistics.median(works[name])} for name in names}


def gradient_step(loss_fn: Callable, variables: list) -> Callable[[int], float]:
    """A contender: one ``tf.function`` call of the forward pass ``loss_fn()`` (a scalar) and
    its gradients for every tensor of ``variables``; waits for the loss and the first
    gradient. Raises ``ValueError`` when tracing finds a variable the loss does not reach."""
    import tensorflow as tf

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn()
        grads = tape.gradient(loss, variables)
        missing = [v.name for v, g in zip(variables, grads) if g is None]
        if missing:
            raise ValueError(f"the loss does not depend on {missing}")
        return loss, grads

    def run(_: int) -> float:
        loss, grads = step()
        loss.numpy()
        grads[0].numpy()
        return 0.0

    return run


def unique(variables) -> list:
    """``variables`` without repeats (a shared embedding is listed once)."""
    return list({id(v): v for v in variables}.values())


def print_table(header: tuple[str, ...], rows: list[tuple[str, ...]], left: int = 1) -> None:
    """Aligned plain-text columns: the first ``left`` left-aligned (names), the others
    right-aligned (figures)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return " | ".join(c.ljust(w) if i < left else c.rjust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(line(row))
