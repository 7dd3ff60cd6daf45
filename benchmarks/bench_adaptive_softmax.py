"""Time the training loss of the adaptive softmax against a full softmax, side by side.

Both layers (``layers.adaptive_softmax.AdaptiveSoftmax`` with cutoffs, and the same class
with ``cutoffs=()``, a plain full softmax) run in one process on the same hidden states and
Zipfian targets (ids sorted by decreasing frequency, as in the project's vocabularies). One
timed step is the forward and backward pass of the mean negative ``target_log_prob``, with
gradients for the layer weights and the hidden states, inside ``tf.function``. After the
warm-up steps (which include tracing), the two layers are timed alternately ``--repeats``
times and the medians are reported with the speed-up (full / adaptive).

    python -m benchmarks.bench_adaptive_softmax            # defaults: < 1 min on 2 CPU cores
    python -m benchmarks.bench_adaptive_softmax --vocab 50000 --cutoffs 2000 10000 --repeats 10

Reference: Grave, Joulin, Cissé, Grangier, Jégou, "Efficient softmax approximation for GPUs"
(arXiv:1609.04309, 2016).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

# Allow `python benchmarks/bench_adaptive_softmax.py` as well as `python -m ...` from the root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tcnlm_tf.arguments import finite_float


def parse_args(argv=None):
    parser = argparse.ArgumentParser(allow_abbrev=False,
        description="Forward+backward time of the training loss: adaptive vs full softmax."
    )
    parser.add_argument("--vocab", type=int, default=30000, help="vocabulary size (default 30000)")
    parser.add_argument("--dim", type=int, default=600, help="hidden size d (default 600)")
    parser.add_argument("--batch", type=int, default=64, help="sequences per batch (default 64)")
    parser.add_argument("--time-steps", type=int, default=30,
                        help="tokens per sequence (default 30)")
    parser.add_argument(
        "--cutoffs",
        type=int,
        nargs="+",
        default=None,
        help="adaptive cluster boundaries (default: default_cutoffs(vocab))",
    )
    parser.add_argument("--div-value", type=finite_float, default=4.0,
                        help="tail projection divisor (default 4)")
    parser.add_argument("--zipf", type=finite_float, default=1.0,
                        help="Zipf exponent of the targets (default 1.0)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per layer (default 1)")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per layer (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)
    for name in ("vocab", "dim", "batch", "time_steps", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must be non-negative")
    return parser, args


def main(argv=None) -> None:
    parser, args = parse_args(argv)

    import numpy as np
    import tensorflow as tf

    from layers.adaptive_softmax import AdaptiveSoftmax, default_cutoffs

    cutoffs = tuple(args.cutoffs) if args.cutoffs is not None else default_cutoffs(args.vocab)
    try:
        adaptive = AdaptiveSoftmax(args.vocab, cutoffs, div_value=args.div_value, name="adaptive")
    except ValueError as err:
        parser.error(str(err))
    full = AdaptiveSoftmax(args.vocab, (), name="full")

    rng = np.random.default_rng(args.seed)
    weights = 1.0 / np.arange(1, args.vocab + 1) ** args.zipf
    shape = (args.batch, args.time_steps)
    targets = tf.constant(rng.choice(args.vocab, size=shape, p=weights / weights.sum()), tf.int32)
    hidden = tf.Variable(rng.normal(size=shape + (args.dim,)).astype("float32"), name="hidden")

    def make_step(layer):
        layer.build(hidden.shape)
        variables = [hidden] + layer.trainable_weights

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = -tf.reduce_mean(layer.target_log_prob(hidden, targets))
            return loss, tape.gradient(loss, variables)

        return step

    steps = {"adaptive": make_step(adaptive), "full": make_step(full)}
    for step in steps.values():
        for _ in range(args.warmup):
            step()
    times = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            loss, grads = step()
            loss.numpy()
            grads[0].numpy()
            times[name].append(time.perf_counter() - start)

    in_head = float(tf.reduce_mean(tf.cast(targets < adaptive.shortlist_size, tf.float32)))
    median = {name: statistics.median(t) for name, t in times.items()}
    print(
        f"vocab={args.vocab} dim={args.dim} batch={args.batch}x{args.time_steps} "
        f"cutoffs={list(cutoffs)} div_value={args.div_value} zipf={args.zipf} "
        f"targets in head={in_head:.1%} warmup={args.warmup} repeats={args.repeats}"
    )
    print(f"params: adaptive={adaptive.count_params():,} full={full.count_params():,}")
    for name in steps:
        print(f"{name:>8} softmax: median {median[name] * 1e3:8.1f} ms / step (forward+backward)")
    print(f"speed-up (full / adaptive): {median['full'] / median['adaptive']:.2f}x")


if __name__ == "__main__":
    main()
