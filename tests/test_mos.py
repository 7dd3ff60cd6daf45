"""Tests for layers.mixture_of_softmaxes (Yang et al., 2018, mixture of softmaxes)."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.mixture_of_softmaxes import MixtureOfSoftmaxes
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
