"""Tests for layers.adaptive_softmax (Grave et al., 2016 adaptive softmax)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.adaptive_softmax import AdaptiveSoftmax, default_cutoffs

VOCAB = 50
CUTOFFS = (10, 25)  # head: ids 0..9 + 2 cluster logits; tail 0: ids 10..24; tail 1: ids 25..49
DIM = 16


def make_layer(cutoffs=CUTOFFS, vocab=VOCAB, dim=DIM, **kwargs):
    layer = AdaptiveSoftmax(vocab, cutoffs, **kwargs)
    layer.build((None, dim))
    # Non-zero biases so the tests also exercise them.
    rng = np.random.default_rng(1)
    for w in layer.weights:
        if w.name.endswith("bias"):
            w.assign(rng.normal(size=w.shape).astype("float32"))
    return layer


def gathered(log_p, targets):
    return np.take_along_axis(np.asarray(log_p), np.asarray(targets)[..., None], axis=-1)[..., 0]


@pytest.mark.parametrize("cutoffs", [(), (10,), CUTOFFS])
def test_distribution_sums_to_one(cutoffs):
    layer = make_layer(cutoffs)
    hidden = np.random.default_rng(0).normal(size=(4, 3, DIM)).astype("float32")
    log_p = layer(hidden).numpy()
    assert log_p.shape == (4, 3, VOCAB)
    np.testing.assert_allclose(np.exp(log_p).sum(-1), 1.0, atol=1e-5)


def test_call_matches_factorised_reference():
    """p(w) = softmax(head)[w] for head words, softmax(head)[c0+i] * softmax(tail_i)[w-c_i] else."""
    layer = make_layer()
    hidden = np.random.default_rng(0).normal(size=(5, DIM)).astype("float32")
    w = {v.name: v.numpy() for v in layer.weights}

    def softmax(z):
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    head = softmax(hidden @ w["head_kernel"] + w["head_bias"])
    tails = [
        softmax(hidden @ w[f"tail_{i}_projection"] @ w[f"tail_{i}_kernel"] + w[f"tail_{i}_bias"])
        for i in range(2)
    ]
    expected = np.concatenate(
        [head[:, :10], head[:, 10:11] * tails[0], head[:, 11:12] * tails[1]], -1
    )
    np.testing.assert_allclose(np.exp(layer(hidden).numpy()), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("cutoffs", [(), CUTOFFS])
@pytest.mark.parametrize("shape", [(12,), (3, 7)])
def test_target_log_prob_equals_call_gathered(cutoffs, shape):
    layer = make_layer(cutoffs)
    rng = np.random.default_rng(2)
    hidden = rng.normal(size=shape + (DIM,)).astype("float32")
    targets = rng.integers(0, VOCAB, size=shape)
    targets.flat[:3] = [0, 10, 49]  # at least one target in the head and in each tail cluster
    got = layer.target_log_prob(hidden, targets).numpy()
    assert got.shape == shape
    np.testing.assert_allclose(got, gathered(layer(hidden), targets), atol=1e-5)


def test_target_log_prob_with_a_cluster_receiving_no_targets():
    layer = make_layer()
    rng = np.random.default_rng(3)
    hidden = rng.normal(size=(4, 5, DIM)).astype("float32")
    targets = np.where(
        rng.random((4, 5)) < 0.5, rng.integers(0, 10, (4, 5)), rng.integers(25, 50, (4, 5))
    )
    assert not np.any((targets >= 10) & (targets < 25))  # tail cluster 0 receives nothing
    got = layer.target_log_prob(hidden, targets).numpy()
    np.testing.assert_allclose(got, gathered(layer(hidden), targets), atol=1e-5)
    # Only head targets: no tail cluster is evaluated at all.
    head_only = rng.integers(0, 10, (4, 5))
    np.testing.assert_allclose(
        layer.target_log_prob(hidden, head_only).numpy(),
        gathered(layer(hidden), head_only),
        atol=1e-5,
    )


def _gradients(layer, hidden, targets):
    with tf.GradientTape() as tape:
        loss = -tf.reduce_mean(layer.target_log_prob(hidden, targets))
    return dict(
        zip([w.name for w in layer.trainable_weights], tape.gradient(loss, layer.trainable_weights))
    )


def test_gradients_flow_to_every_touched_weight():
    layer = make_layer()
    rng = np.random.default_rng(4)
    hidden = tf.constant(rng.normal(size=(3, 6, DIM)).astype("float32"))
    targets = rng.integers(0, VOCAB, size=(3, 6))
    targets.flat[:3] = [1, 12, 30]
    grads = _gradients(layer, hidden, targets)
    assert len(grads) == 8
    for name, g in grads.items():
        assert g is not None, name
        g = np.asarray(g)
        assert np.all(np.isfinite(g)), name
        assert np.any(g != 0), name


def test_untouched_cluster_gets_no_gradient():
    layer = make_layer()
    rng = np.random.default_rng(5)
    hidden = tf.constant(rng.normal(size=(8, DIM)).astype("float32"))
    targets = np.array([0, 3, 9, 25, 30, 49, 2, 40])  # nothing in tail cluster 0
    grads = _gradients(layer, hidden, targets)
    for name, g in grads.items():
        if name.startswith("tail_0_"):
            assert g is None or not np.any(np.asarray(g)), name
        else:
            assert g is not None and np.all(np.isfinite(g)) and np.any(np.asarray(g) != 0), name


def test_training_on_zipfian_targets_reduces_nll():
    vocab, dim, n = 200, 32, 256
    rng = np.random.default_rng(6)
    zipf = 1.0 / np.arange(1, vocab + 1)
    targets = rng.choice(vocab, size=n, p=zipf / zipf.sum()).astype("int32")
    prototypes = rng.normal(size=(vocab, dim)).astype("float32")
    hidden = tf.constant(prototypes[targets] + 0.1 * rng.normal(size=(n, dim)).astype("float32"))
    targets = tf.constant(targets)
    layer = AdaptiveSoftmax(vocab, (20, 60), div_value=2.0)
    optimizer = keras.optimizers.Adam(learning_rate=0.02)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            nll = -tf.reduce_mean(layer.target_log_prob(hidden, targets))
        optimizer.apply_gradients(
            zip(tape.gradient(nll, layer.trainable_weights), layer.trainable_weights)
        )
        return nll

    initial = float(step())
    for _ in range(300):
        final = float(step())
    assert initial > 4.0  # about log(200) at initialisation
    assert final < 0.5 * initial, (initial, final)


def test_tf_function_with_unknown_dims():
    layer = make_layer()

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None, DIM], tf.float32),
            tf.TensorSpec([None, None], tf.int32),
        ]
    )
    def both(hidden, targets):
        return layer.target_log_prob(hidden, targets), layer(hidden)

    rng = np.random.default_rng(7)
    for shape in [(2, 3), (5, 1), (1, 9)]:
        hidden = rng.normal(size=shape + (DIM,)).astype("float32")
        targets = rng.integers(0, VOCAB, size=shape).astype("int32")
        got, log_p = both(hidden, targets)
        assert got.shape == shape and log_p.shape == shape + (VOCAB,)
        np.testing.assert_allclose(got.numpy(), gathered(layer(hidden), targets), atol=1e-5)
    assert both.experimental_get_tracing_count() == 1  # one trace served every shape


def test_replica_context_under_mirrored_strategy():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        layer = make_layer()
    rng = np.random.default_rng(8)
    hidden = rng.normal(size=(4, 6, DIM)).astype("float32")
    targets = rng.integers(0, VOCAB, size=(4, 6)).astype("int32")

    @tf.function
    def replica_step(h, t):
        with tf.GradientTape() as tape:
            log_p = layer.target_log_prob(h, t)
            loss = -tf.reduce_mean(log_p)
        grads = tape.gradient(loss, layer.trainable_weights)
        return log_p, tf.add_n([tf.reduce_sum(tf.abs(g)) for g in grads])

    log_p, grad_norm = strategy.run(replica_step, args=(tf.constant(hidden), tf.constant(targets)))
    np.testing.assert_allclose(
        strategy.experimental_local_results(log_p)[0].numpy(),
        gathered(layer(hidden), targets),
        atol=1e-5,
    )
    assert np.isfinite(strategy.experimental_local_results(grad_norm)[0].numpy())


def test_target_log_prob_builds_layer_and_casts_hidden():
    layer = AdaptiveSoftmax(VOCAB, CUTOFFS)
    hidden = np.random.default_rng(9).normal(size=(2, 4, DIM)).astype("float16")
    targets = np.array([[0, 11, 30, 5], [49, 24, 25, 9]])
    got = layer.target_log_prob(hidden, targets)
    assert layer.built and got.dtype == tf.float32
    np.testing.assert_allclose(
        got.numpy(), gathered(layer(hidden.astype("float32")), targets), atol=1e-5
    )


def test_parameter_count_matches_hand_computation():
    d, vocab, cutoffs, div = 24, 100, (10, 30, 60), 2.0
    layer = AdaptiveSoftmax(vocab, cutoffs, div_value=div)
    layer.build((None, None, d))
    head = d * (10 + 3) + (10 + 3)  # head kernel + bias: 10 shortlist words + 3 cluster logits
    p = [max(1, int(d / div ** (i + 1))) for i in range(3)]
    assert p == [12, 6, 3]
    sizes = [30 - 10, 60 - 30, 100 - 60]
    # tail i: projection d*p_i (no bias) + output kernel p_i*size_i + output bias size_i
    tails = sum(d * p_i + p_i * s_i + s_i for p_i, s_i in zip(p, sizes))
    assert head + tails == 325 + (288 + 240 + 20) + (144 + 180 + 30) + (72 + 120 + 40) == 1459
    assert layer.count_params() == 1459

    full = AdaptiveSoftmax(vocab)
    full.build((None, d))
    assert full.count_params() == d * vocab + vocab


def test_get_config_round_trip():
    layer = AdaptiveSoftmax(VOCAB, CUTOFFS, div_value=3.0, name="out")
    config = layer.get_config()
    assert (
        config["vocab_size"] == VOCAB
        and config["cutoffs"] == [10, 25]
        and config["div_value"] == 3.0
    )
    clone = AdaptiveSoftmax.from_config(config)
    assert (clone.vocab_size, clone.cutoffs, clone.div_value, clone.name) == (
        VOCAB,
        CUTOFFS,
        3.0,
        "out",
    )
    assert keras.saving.get_registered_name(AdaptiveSoftmax) == "tcnlm_tf>AdaptiveSoftmax"


def test_model_save_and_load(tmp_path):
    inputs = keras.Input((None, DIM))
    outputs = AdaptiveSoftmax(VOCAB, CUTOFFS, name="adaptive_softmax")(inputs)
    model = keras.Model(inputs, outputs)
    model.get_layer("adaptive_softmax").head_bias.assign(np.linspace(-1, 1, 12).astype("float32"))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    layer = loaded.get_layer("adaptive_softmax")
    assert isinstance(layer, AdaptiveSoftmax) and layer.cutoffs == CUTOFFS
    hidden = np.random.default_rng(10).normal(size=(2, 5, DIM)).astype("float32")
    np.testing.assert_allclose(loaded(hidden).numpy(), model(hidden).numpy(), atol=1e-6)
    targets = np.array([[0, 12, 30, 7, 49], [24, 25, 9, 3, 11]])
    np.testing.assert_allclose(
        layer.target_log_prob(hidden, targets).numpy(),
        model.get_layer("adaptive_softmax").target_log_prob(hidden, targets).numpy(),
        atol=1e-6,
    )


@pytest.mark.parametrize(
    "cutoffs, message",
    [
        ((0, 25), "0 < c < vocab_size=50"),
        ((10, 50), "0 < c < vocab_size=50"),
        ((-5,), "0 < c < vocab_size=50"),
        ((25, 10), "strictly increasing"),
        ((10, 10), "strictly increasing"),
        ((10.5,), "must be integers"),
        ((True,), "must be integers"),
    ],
)
def test_invalid_cutoffs_raise(cutoffs, message):
    with pytest.raises(ValueError, match=message):
        AdaptiveSoftmax(VOCAB, cutoffs)


def test_invalid_vocab_size_and_div_value_raise():
    with pytest.raises(ValueError, match="vocab_size must be at least 2"):
        AdaptiveSoftmax(1)
    with pytest.raises(ValueError, match="div_value must be positive"):
        AdaptiveSoftmax(VOCAB, CUTOFFS, div_value=0.0)


def test_build_needs_known_last_dimension():
    with pytest.raises(ValueError, match="known last input dimension"):
        AdaptiveSoftmax(VOCAB, CUTOFFS).build((None, None))


def test_default_cutoffs():
    assert default_cutoffs(10) == () and default_cutoffs(999) == ()
    assert default_cutoffs(1000) == (250,)
    assert default_cutoffs(8000) == (2000,)
    assert default_cutoffs(30000) == (2000, 10000)
    assert default_cutoffs(800000) == (2000, 10000, 50000, 250000)
    for vocab in [2, 500, 1000, 1001, 3999, 4000, 9999, 19999, 20000, 34231, 99999, 100000, 10**6]:
        cutoffs = default_cutoffs(vocab)
        AdaptiveSoftmax(vocab, cutoffs)  # valid: raises otherwise
        if cutoffs:
            assert vocab - cutoffs[-1] >= cutoffs[-1]  # the last cluster is not tiny
            assert cutoffs[0] >= 250  # the special tokens at the lowest ids stay in the head
