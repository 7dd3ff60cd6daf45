"""The SDLM decoder's sparse product ``C expert`` by ``tf.sparse.sparse_dense_matmul`` or by
CSR kernels (:func:`layers.sememe_decoder._csr_product`): time and bits. A probe.

``C`` is the constant sparse ``[M, K]`` matrix of a knowledge base's ``C_{k,s}`` (one entry
per sense-sememe edge) and ``expert [K, N]`` the sememe experts' weights at ``N``
positions (:meth:`layers.sememe_decoder.SememeDecoder._sense_scores_t` forms one such product
per basis, forward and backward). The knowledge base is random, of the given sizes: every
sense has 1 to ``--max-edges`` distinct sememes; the default sizes are those of the APNEWS
sample's LM vocabulary with WordNet (14,279 senses, 2,010 sememes, about 3 edges a sense)
at one small-preset batch (64 x 30 positions).

Each contender runs forward and backward (the gradient to ``expert`` of ``sum(C expert *
upstream)``, a fixed random ``upstream``) in a ``tf.function``, under TensorFlow on the CPU,
in float32; the harness's protocol (``benchmarks.harness``) times them in alternating
rounds in one process. The table gives each one's median milliseconds per step, ``csr`` /
``sparse_dense_matmul``, and whether the CSR kernels' product and gradient are
``sparse_dense_matmul``'s bit for bit.
"""
from __future__ import annotations

from benchmarks.harness import (Parser, add_probe_arguments, gradient_step, print_table,
                                tensorflow_at, time_contenders)
from tcnlm_tf.arguments import integer
from tcnlm_tf.errors import exit_on_user_error

CONTENDERS = ("sparse_dense_matmul", "csr")


def build_parser() -> Parser:
    p = Parser(prog="python -m benchmarks.probe_sparse_product", allow_abbrev=False,
               description=__doc__.split("\n\n")[0])
    p.add_argument("--senses", type=integer(1), default=14279, help="M (default: 14279)")
    p.add_argument("--sememes", type=integer(1), default=2010, help="K (default: 2010)")
    p.add_argument("--positions", type=integer(1), default=1920,
                   help="N, the columns of expert (default: 1920, a 64 x 30 batch)")
    p.add_argument("--max-edges", type=integer(1), default=5,
                   help="each sense has 1 to this many sememes, at most --sememes "
                        "(default: 5)")
    add_probe_arguments(p)
    return p


def knowledge_base(senses: int, sememes: int, max_edges: int, rng):
    """``(C, C^T)``, each ``(indices [E, 2], values [E], dense shape)`` in row-major order:
    sense ``s`` has 1 to ``max_edges`` distinct random sememes, random positive values."""
    import numpy as np

    per = rng.integers(1, min(max_edges, sememes) + 1, senses)
    rows = np.repeat(np.arange(senses), per)
    cols = np.concatenate([np.sort(rng.choice(sememes, n, replace=False)) for n in per])
    values = rng.uniform(0.1, 1.0, len(rows)).astype(np.float32)
    by_col = np.lexsort((rows, cols))
    return ((np.stack([rows, cols], 1), values, [senses, sememes]),
            (np.stack([cols[by_col], rows[by_col]], 1), values[by_col], [sememes, senses]))


def contenders(tf, args):
    """``{name: (step, (product, gradient))}``: ``step(i)`` one forward and backward step
    (:func:`benchmarks.harness.gradient_step`); the product and gradient, NumPy."""
    import numpy as np

    from layers.sememe_decoder import _csr_product

    rng = np.random.default_rng(0)
    matrix, transposed = knowledge_base(args.senses, args.sememes, args.max_edges, rng)
    expert = tf.Variable(rng.normal(size=(args.sememes, args.positions)).astype(np.float32))
    upstream = tf.constant(rng.normal(size=(args.senses, args.positions)).astype(np.float32))
    forms = {"sparse_dense_matmul": lambda x: tf.sparse.sparse_dense_matmul(
                 tf.SparseTensor(*matrix), x),
             "csr": lambda x: _csr_product(matrix, transposed, x)}
    built = {}
    for name, form in forms.items():
        with tf.GradientTape() as tape:
            product = form(expert)
            loss = tf.reduce_sum(product * upstream)
        outputs = (product.numpy(), tape.gradient(loss, expert).numpy())
        built[name] = (gradient_step(lambda form=form: tf.reduce_sum(form(expert) * upstream),
                                     [expert]), outputs)
    return built


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    import numpy as np

    args = build_parser().parse_args(argv)
    tf = tensorflow_at(args.threads)
    print(f"C [{args.senses}, {args.sememes}] (1-{args.max_edges} edges a sense) x expert "
          f"[{args.sememes}, {args.positions}], forward and backward, float32, "
          f"{args.threads} thread(s); ms: median per step over {args.rounds} rounds of "
          f"{args.steps} steps")
    built = contenders(tf, args)
    timed = time_contenders({k: v[0] for k, v in built.items()}, args.warmup, args.rounds,
                            args.steps)
    ms = {k: 1e3 * timed[k]["seconds"] for k in CONTENDERS}
    same = [np.array_equal(a, b) for a, b in zip(built["csr"][1],
                                                  built["sparse_dense_matmul"][1])]
    print_table(("sparse_dense_matmul ms", "csr ms", "csr / sparse_dense_matmul",
                 "same product", "same gradient"),
                [(f"{ms['sparse_dense_matmul']:.2f}", f"{ms['csr']:.2f}",
                  f"{ms['csr'] / ms['sparse_dense_matmul']:.3f}x",
                  *("yes" if s else "no" for s in same))], left=0)


if __name__ == "__main__":
    main()
