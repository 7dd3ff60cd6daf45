"""Tests for layers.mixture_of_softmaxes (Yang et al., 2018, mixture of softmaxes)."""
from __future__ import annotations

import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.mixture_of_softmaxes import MixtureOfSoftmaxes, log_normaliser
from tests.conftest import REPO_ROOT
from tests.random_weights import randomise

VOCAB, H1, H2 = 30, 8, 6


def make_mos(num_mixtures, seed=0, **kwargs):
    layer = MixtureOfSoftmaxes(VOCAB, num_mixtures,
                               embedding_dim=None if "embedding" in kwargs else H2, **kwargs)
    layer.build((None, H1))
    return randomise(layer, seed)


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_one_mixture_is_a_tied_softmax():
    embedding = keras.layers.Embedding(VOCAB, H2)
    embedding.build((None,))
    layer = make_mos(1, embedding=embedding)
    g = np.random.default_rng(1).normal(size=(2, 5, H1)).astype("float32")
    h = np.tanh(g @ layer.latent_kernel.numpy() + layer.latent_bias.numpy())
    expected = log_softmax(h @ embedding.embeddings.numpy().T + layer.output_bias.numpy())
    np.testing.assert_allclose(layer(g).numpy(), expected, atol=1e-5)


def test_matches_numpy_reference_and_sums_to_one():
    N = 3
    layer = make_mos(N)
    g = np.random.default_rng(2).normal(size=(7, H1)).astype("float32")
    logits_pi = g @ layer.prior_kernel.numpy()
    pi = np.exp(logits_pi) / np.exp(logits_pi).sum(-1, keepdims=True)
    h = np.tanh(g @ layer.latent_kernel.numpy() + layer.latent_bias.numpy()).reshape(7, N, H2)
    X, b = layer.word_embeddings.numpy(), layer.output_bias.numpy()
    expected = sum(pi[:, n, None] * np.exp(log_softmax(h[:, n] @ X.T + b)) for n in range(N))
    log_p = layer(g).numpy()
    np.testing.assert_allclose(np.exp(log_p), expected, atol=1e-6)
    np.testing.assert_allclose(np.exp(log_p).sum(-1), 1.0, atol=1e-5)
    targets = np.random.default_rng(3).integers(0, VOCAB, size=7)
    np.testing.assert_allclose(tf.function(layer.target_log_prob)(g, targets).numpy(),
                               log_p[np.arange(7), targets], atol=1e-5)


def test_latent_dropout_only_in_training():
    layer = make_mos(2, latent_dropout=0.5)
    g = np.random.default_rng(4).normal(size=(4, H1)).astype("float32")
    np.testing.assert_allclose(layer(g).numpy(), layer(g, training=False).numpy())
    trained = layer(g, training=True).numpy()
    assert not np.allclose(trained, layer(g).numpy())
    np.testing.assert_allclose(np.exp(trained).sum(-1), 1.0, atol=1e-5)


def test_get_config_round_trip_and_save(tmp_path):
    layer = MixtureOfSoftmaxes(VOCAB, 4, embedding_dim=H2, latent_dropout=0.3, name="mos")
    config = layer.get_config()
    assert (config["vocab_size"], config["num_mixtures"], config["embedding_dim"],
            config["latent_dropout"]) == (VOCAB, 4, H2, 0.3)
    clone = MixtureOfSoftmaxes.from_config(config)
    assert (clone.name, clone.num_mixtures, clone.latent_dropout) == ("mos", 4, 0.3)
    assert keras.saving.get_registered_name(MixtureOfSoftmaxes) == "tcnlm_tf>MixtureOfSoftmaxes"

    inputs = keras.Input((None, H1))
    model = keras.Model(inputs, layer(inputs))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    g = np.random.default_rng(5).normal(size=(2, 3, H1)).astype("float32")
    np.testing.assert_allclose(loaded(g).numpy(), model(g).numpy(), atol=1e-6)


def test_log_normaliser_is_logsumexp_bit_for_bit_with_its_gradient():
    """The log-normaliser of the training path gives ``reduce_logsumexp``'s values and
    gradients bit for bit, rows with -inf logits (masked words) and a row of only -inf
    (value -inf, gradient NaN in both) included; and its gradient is the softmax."""
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 4, (7, 3, 50)).astype(np.float32)
    logits[1, 0, :10] = -np.inf
    logits[2, 1, :] = -np.inf
    upstream = tf.constant(rng.normal(size=(7, 3)).astype(np.float32))
    x = tf.constant(logits)

    def value_and_gradient(function):
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = function(x)
            loss = tf.reduce_sum(value * upstream)
        return value, tape.gradient(loss, x)

    ours, reference = ([t.numpy() for t in tf.function(lambda f=f: value_and_gradient(f))()]
                       for f in (log_normaliser,
                                 lambda z: tf.reduce_logsumexp(z, axis=-1)))
    for got, want in zip(ours, reference):
        np.testing.assert_array_equal(got, want)
    value, gradient = ours
    assert value[2, 1] == -np.inf and np.isnan(gradient[2, 1]).all()
    finite = np.isfinite(value)
    with np.errstate(invalid="ignore"):  # -inf - -inf in the row of only -inf
        softmax = np.exp(logits - value[..., None]) * upstream.numpy()[..., None]
    np.testing.assert_allclose(gradient[finite], softmax[finite], rtol=1e-5, atol=1e-7)


def probe(*flags):
    return subprocess.run([sys.executable, "-m", "benchmarks.probe_log_normaliser", *flags],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_the_probe_times_both_normalisers_and_finds_the_same_bits():
    result = probe("--shapes", "8x3x50,apnews", "--rounds", "1", "--steps", "1",
                   "--warmup", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: ")
    rows = [[c.strip() for c in line.split("|")] for line in lines[4:]]
    assert [r[:2] for r in rows] == [["8x3x50", "8x3x50"], ["apnews", "1200x10x4809"]]
    for row in rows:
        plain_ms, ours_ms = float(row[2]), float(row[3])
        assert float(row[4].rstrip("x")) == pytest.approx(ours_ms / plain_ms, rel=0.02)
        assert row[5:] == ["yes", "yes"]


def test_the_probe_refuses_a_bad_shape_in_one_line():
    result = probe("--shapes", "8x3")
    assert result.returncode == 2
    assert "--shapes '8x3'" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_mixtures=0), "num_mixtures must be a positive int"),
    (dict(embedding_dim=None), "needs embedding_dim"),
    (dict(latent_dropout=1.0), "latent_dropout"),
])
def test_invalid_arguments_raise(kwargs, message):
    args = dict(vocab_size=VOCAB, embedding_dim=H2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        MixtureOfSoftmaxes(**args)
