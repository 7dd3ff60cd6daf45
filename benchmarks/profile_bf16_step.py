"""Where a whole training step's time goes under float32 and under mixed_bfloat16, and the
largest bfloat16 speed-up this CPU could give it. A probe.

Each workload is one of the ``peers`` section's (:mod:`benchmarks.sections.peers`: its
``train.run`` flags, generated corpus and ``Trainer``, here with ``--train-flags`` added),
built once per precision in one process; its step is ``Trainer.train_step`` (forward,
loss, backward, clipping, optimiser update) on the first ``--batches`` training batches,
cycled. Both precisions get ``--warmup`` untimed calls (the first traces), then
``--rounds`` alternating rounds of ``--steps`` steps without the profiler
(:func:`benchmarks.harness.time_contenders`: the measured speed-up, float32's median ms per
step over bfloat16's), then ``--steps`` steps each, float32 and bfloat16 in turn, under
TensorFlow's profiler (``tf.profiler.experimental``, host tracer only, each step marked by
a ``Trace`` named after its precision). The profile's XSpace (``*.xplane.pb``) holds one
event per executed op on the host's threads, named ``op name:op type``; each op is counted
in the step whose span holds its start, and the tables give means over the profiled steps:

* per category, float32 and bfloat16 ms per step and their ratio (above 1: faster under
  bfloat16). An op's category is the first of :data:`CATEGORIES` that takes it: matrix
  products (every op type with ``MatMul`` in it: ``_MklMatMul``, ``_MklNativeFusedMatMul``,
  ``BatchMatMulV2``, ...), casts, the optimiser's update (the ops of its name scope, which
  Keras names after the optimiser, ``adam`` or ``sgd``, or ``ResourceApply*`` ops),
  gradient clipping (``clip_by_global_norm``, ``global_norm``), softmax and cross-entropy
  (op types or names with ``Softmax``), dropout (ops with ``dropout`` in their name: the
  random draw, the mask and its gradient), element-wise arithmetic (the gate math of the
  recurrence and the loss's), TensorList / TensorArray ops, reductions, data movement
  (split, concatenate, transpose, gather) and other ops; "outside ops" is the rest of the
  step's span: the executor between ops, the Python call and the wait for its results;
* per precision, the ``--top`` op types by ms per step, each type split by category (the
  optimiser's ``Mul`` apart from the recurrence's), with their calls per step.

The floor is the bfloat16 step with its casts at 0 ms and every matrix product at its
float32 time / ``--matmul-speed-up`` (default: this CPU's, measured in the same rounds as
the steps: one [n, n] x [n, n] product, ``--matmul-size``, float32 time over bfloat16 time;
AVX512_BF16 without AMX doubles a product's rate where the CPU runs its instructions at full
speed, and some CPUs that report it run them slower than float32), everything else at its
profiled bfloat16 time; the largest speed-up is the profiled float32 step over it, printed
beside the profiled and the measured ones.
``--threads`` sets TensorFlow's intra-op threads (1 inter-op thread, as the peers
children); its thread pools cannot change once started, so one process runs one count.
The profiled steps are longer than the measured ones by the tracer's cost, most of it in
"outside ops"; they are few, so run it with no other job on the machine.

    python -m benchmarks.profile_bf16_step --workloads apnews-small-adaptive
    python -m benchmarks.profile_bf16_step --workloads pd-tied-medium --threads 2 --steps 3
"""
from __future__ import annotations

import argparse
import re
import shlex
import sys
import tempfile
from collections import Counter
from pathlib import Path

from benchmarks.harness import Parser, machine_line, name_list, print_table, time_contenders
from benchmarks.sections import peers
from tcnlm_tf.arguments import finite_float, integer, random_seed
from tcnlm_tf.errors import UserError, exit_on_user_error

PROGRAM = "python -m benchmarks.profile_bf16_step"
#: the precisions it compares, float32 first (the reference of the ratios)
PRECISIONS = ("float32", "mixed_bfloat16")
ELEMENT_WISE = {"Mul", "AddV2", "Add", "Sub", "Neg", "RealDiv", "Reciprocal", "Square", "Sqrt",
                "Rsqrt", "Pow", "Exp", "Log", "Log1p", "Sigmoid", "Tanh", "SigmoidGrad",
                "TanhGrad", "Relu", "ReluGrad", "Maximum", "Minimum", "SelectV2", "Select",
                "Greater", "GreaterEqual", "Less", "LessEqual", "Equal", "NotEqual",
                "LogicalAnd", "LogicalNot", "FloorMod", "FloorDiv", "AddN", "BiasAdd",
                "SquaredDifference", "ZerosLike", "OnesLike", "Fill", "IsFinite"}
REDUCTIONS = {"Sum", "Mean", "Max", "Min", "Prod", "L2Loss", "BiasAddGrad",
              "UnsortedSegmentSum", "SegmentSum", "ArgMax", "All", "Any"}
DATA_MOVEMENT = {"Split", "SplitV", "ConcatV2", "Transpose", "_MklTranspose", "GatherV2",
                 "GatherNd", "ScatterNd", "TensorScatterAdd", "TensorScatterUpdate", "Pack",
                 "Unpack", "StridedSlice", "StridedSliceGrad", "Slice", "Tile", "Reshape",
                 "ExpandDims", "Squeeze", "Pad", "ResourceGather", "Identity"}
#: the categories of ops, in the order of the tables (:func:`category`)
CATEGORIES = ("matmul", "cast", "optimizer update", "gradient clipping",
              "softmax, cross-entropy", "dropout", "element-wise", "TensorList, TensorArray",
              "reductions", "data movement", "other ops")
#: the row of the step's span that no op covers
OUTSIDE = "outside ops"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = Parser(prog=PROGRAM, allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="apnews-small-adaptive,pd-tied-medium",
                   type=name_list(tuple(peers.WORKLOADS), "--workloads"),
                   help=f"comma list out of {','.join(peers.WORKLOADS)}, the peers section's "
                        "(default: apnews-small-adaptive,pd-tied-medium)")
    p.add_argument("--steps", type=integer(1), default=5,
                   help="profiled steps per precision, and steps per timed round (default: 5)")
    p.add_argument("--warmup", type=integer(1), default=2,
                   help="untimed steps per precision first; the first traces (default: 2)")
    p.add_argument("--rounds", type=integer(1), default=3,
                   help="alternating rounds timed without the profiler, for the measured "
                        "speed-up (default: 3)")
    p.add_argument("--batches", type=integer(1), default=3,
                   help="training batches the steps cycle through (default: 3)")
    p.add_argument("--threads", type=integer(1), default=1,
                   help="TensorFlow's intra-op threads, 1 inter-op thread (default: 1)")
    p.add_argument("--matmul-speed-up", type=finite_float, default=None, metavar="X",
                   help="bfloat16 matrix products at float32 time / X in the floor (default: "
                        "the bfloat16 speed-up of one --matmul-size product, measured in the "
                        "run)")
    p.add_argument("--matmul-size", type=integer(1), default=2048, metavar="N",
                   help="the [N, N] x [N, N] product whose bfloat16 speed-up the floor "
                        "assumes without --matmul-speed-up (default: 2048)")
    p.add_argument("--top", type=integer(0), default=15,
                   help="op types listed per precision (default: 15)")
    p.add_argument("--train-flags", default="", metavar="FLAGS",
                   help="train.run flags added to every workload's, e.g. "
                        "--train-flags='--hidden-size 32 --embedding-dim 32' (default: none)")
    p.add_argument("--seed", type=random_seed, default=0,
                   help="seed of the weights and the generated corpora (default: 0)")
    args = p.parse_args(argv)
    if args.matmul_speed_up is not None and args.matmul_speed_up <= 0:
        raise UserError(f"--matmul-speed-up must be above 0, got {args.matmul_speed_up:g}")
    return args


def set_threads(threads: int) -> None:
    """TensorFlow's thread counts (:func:`benchmarks.sections.peers.set_tensorflow_threads`);
    a :class:`UserError` where its pools have already started with others."""
    try:
        got = peers.set_tensorflow_threads(threads)
    except RuntimeError as err:
        raise UserError(f"--threads {threads}: TensorFlow has started with other thread "
                        f"counts ({err})") from None
    if got != threads:
        raise UserError(f"--threads {threads}: TensorFlow has {got} intra-op thread(s)")


def category(kind: str, name: str, optimiser: re.Pattern) -> str:
    """The category of an op of type ``kind`` named ``name``, the first of
    :data:`CATEGORIES` that takes it (module docstring); ``optimiser`` matches the names of
    the optimiser's ops."""
    if "MatMul" in kind:
        return "matmul"
    if kind == "Cast":
        return "cast"
    if optimiser.match(name) or kind.startswith("ResourceApply"):
        return "optimizer update"
    if name.startswith(("clip_by_global_norm/", "global_norm/")):
        return "gradient clipping"
    if "Softmax" in kind or "Softmax" in name:
        return "softmax, cross-entropy"
    if "dropout" in name:
        return "dropout"
    if kind in ELEMENT_WISE:
        return "element-wise"
    if kind.startswith(("TensorList", "TensorArray")):
        return "TensorList, TensorArray"
    if kind in REDUCTIONS:
        return "reductions"
    if kind in DATA_MOVEMENT:
        return "data movement"
    return "other ops"


def optimiser_scope(optimizer: str) -> re.Pattern:
    """The names of the ops of ``train.run --optimizer`` ``optimizer``'s updates: Keras
    names an optimiser after its class, ``adam`` or ``sgd``, with ``_1``, ``_2`` ... for
    the later ones of a process, and scopes its ops by that name."""
    return re.compile(rf"{re.escape(optimizer)}(_\d+)?/")


def profiled_ops(xspace_path: Path) -> dict[str, list[dict]]:
    """Per precision, one dict per profiled step of the XSpace at ``xspace_path``:
    ``span`` (its ``Trace``'s duration) and ``ops`` (``Counter`` of (type, name) -> the
    summed duration of its executions that start in the span), in picoseconds, and
    ``calls`` (``Counter`` of (type, name) -> those executions)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(xspace_path.read_bytes())
    [host] = [plane for plane in space.planes if plane.name == "/host:CPU"]
    step_stat = {i for i, m in host.stat_metadata.items() if m.name == "step_num"}
    spans, ops = [], []
    for line in host.lines:
        for event in line.events:
            meta = host.event_metadata[event.metadata_id]
            start = line.timestamp_ns * 1000 + event.offset_ps
            if meta.name in PRECISIONS and any(s.metadata_id in step_stat for s in event.stats):
                spans.append((start, start + event.duration_ps, meta.name))
            elif meta.display_name and meta.name.endswith(":" + meta.display_name):
                name = meta.name[:-len(meta.display_name) - 1]
                ops.append((start, event.duration_ps, meta.display_name, name))
    steps = {p: [] for p in PRECISIONS}
    by_span = []
    for begin, end, precision in sorted(spans):
        step = {"span": end - begin, "ops": Counter(), "calls": Counter()}
        steps[precision].append(step)
        by_span.append((begin, end, step))
    for start, duration, kind, name in ops:
        for begin, end, step in by_span:
            if begin <= start < end:
                step["ops"][kind, name] += duration
                step["calls"][kind, name] += 1
                break
    return steps


def profile(contenders: dict, steps: int, logdir: Path) -> dict[str, list[dict]]:
    """``steps`` steps of each precision's contender, the precisions in turn, under
    TensorFlow's profiler (host tracer only) writing to ``logdir``; returns
    :func:`profiled_ops` of its XSpace."""
    import tensorflow as tf

    options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=2,
                                                       python_tracer_level=0,
                                                       device_tracer_level=0)
    tf.profiler.experimental.start(str(logdir), options=options)
    try:
        for i in range(steps):
            for precision in PRECISIONS:
                with tf.profiler.experimental.Trace(precision, step_num=i):
                    contenders[precision](i)
    finally:
        tf.profiler.experimental.stop()
    found = sorted(logdir.rglob("*.xplane.pb"))
    if len(found) != 1:
        raise RuntimeError(f"TensorFlow's profiler wrote {len(found)} XSpace files to "
                           f"{logdir}, not 1")
    return profiled_ops(found[0])


def summary(steps: list[dict], optimiser: re.Pattern) -> dict:
    """Means per step of one precision's profiled steps, in ms: ``step`` (the span),
    ``categories`` (category -> ms, :data:`OUTSIDE` included: they sum to ``step``),
    ``types`` (``Counter`` of (op type, category) -> ms) and ``calls`` ((op type,
    category) -> executions)."""
    n, ms = len(steps), 1e-9
    categories = Counter({c: 0.0 for c in CATEGORIES})
    types, calls = Counter(), Counter()
    for step in steps:
        for (kind, name), duration in step["ops"].items():
            c = category(kind, name, optimiser)
            categories[c] += duration * ms / n
            types[kind, c] += duration * ms / n
            calls[kind, c] += step["calls"][kind, name] / n
    span = sum(step["span"] for step in steps) * ms / n
    categories[OUTSIDE] = span - sum(categories.values())
    return {"step": span, "categories": dict(categories), "types": types, "calls": calls}


def floor(f32: dict, bf16: dict, matmul_speed_up: float) -> float:
    """The bfloat16 step (ms) with no casts and every matrix product at its float32 time /
    ``matmul_speed_up``, all else as profiled."""
    c16, c32 = bf16["categories"], f32["categories"]
    return bf16["step"] - c16["cast"] - c16["matmul"] + c32["matmul"] / matmul_speed_up


def report(name: str, described: str, profiled: dict, timed: dict, args) -> None:
    """Prints workload ``name``'s tables, floor and speed-ups (module docstring) from the
    ``profiled`` summaries and the ``timed`` contenders (steps and products)."""
    f32, bf16 = profiled["float32"], profiled["mixed_bfloat16"]
    print(f"\n{name}: {described}; {args.threads} thread(s), {args.steps} profiled step(s) "
          "per precision, ms per step (means)")
    rows = [(c, f"{f32['categories'][c]:.2f}", f"{bf16['categories'][c]:.2f}",
             ratio(f32["categories"][c], bf16["categories"][c]))
            for c in (*CATEGORIES, OUTSIDE)]
    rows.append(("step", f"{f32['step']:.2f}", f"{bf16['step']:.2f}",
                 ratio(f32["step"], bf16["step"])))
    print_table(("category", "float32 ms", "mixed_bfloat16 ms", "float32 / bf16"), rows)
    for precision in PRECISIONS:
        s = profiled[precision]
        print(f"\n{name}, {precision}: the {args.top} slowest op types (per category)")
        print_table(("op type", "category", "ms", "calls", "% of step"),
                    [(kind, c, f"{ms:.2f}", f"{s['calls'][kind, c]:.0f}",
                      f"{100 * ms / s['step']:.1f}")
                     for (kind, c), ms in s["types"].most_common(args.top)], left=2)
    product32, product16 = (timed["product", p]["seconds"] for p in PRECISIONS)
    measured = product32 / product16
    speed_up = measured if args.matmul_speed_up is None else args.matmul_speed_up
    low = floor(f32, bf16, speed_up)
    c16, c32 = bf16["categories"], f32["categories"]
    wall32, wall16 = (timed[p]["seconds"] * 1e3 for p in PRECISIONS)
    print(f"\n{name}: one [{args.matmul_size}, {args.matmul_size}] product, float32 "
          f"{product32 * 1e3:.4g} ms / bf16 {product16 * 1e3:.4g} ms = {measured:.2f}x")
    print(f"{name}: floor = bf16 step {bf16['step']:.2f} - casts {c16['cast']:.2f} "
          f"- matmuls {c16['matmul']:.2f} + float32 matmuls {c32['matmul']:.2f} / "
          f"{speed_up:.2f} = {low:.2f} ms")
    print(f"{name}: largest bf16 speed-up {ratio(f32['step'], low)} (float32 step "
          f"{f32['step']:.2f} / floor {low:.2f}); profiled {ratio(f32['step'], bf16['step'])}; "
          f"measured {ratio(wall32, wall16)} (float32 {wall32:.2f} / bf16 {wall16:.2f} ms, "
          f"median of {args.rounds} round(s) of {args.steps} step(s), no profiler)")


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


def run_workload(name: str, args, scratch: Path, corpora: dict) -> None:
    """Builds, times, profiles and reports workload ``name`` (module docstring)."""
    contenders, described = {}, ""
    for precision in PRECISIONS:
        config = peers.workload_config(name, args, scratch / "data", precision, "--train-flags")
        corpus = peers.generated_corpus(config, scratch, args.batches, args.seed, corpora)
        contenders[precision], cutoffs, _ = peers.our_side(
            config, corpus, scratch / f"{name}-{precision}", args.batches)
        described = peers.describe(config, len(corpus.lm_vocab), cutoffs)
    for precision in PRECISIONS:
        contenders["product", precision] = peers.tf_matmul_step(args.matmul_size, precision,
                                                                args.seed)
    timed = time_contenders(contenders, args.warmup, args.rounds, args.steps)
    steps = profile(contenders, args.steps, scratch / f"{name}-profile")
    optimiser = optimiser_scope(config.train.optimizer)
    report(name, described, {p: summary(steps[p], optimiser) for p in PRECISIONS}, timed, args)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    for name in args.workloads:
        for precision in PRECISIONS:
            peers.workload_config(name, args, Path("data"), precision, "--train-flags")
    set_threads(args.threads)
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="tcnlm-profile-bf16-") as scratch:
        corpora = {}
        for name in args.workloads:
            run_workload(name, args, Path(scratch), corpora)
    print(f"\ncommand: {PROGRAM} {shlex.join(argv if argv is not None else sys.argv[1:])}")


if __name__ == "__main__":
    main()
