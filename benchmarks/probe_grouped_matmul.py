"""Grouped products ``x[:, g] W[g]`` by ``einsum`` or by a batched matmul with the groups
leading (:func:`layers.lstm_gates.grouped_matmul`): time and rounding error. A probe.

The topic-compositional and mixture-of-experts LSTMs multiply each group of an input by its
own matrix: ``x [N, G, n]`` and ``W [G, n, m]`` -> ``[N, G, m]``. Two workloads, or
``NxGxnxm`` (``8x2x3x4``):

* ``tc``: the TC-LSTM's four ``W_*a`` products over one APNEWS batch (64 x 30 tokens, 600
  factors -> 600 units; ``TopicCompositionalLSTMCell.input_gates``): N 1920, G 4, 600 -> 600;
* ``moe``: one step of the Table 6 mixture of experts (batch 64, 30 experts of 100 units;
  ``ExpertProducts.step``): N 64, G 30, 100 -> 400.

Each contender runs forward and backward (the gradients to ``x`` and ``W`` of the float32
sum of squares of the product) in a ``tf.function``, under TensorFlow on the CPU, with both
operands in float32 or bfloat16: ``einsum`` is ``tf.einsum("ngi,gio->ngo")``, ``grouped``
:func:`layers.lstm_gates.grouped_matmul`. The harness's protocol (``benchmarks.harness``)
times them in alternating rounds in one process; the table gives each one's median
milliseconds per step, ``grouped`` / ``einsum``, and each one's rounding error: the mean
absolute difference of its product from the float32 product of the same (rounded) operands,
over the mean absolute float32 product.
"""
from __future__ import annotations

from benchmarks.harness import (Parser, add_probe_arguments, gradient_step, name_list,
                                print_table, size_list, tensorflow_at, time_contenders)
from tcnlm_tf.errors import exit_on_user_error

#: name -> (N, G, n, m)
WORKLOADS = {"tc": (1920, 4, 600, 600), "moe": (64, 30, 100, 400)}
DTYPES = ("float32", "bfloat16")
CONTENDERS = ("einsum", "grouped")


def build_parser() -> Parser:
    p = Parser(prog="python -m benchmarks.probe_grouped_matmul", allow_abbrev=False,
               description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", type=size_list(WORKLOADS, "--workloads", "NxGxnxm",
                                                 "8x2x3x4"), default="tc,moe",
                   help="comma list of tc, moe (module docstring) or NxGxnxm sizes "
                        "(default: tc,moe)")
    p.add_argument("--dtypes", type=name_list(DTYPES, "--dtypes"), default="float32,bfloat16",
                   help="operand dtypes, out of float32,bfloat16 (default: both)")
    add_probe_arguments(p)
    return p


def contenders(tf, sizes: tuple[int, ...], dtype: str):
    """``{name: (step, product)}``: ``step(i)`` runs one forward and backward step
    (:func:`benchmarks.harness.gradient_step`, the gradients to both operands) and returns
    0; ``product`` is the forward result, float32. Also the float32 product of the same
    (rounded) operands."""
    import numpy as np

    from layers.lstm_gates import grouped_matmul

    n, g, i, o = sizes
    rng = np.random.default_rng(0)
    x = tf.Variable(tf.cast(tf.constant(rng.normal(size=(n, g, i)), tf.float32), dtype))
    w = tf.Variable(tf.cast(tf.constant(rng.normal(size=(g, i, o)) / np.sqrt(i), tf.float32),
                            dtype))
    forms = {"einsum": lambda a, b: tf.einsum("ngi,gio->ngo", a, b), "grouped": grouped_matmul}
    built = {name: (gradient_step(lambda form=forms[name]: tf.reduce_sum(
                        tf.cast(form(x, w), tf.float32) ** 2), [x, w]),
                    tf.cast(forms[name](x, w), tf.float32).numpy())
             for name in CONTENDERS}
    reference = forms["einsum"](tf.cast(x, tf.float32), tf.cast(w, tf.float32))
    return built, reference.numpy()


def relative_error(product, reference) -> float:
    """Mean ``|product - reference|`` over mean ``|reference|``."""
    import numpy as np

    return float(np.mean(np.abs(product - reference)) / np.mean(np.abs(reference)))


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    tf = tensorflow_at(args.threads)
    print(f"forward and backward, {args.threads} thread(s); ms: median per step over "
          f"{args.rounds} rounds of {args.steps} steps; error: mean |product - float32 "
          "product| / mean |float32 product|")
    rows = []
    for name, sizes in args.workloads:
        for dtype in args.dtypes:
            built, reference = contenders(tf, sizes, dtype)
            timed = time_contenders({k: v[0] for k, v in built.items()}, args.warmup,
                                    args.rounds, args.steps)
            ms = {k: 1e3 * timed[k]["seconds"] for k in CONTENDERS}
            rows.append((name, "x".join(map(str, sizes)), dtype,
                         *(f"{ms[k]:.2f}" for k in CONTENDERS),
                         f"{ms['grouped'] / ms['einsum']:.3f}x",
                         *(f"{relative_error(built[k][1], reference):.1e}"
                           for k in CONTENDERS)))
    print_table(("workload", "N x G x n x m", "dtype", "einsum ms", "grouped ms",
                 "grouped / einsum", "einsum error", "grouped error"), rows, left=3)


if __name__ == "__main__":
    main()
