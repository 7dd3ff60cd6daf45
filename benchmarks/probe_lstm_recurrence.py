"""How fast are the project's LSTM recurrences against ``torch.nn.LSTM`` and Keras's loops?
A probe.

One training step (forward, and backward to the inputs x and every weight; the loss is the
float32 sum of the outputs ``[B, L, n_h]``, ``[B, L, K n_h]`` for ``moe``) of each
contender on the same ``x [B, L, n_x]`` (normal noise, fixed seed), under TensorFlow on the
CPU in a ``tf.function`` of a ``tf.GradientTape``:

* ``torch``: ``torch.nn.LSTM(n_x, n_h, batch_first=True)``, eager autograd (the default
  reference of the ratios);
* ``keras``: ``keras.layers.LSTM(n_h, return_sequences=True)``;
* ``hoisted``: :class:`layers.hoisted_lstm.HoistedLSTM` as the project's models build it
  (its defaults); ``hoisted-true``, ``hoisted-false``: with ``hoist=True``, ``False``;
  ``hoisted-generic``: with ``hoist=True`` through ``keras.src.backend.rnn``, the hoisted
  loop the layer runs under the other Keras backends, instead of
  :func:`layers.lstm_recurrence.lstm_recurrence`;
* ``tc``: :class:`layers.topic_lstm.TopicCompositionalLSTM` (``n_f = n_h`` factors,
  :data:`TOPICS` topics; its inputs are x and topic vectors ``t [B, T]``, Dirichlet(1),
  both differentiated) as the project's models build it (its defaults, under TensorFlow
  :func:`layers.topic_lstm_recurrence.topic_lstm_recurrence`); ``tc-keras``: the same
  layer through ``keras.layers.RNN`` over its cell, the loop it runs under the other
  backends;
* ``moe``: :class:`layers.mixture_of_experts.MixtureOfExpertsLSTM`, :data:`EXPERTS`
  experts of ``n_h`` units each (under TensorFlow :func:`layers.lstm_recurrence.recurrence`
  with :class:`layers.lstm_recurrence.ExpertProducts`); ``moe-keras``: the same cell in
  ``keras.layers.RNN``.

The last four are not run by default: ``--contenders tc-keras,tc --reference tc-keras``
compares the first pair, ``--contenders moe-keras,moe --reference moe-keras`` the second.

``--precision bf16`` runs the Keras layers under the ``mixed_bfloat16`` policy and torch
under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (on a CPU without bfloat16
instructions torch's oneDNN LSTM has none: a contender whose first step raises gets a line
saying so, and no ratio is given to it). Every contender runs ``--steps``
steps per round, in alternating rounds in one process (the order rotates every round);
the table gives each contender's median milliseconds per step over the rounds and the
median over the rounds of its time / the ``--reference`` contender's (torch's unless
named) in the same round. ``--threads 1,2`` runs one process per thread count
(TensorFlow's and torch's thread pools are fixed before they start): ratios compare
contenders of one process, at one thread count. On a machine that other jobs load, run it
with ``OMP_WAIT_POLICY=PASSIVE``: torch's OpenMP threads otherwise spin at every barrier,
and at 2 threads its step took 3-10x its 1-thread time here.

Shapes: ``pd`` People's Daily (B 20, L 35, 650 -> 650), ``apnews`` APNEWS (B 64, L 30,
300 -> 600), or ``BxLxN_XxN_H`` (``2x3x4x5``).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

#: name -> (B, L, n_x, n_h)
SHAPES = {"pd": (20, 35, 650, 650), "apnews": (64, 30, 300, 600)}
#: the contenders a run times by default
CONTENDERS = ("torch", "keras", "hoisted", "hoisted-generic")
#: topics T of the ``tc`` contenders (``python -m benchmarks.run``'s default)
TOPICS = 50
#: experts of the ``moe`` contenders
EXPERTS = 10


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.probe_lstm_recurrence",
                                allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="pd,apnews", help="of " + ", ".join(SHAPES))
    p.add_argument("--precisions", default="float32,bf16", help="float32, bf16")
    p.add_argument("--threads", default="1,2", help="thread counts, one process each")
    p.add_argument("--contenders", default=",".join(CONTENDERS),
                   help="comma-separated, of torch, keras, hoisted, hoisted-true, hoisted-false, "
                        "hoisted-generic, tc, tc-keras, moe, moe-keras (the module docstring)")
    p.add_argument("--reference", default="torch",
                   help="the contender whose time the ratios divide by (default: torch)")
    p.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    p.add_argument("--steps", type=int, default=5, help="steps per round")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per contender")
    args = p.parse_args(argv)
    for name in ("shapes", "precisions", "threads", "contenders"):
        setattr(args, name, getattr(args, name).split(","))
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if len(args.threads) > 1:
        for threads in args.threads:
            command = [sys.executable, "-m", "benchmarks.probe_lstm_recurrence",
                       *[a for a in (argv if argv is not None else sys.argv[1:])],
                       "--threads", threads]
            subprocess.run(command, check=True)
        return
    threads = int(args.threads[0])
    torch, tf = start_frameworks(threads)
    from benchmarks.harness import machine_line

    print(f"{machine_line()}, torch {torch.__version__}", flush=True)
    for shape in args.shapes:
        sizes = shape_sizes(shape)
        for precision in args.precisions:
            steps = {name: make_step(name, sizes, precision, torch, tf)
                     for name in args.contenders}
            failed = drop_failing(steps)
            table(f"{shape} {sizes} {precision}, {threads} thread(s)",
                  time_rounds(steps, args.rounds, args.steps, args.warmup), args.reference,
                  failed)


def drop_failing(steps: dict) -> dict[str, str]:
    """Runs every step once (a warm-up call) and removes from ``steps`` those that raise a
    ``RuntimeError`` (torch's oneDNN LSTM has no bfloat16 kernel on a CPU without bfloat16
    instructions); returns name -> the error's first line for them."""
    failed = {}
    for name, step in list(steps.items()):
        try:
            step()
        except RuntimeError as err:
            failed[name] = str(err).splitlines()[0]
            del steps[name]
    return failed


def shape_sizes(shape: str) -> tuple:
    """``(B, L, n_x, n_h)`` of a name of :data:`SHAPES` or of ``BxLxN_XxN_H``."""
    if shape in SHAPES:
        return SHAPES[shape]
    sizes = tuple(int(size) for size in shape.split("x"))
    if len(sizes) != 4:
        raise ValueError(f"a shape is one of {', '.join(SHAPES)} or BxLxN_XxN_H, got {shape!r}")
    return sizes


def start_frameworks(threads: int):
    """torch and tensorflow, each with ``threads`` intra- and inter-op threads."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import torch

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
    return torch, tf


def make_step(name: str, shape: tuple, precision: str, torch, tf):
    """A callable running one training step of contender ``name``."""
    import numpy as np

    B, L, n_x, n_h = shape
    x_value = np.random.default_rng(0).normal(size=(B, L, n_x)).astype("float32")
    if name == "torch":
        return torch_step(torch, x_value, n_h, precision)
    return keras_step(tf, name, x_value, n_h, precision)


def torch_step(torch, x_value, n_h: int, precision: str):
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(x_value.shape[-1], n_h, batch_first=True)
    x = torch.tensor(x_value, requires_grad=True)
    params = [x, *lstm.parameters()]

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            outputs, _ = lstm(x)
        loss = outputs.float().sum()
        torch.autograd.grad(loss, params)

    return step


def keras_layer(name: str, n_h: int, policy: str):
    import keras

    from layers.hoisted_lstm import HoistedLSTM
    from layers.mixture_of_experts import MixtureOfExpertsLSTM, MixtureOfExpertsLSTMCell
    from layers.topic_lstm import TopicCompositionalLSTM

    if name in ("moe", "moe-keras"):
        layer = MixtureOfExpertsLSTM if name == "moe" else keras.layers.RNN
        return layer(MixtureOfExpertsLSTMCell(n_h, EXPERTS, dtype=policy),
                     return_sequences=True, dtype=policy)
    if name in ("tc", "tc-keras"):
        layer = TopicCompositionalLSTM(n_h, n_h, TOPICS, dtype=policy)
        if name == "tc-keras":
            layer._runs_tensorflow_recurrence = lambda training: False
        return layer
    if name == "keras":
        return keras.layers.LSTM(n_h, return_sequences=True, dtype=policy)
    hoist = {"hoisted": "auto", "hoisted-true": True, "hoisted-false": False,
             "hoisted-generic": True}[name]
    layer = HoistedLSTM(n_h, return_sequences=True, hoist=hoist, dtype=policy)
    if name == "hoisted-generic":
        layer._runs_tensorflow_recurrence = lambda: False
    return layer


def keras_step(tf, name: str, x_value, n_h: int, precision: str):
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)
    layer = keras_layer(name, n_h, "mixed_bfloat16" if precision == "bf16" else "float32")
    x = tf.Variable(x_value)
    inputs = [x]
    if name.startswith("tc"):
        topics = np.random.default_rng(1).dirichlet(np.ones(TOPICS), size=len(x_value))
        inputs.append(tf.Variable(topics.astype("float32")))

    def forward():
        return layer(inputs if len(inputs) > 1 else x)

    forward()
    variables = [*inputs, *layer.trainable_weights]

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cast(forward(), tf.float32))
        grads = tape.gradient(loss, variables)
        return loss, grads

    def run():
        loss, grads = step()
        grads[0].numpy()

    return run


def time_rounds(steps: dict, rounds: int, per_round: int, warmup: int) -> dict:
    """name -> seconds per step of each round, the contenders alternating round by round."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    names = list(steps)
    seconds = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            for _ in range(per_round):
                steps[name]()
            seconds[name].append((time.perf_counter() - start) / per_round)
    return seconds


def table(title: str, seconds: dict, reference: str = "torch",
          failed: dict[str, str] | None = None) -> None:
    """Median ms per step and the median per-round ratio to the step of ``reference``; a
    line for each contender that could not run (``failed``: name -> why)."""
    print(title, flush=True)
    for name, reason in (failed or {}).items():
        print(f"  {name:16s} could not run on this CPU: {reason}", flush=True)
    reference_times = seconds.get(reference)
    for name, times in seconds.items():
        ratio = ("" if reference_times is None else
                 f"{statistics.median(t / r for t, r in zip(times, reference_times)):6.2f}x "
                 f"{reference}")
        print(f"  {name:16s} {statistics.median(times) * 1e3:8.1f} ms  {ratio}", flush=True)


if __name__ == "__main__":
    main()
