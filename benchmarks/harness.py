"""The timing harness of ``python -m benchmarks.run`` and of the other benchmarks of this
folder: what runs the contenders, what prints the figures, and the flags every section
shares. It knows none of the sections (``benchmarks/sections/``).

Timing protocol (:func:`time_contenders`). Every contender is a training step built before
any timing, compiled as the Keras backend compiles one (:func:`gradient_step`: a
``tf.function`` under TensorFlow). Each gets ``--warmup`` untimed calls (the first one traces);
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
from tcnlm_tf.runs.provenance import bf16_units, cpu_model


def backend_line() -> str:
    """The Keras backend and its library's version: ``tensorflow 2.21.0``, ``jax 0.4.38``,
    ``torch 2.13.0+cpu``."""
    import importlib

    import keras

    backend = keras.backend.backend()
    try:
        return f"{backend} {importlib.import_module(backend).__version__}"
    except (ImportError, AttributeError):
        return backend


def accelerator() -> str | None:
    """The accelerator the Keras backend computes on (``NVIDIA H200``), or ``None`` on the
    CPU."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        return None if device.platform == "cpu" else device.device_kind
    if backend == "torch":
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    return tf.config.experimental.get_device_details(gpus[0]).get("device_name", gpus[0].name)


def machine_line() -> str:
    """One line: CPU model, cores, its bfloat16 units, load, Python, Keras and the backend's
    versions, and the accelerator the backend computes on, if any."""
    import keras

    model = cpu_model()
    try:
        load = "load avg {:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())
    except (OSError, AttributeError):
        load = "load avg n/a"
    return (f"machine: {model}, {os.cpu_count()} logical CPUs, bfloat16 units "
            f"{bf16_units()}, {load}, "
            f"{platform.system()} {platform.machine()}, Python {platform.python_version()}, "
            f"Keras {keras.__version__}, backend {backend_line()}, "
            f"computing on {accelerator() or 'the CPU'}")


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


def size_list(known: dict[str, tuple[int, ...]], flag: str, letters: str,
              example: str) -> Callable[[str], list[tuple[str, tuple[int, ...]]]]:
    """argparse type: a comma list of names of ``known`` and sizes written as ``letters``
    (``NxGxnxm``: as many positive integers as letters, joined by ``x``) -> ``[(name or the
    size as written, sizes)]`` in the order given."""
    dims = len(letters.split("x"))

    def parse(text: str) -> list[tuple[str, tuple[int, ...]]]:
        chosen = []
        for item in (v.strip() for v in text.split(",") if v.strip()):
            if item in known:
                chosen.append((item, known[item]))
                continue
            parts = item.split("x")
            if len(parts) != dims or not all(p.isdigit() and int(p) > 0 for p in parts):
                raise UserError(f"{flag} {item!r}: give {', '.join(known)} or {letters} with "
                                f"{dims} positive integers ({example})")
            chosen.append((item, tuple(int(p) for p in parts)))
        if not chosen:
            raise UserError(f"{flag}: none given; give {', '.join(known)} or {letters}")
        return chosen

    return parse


def add_probe_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags a probe that times TensorFlow contenders in one process reads (see
    :func:`tensorflow_at` and :func:`time_contenders`): ``--threads``, ``--warmup``,
    ``--rounds``, ``--steps``."""
    parser.add_argument("--threads", type=integer(1), default=1,
                        help="TensorFlow's intra- and inter-op threads (default: 1)")
    parser.add_argument("--warmup", type=integer(0), default=2,
                        help="untimed steps per contender; the first traces (default: 2)")
    parser.add_argument("--rounds", type=integer(1), default=5,
                        help="timed rounds (default: 5)")
    parser.add_argument("--steps", type=integer(1), default=2,
                        help="steps per contender per round (default: 2)")


def tensorflow_at(threads: int):
    """Imports TensorFlow (quiet unless ``TF_CPP_MIN_LOG_LEVEL`` says otherwise) with
    ``threads`` intra- and inter-op threads, prints :func:`machine_line` and returns the
    ``tensorflow`` module: the start of a probe that times TensorFlow contenders."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    print(machine_line())
    return tf


def add_timing_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the timing protocol (module docstring), which every section that times
    contenders reads: ``--warmup``, ``--rounds``, ``--steps``, ``--precisions``, ``--seed``."""
    timing = parser.add_argument_group("timing (recurrent, models, decoders, peers)")
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
    from tcnlm_tf.cli.command_line import build_parser as train_parser
    from tcnlm_tf.cli.command_line import config_from_args

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


#: how :func:`gradient_step` compiles a step under each Keras backend, for the tables' headings
STEP_COMPILED = {"tensorflow": "a tf.function of a tf.GradientTape step",
                 "jax": "jax.jit of jax.value_and_grad through a keras.StatelessScope",
                 "torch": "eager, torch.autograd.grad"}


def check_backend(sections: dict[str, object], chosen: list[str], flag: str) -> None:
    """Raises :class:`UserError` (one line) when a section of ``chosen`` cannot run under the
    Keras backend: each module of ``sections`` lists the backends it runs under in its
    ``BACKENDS``."""
    import keras

    backend = keras.backend.backend()
    refused = [name for name in chosen if backend not in sections[name].BACKENDS]
    if refused:
        runnable = [name for name, section in sections.items() if backend in section.BACKENDS]
        supported = sorted({b for name in refused for b in sections[name].BACKENDS})
        raise UserError(
            f"{flag} {','.join(refused)}: {'runs' if len(refused) == 1 else 'run'} under "
            f"the {' or '.join(supported)} Keras backend only, not under {backend} "
            f"(KERAS_BACKEND={backend})"
            + (f"; under {backend}, choose {flag} {','.join(runnable)}" if runnable else ""))


def gradient_step(loss_fn: Callable, variables: list) -> Callable[[int], float]:
    """A contender: one compiled call of the forward pass ``loss_fn()`` (a scalar) and its
    gradients for every variable of ``variables``, compiled as the Keras backend compiles
    its own training step:

    * TensorFlow: a ``tf.function`` of a ``tf.GradientTape`` (``variables`` may be
      ``tf.Variable`` or Keras variables); waits for the loss and the first gradient (the
      call returns once all its outputs are computed). Raises ``ValueError`` when tracing
      finds a variable the loss does not reach.
    * JAX: ``jax.jit`` of ``jax.value_and_grad`` of the forward pass, the variables' values
      passed in as arguments through a ``keras.StatelessScope`` (as Keras's JAX trainer
      runs a layer statelessly); waits for the loss and every gradient (a JAX call returns
      before its results are computed). A variable the loss does not reach gets a zero
      gradient.
    * PyTorch: the forward pass and ``torch.autograd.grad``, eagerly (as Keras's PyTorch
      trainer runs by default). Raises ``ValueError`` at the first call for a variable the
      loss does not reach.

    Under JAX and PyTorch, ``variables`` are Keras variables (``keras.Variable``, a layer's
    weights), inputs included."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        return _jax_gradient_step(loss_fn, variables)
    if backend == "torch":
        return _torch_gradient_step(loss_fn, variables)
    if backend != "tensorflow":
        raise UserError(f"the benchmarks time no gradient step under the {backend} backend")
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


def _jax_gradient_step(loss_fn: Callable, variables: list) -> Callable[[int], float]:
    import jax
    import keras

    def loss_of(values):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return loss_fn()

    step = jax.jit(jax.value_and_grad(loss_of))

    def run(_: int) -> float:
        jax.block_until_ready(step([v.value for v in variables]))
        return 0.0

    return run


def _torch_gradient_step(loss_fn: Callable, variables: list) -> Callable[[int], float]:
    import torch

    values = [v.value for v in variables]
    checked = []

    def run(_: int) -> float:
        loss = loss_fn()
        grads = torch.autograd.grad(loss, values, allow_unused=True)
        if not checked:
            missing = [v.name for v, g in zip(variables, grads) if g is None]
            if missing:
                raise ValueError(f"the loss does not depend on {missing}")
            checked.append(True)
        loss.item()
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
