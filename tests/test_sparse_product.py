"""The SDLM decoder's sparse product by CSR kernels (layers.sememe_decoder._csr_product):
tf.sparse.sparse_dense_matmul's product and gradient bit for bit, at one thread and at two;
and benchmarks.probe_sparse_product, which times the two."""
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from benchmarks.probe_sparse_product import knowledge_base
from layers.sememe_decoder import _csr_product
from tests.conftest import REPO_ROOT


def test_product_and_gradient_are_sparse_dense_matmuls_bit_for_bit():
    rng = np.random.default_rng(3)
    matrix, transposed = knowledge_base(700, 90, 6, rng)
    expert = tf.constant(rng.normal(size=(90, 48)).astype(np.float32))
    upstream = tf.constant(rng.normal(size=(700, 48)).astype(np.float32))
    results = []
    for form in (lambda x: tf.sparse.sparse_dense_matmul(tf.SparseTensor(*matrix), x),
                 lambda x: _csr_product(matrix, transposed, x)):
        @tf.function
        def step(x, form=form):
            with tf.GradientTape() as tape:
                tape.watch(x)
                product = form(x)
                loss = tf.reduce_sum(product * upstream)
            return product, tape.gradient(loss, x)
        results.append([t.numpy() for t in step(expert)])
    (product, gradient), (csr_product, csr_gradient) = results
    assert np.abs(product).max() > 0 and np.abs(gradient).max() > 0  # not trivially equal
    np.testing.assert_array_equal(csr_product, product)
    np.testing.assert_array_equal(csr_gradient, gradient)


def probe(*flags, threads=1):
    return subprocess.run([sys.executable, "-m", "benchmarks.probe_sparse_product",
                           "--threads", str(threads), *flags], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


def test_the_probe_times_both_and_finds_the_same_bits_at_two_threads():
    # the APNEWS knowledge base's sizes: at two threads the CSR kernel's own gradient
    # (adjoint_a) sums in another order there and gets a "no"
    result = probe("--positions", "256", "--rounds", "1", "--steps", "1", "--warmup", "1",
                   threads=2)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: ") and "2 thread(s)" in lines[1]
    [row] = [[c.strip() for c in line.split("|")] for line in lines[4:]]
    plain_ms, csr_ms = float(row[0]), float(row[1])
    assert float(row[2].rstrip("x")) == pytest.approx(csr_ms / plain_ms, rel=0.02)
    assert row[3:] == ["yes", "yes"]


def test_the_probe_refuses_a_bad_size_in_one_line():
    result = probe("--senses", "0")
    assert result.returncode == 2
    assert "--senses" in result.stderr and "Traceback" not in result.stderr
