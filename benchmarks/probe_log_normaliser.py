"""The mixture of softmaxes' log-normalisers by ``ops.logsumexp`` or by
:func:`layers.mixture_of_softmaxes.log_normaliser`: time and bits. A probe.

On the training path the mixture of softmaxes (``MixtureOfSoftmaxes.target_log_prob``)
normalises each component's logits over the vocabulary: ``logits [T, N, V]`` -> ``[T, N]``
for ``T`` scored targets and ``N`` components. ``--shapes`` gives ``TxNxV`` sizes, or
``apnews`` (``1200x10x4809``: the real targets of one APNEWS small-preset batch, about 1,200
of its 64 x 30 positions, the default 10 components, the sample's 4,809-word vocabulary).

Each contender runs forward and backward (the gradient to the logits of the sum of the
normalisers, each weighted by a fixed random number; :func:`benchmarks.harness.gradient_step`)
under TensorFlow on the CPU in float32 (the layer normalises in float32 under every
precision): ``logsumexp`` is ``ops.logsumexp(logits, axis=-1)`` differentiated as written,
``log_normaliser`` the layer's function. The harness's protocol (``benchmarks.harness``)
times them in alternating rounds in one process; the table gives each one's median
milliseconds per step, ``log_normaliser`` / ``logsumexp``, and whether the two give the same
values and gradients bit for bit.
"""
from __future__ import annotations

from benchmarks.harness import (Parser, add_probe_arguments, gradient_step, print_table,
                                size_list, tensorflow_at, time_contenders)
from tcnlm_tf.errors import exit_on_user_error

#: name -> (T, N, V)
SHAPES = {"apnews": (1200, 10, 4809)}
CONTENDERS = ("logsumexp", "log_normaliser")


def build_parser() -> Parser:
    p = Parser(prog="python -m benchmarks.probe_log_normaliser", allow_abbrev=False,
               description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", type=size_list(SHAPES, "--shapes", "TxNxV", "8x3x50"),
                   default="apnews",
                   help="comma list of apnews (module docstring) or TxNxV sizes "
                        "(default: apnews)")
    add_probe_arguments(p)
    return p


def contenders(tf, sizes: tuple[int, ...]):
    """``{name: (step, (values, gradient))}``: ``step(i)`` runs one forward and backward step
    and returns 0; the values ``[T, N]`` and the gradient ``[T, N, V]`` are NumPy arrays."""
    import numpy as np
    from keras import ops

    from layers.mixture_of_softmaxes import log_normaliser

    rng = np.random.default_rng(0)
    logits = tf.Variable(rng.normal(0.0, 3.0, sizes).astype(np.float32))
    weights = tf.constant(rng.normal(size=sizes[:-1]).astype(np.float32))
    forms = {"logsumexp": lambda z: ops.logsumexp(z, axis=-1),
             "log_normaliser": log_normaliser}
    built = {}
    for name in CONTENDERS:
        with tf.GradientTape() as tape:
            values = forms[name](logits)
            loss = tf.reduce_sum(values * weights)
        outputs = (values.numpy(), tape.gradient(loss, logits).numpy())
        built[name] = (gradient_step(lambda form=forms[name]: tf.reduce_sum(
            form(logits) * weights), [logits]), outputs)
    return built


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    import numpy as np

    args = build_parser().parse_args(argv)
    tf = tensorflow_at(args.threads)
    print(f"forward and backward, float32, {args.threads} thread(s); ms: median per step over "
          f"{args.rounds} rounds of {args.steps} steps")
    rows = []
    for name, sizes in args.shapes:
        built = contenders(tf, sizes)
        timed = time_contenders({k: v[0] for k, v in built.items()}, args.warmup, args.rounds,
                                args.steps)
        ms = {k: 1e3 * timed[k]["seconds"] for k in CONTENDERS}
        same = [np.array_equal(a, b) for a, b in zip(*(built[k][1] for k in CONTENDERS))]
        rows.append((name, "x".join(map(str, sizes)),
                     *(f"{ms[k]:.2f}" for k in CONTENDERS),
                     f"{ms['log_normaliser'] / ms['logsumexp']:.3f}x",
                     *("yes" if s else "no" for s in same)))
    print_table(("shape", "T x N x V", "logsumexp ms", "log_normaliser ms",
                 "log_normaliser / logsumexp", "same values", "same gradients"), rows, left=2)


if __name__ == "__main__":
    main()
