"""``python -m benchmarks.run``: what each part of the project costs, side by side, in one
process, with ratios beside the absolute figures.

Sections (``--sections``, default all five, run in this order), one module each under
``benchmarks/sections/``, whose docstring says what it times:

``recurrent``   the recurrent layers against ``keras.layers.LSTM``, beside their
                multiply-add floors (:mod:`benchmarks.sections.recurrent`);
``models``      whole-model training throughput of every model under each precision
                (:mod:`benchmarks.sections.models`);
``decoders``    the output layers at each vocabulary size
                (:mod:`benchmarks.sections.decoders`);
``scaling``     one epoch's time against corpus size and topic count
                (:mod:`benchmarks.sections.scaling`);
``peers``       the whole training step against the same model in plain PyTorch, at each
                thread count (:mod:`benchmarks.sections.peers`).

The first three and ``peers`` time their contenders by the protocol of
:mod:`benchmarks.harness` (alternating rounds, medians, ratios to the section's reference
row). Every figure is computed in the run.

``recurrent`` runs under every Keras backend (``KERAS_BACKEND=jax`` or ``torch`` before the
command; each compiles the step its own way, :func:`benchmarks.harness.gradient_step`); the
other sections time TensorFlow training steps and run under TensorFlow only (asked for under
another backend, the command stops with a one-line error).

    python -m benchmarks.run                      # every section at its default sizes
    python -m benchmarks.run --rounds 2 --steps 1 --sections recurrent --hidden-size 64
    python -m benchmarks.run --sections models --models lstm,tcnlm,moe
    python -m benchmarks.run --sections models --precisions float32,mixed_bfloat16
    python -m benchmarks.run --sections scaling --corpus-docs 100,200,400 --topic-counts 10,50
    python -m benchmarks.run --sections peers --peer-threads 1 --precisions float32
    KERAS_BACKEND=jax python -m benchmarks.run --sections recurrent
"""
from __future__ import annotations

import argparse
import shlex
import sys

from benchmarks.harness import (Parser, add_timing_arguments, backend_line,
                                check_backend, machine_line, name_list)
from benchmarks.sections import decoders, models, peers, recurrent, scaling
from tcnlm_tf.errors import exit_on_user_error

#: the sections, in the order they run
SECTIONS = {"recurrent": recurrent, "models": models, "decoders": decoders, "scaling": scaling,
            "peers": peers}
PROGRAM = "python -m benchmarks.run"


def build_parser() -> argparse.ArgumentParser:
    first, _, rest = __doc__.partition("\n\n")
    p = Parser(prog=PROGRAM, allow_abbrev=False,
               description=first.split(": ", 1)[1].replace("\n", " "),
               formatter_class=argparse.RawDescriptionHelpFormatter,
               epilog="examples:\n" + "\n".join(
                   "  " + line.strip() for line in rest.splitlines()
                   if line.strip().startswith(PROGRAM)))
    p.add_argument("--sections", default=",".join(SECTIONS),
                   type=name_list(tuple(SECTIONS), "--sections"),
                   help=f"comma list out of {','.join(SECTIONS)} (default: all)")
    add_timing_arguments(p)
    for section in SECTIONS.values():
        section.add_arguments(p)
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The flags, checked by every section (whether it runs or not): a bad value is a
    :class:`~tcnlm_tf.errors.UserError`."""
    args = build_parser().parse_args(argv)
    for section in SECTIONS.values():
        section.check(args)
    return args


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    check_backend(SECTIONS, args.sections, "--sections")
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        # The contenders' steps are separate tf.functions of one Python function (one code
        # object), which TensorFlow's frequent-retracing warning counts as retraces of one.
        tf.get_logger().setLevel("ERROR")
    print(machine_line())
    print(f"Keras {keras.__version__}, backend {backend_line()}; sections "
          f"{','.join(args.sections)}; timing: {args.warmup} warm-up call(s), {args.rounds} "
          f"round(s) of {args.steps} step(s), median per step; seed {args.seed}", flush=True)
    for name in args.sections:
        print(f"\n== {name}")
        SECTIONS[name].run(args)
        sys.stdout.flush()
    print(f"\ncommand: {PROGRAM} {shlex.join(argv)}".rstrip())


if __name__ == "__main__":
    main()
