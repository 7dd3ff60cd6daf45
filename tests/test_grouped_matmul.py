"""layers.lstm_gates.grouped_matmul, the per-group products of the TC-LSTM's input gates and
the mixture of experts' recurrence: einsum's values and gradients in float32, one rounding
of the float32 product in bfloat16; and benchmarks.probe_grouped_matmul, which times it."""
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from layers.lstm_gates import grouped_matmul
from tests.conftest import REPO_ROOT


def operands(n=48, g=3, i=70, o=20, seed=0):
    rng = np.random.default_rng(seed)
    return (tf.constant(rng.normal(size=(n, g, i)), tf.float32),
            tf.constant(rng.normal(size=(g, i, o)) / np.sqrt(i), tf.float32))


def values_and_gradients(form, x, w):
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        y = form(x, w)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) ** 2)
    return [y, *tape.gradient(loss, [x, w])]


def test_float32_equals_einsum_with_its_gradients():
    x, w = operands()
    ours = values_and_gradients(grouped_matmul, x, w)
    theirs = values_and_gradients(lambda a, b: tf.einsum("ngi,gio->ngo", a, b), x, w)
    assert ours[0].shape == (48, 3, 20)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    # group g multiplies by its own W[g], not by another group's
    np.testing.assert_allclose(ours[0][:, 1].numpy(), (x[:, 1] @ w[1]).numpy(), rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_bfloat16_is_the_float32_product_rounded_once(seed):
    """Accumulated in float32 and rounded to bfloat16 once: every entry within one bfloat16
    unit (2^-7 relative; some of TensorFlow's CPU kernels round toward zero) of the exact
    product of the same bfloat16 operands. TensorFlow's bfloat16 einsum, on a CPU without
    bfloat16 instructions, misses this bound at most entries."""
    x, w = (tf.cast(v, tf.bfloat16) for v in operands(seed=seed))
    product = tf.cast(grouped_matmul(x, w), tf.float32).numpy()
    exact = (tf.cast(x, tf.float64)[:, :, :, None] * tf.cast(w, tf.float64)[None]).numpy()
    exact = exact.sum(axis=2)
    assert product.dtype == np.float32 and product.shape == exact.shape
    bound = 2.0 ** -7 * np.abs(exact) + 1e-6
    assert np.all(np.abs(product - exact) <= bound), np.max(np.abs(product - exact) / bound)


def test_the_probe_times_both_forms_and_gives_their_errors():
    command = [sys.executable, "-m", "benchmarks.probe_grouped_matmul", "--workloads",
               "8x2x3x4,moe", "--dtypes", "bfloat16", "--rounds", "1", "--steps", "1",
               "--warmup", "1"]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: ")
    rows = [[c.strip() for c in line.split("|")] for line in lines[4:]]
    assert [r[:3] for r in rows] == [["8x2x3x4", "8x2x3x4", "bfloat16"],
                                     ["moe", "64x30x100x400", "bfloat16"]]
    for row in rows:
        einsum_ms, grouped_ms = float(row[3]), float(row[4])
        assert float(row[5].rstrip("x")) == pytest.approx(grouped_ms / einsum_ms, rel=0.02)
        assert 0 < float(row[7]) < 1e-2


def test_the_probe_refuses_a_malformed_workload():
    result = subprocess.run([sys.executable, "-m", "benchmarks.probe_grouped_matmul",
                             "--workloads", "8x2x3"], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2
    assert "--workloads '8x2x3'" in result.stderr and "Traceback" not in result.stderr
