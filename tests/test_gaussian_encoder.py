"""Tests for layers.gaussian_encoder: the one Gaussian inference network of TCNLM's neural topic
model and of Topic-RNN (its posterior, its KL against a NumPy closed form, its weight names,
its reuse by both layers, its serialisation)."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.gaussian_encoder import GaussianEncoder, gaussian_kl
from layers.topic_model import NeuralTopicModel
from layers.topic_rnn import TopicRNNInference
from tests.random_weights import randomise

V, K, HIDDEN = 11, 3, (6, 5)
ENCODER_WEIGHTS = ["encoder_0_kernel", "encoder_0_bias", "encoder_1_kernel", "encoder_1_bias",
                   "mean_kernel", "mean_bias", "log_variance_kernel", "log_variance_bias"]


def counts(batch=5, seed=0):
    return np.random.default_rng(seed).poisson(1.5, (batch, V)).astype(np.float32)


def randomised(layer, seed=1):
    """``layer`` built on [None, V] with random weights (the zero-initialised ones too)."""
    layer.build((None, V))
    return randomise(layer, seed, scale=0.4)


def numpy_posterior(layer, d):
    """(mu, log sigma^2) [B, K] in float64 from the layer's weights."""
    w = {v.name: v.numpy().astype(np.float64) for v in layer.weights}
    h = np.log1p(d.astype(np.float64))
    for i in range(len(layer.hidden_units)):
        h = np.maximum(h @ w[f"encoder_{i}_kernel"] + w[f"encoder_{i}_bias"], 0.0)
    return (h @ w["mean_kernel"] + w["mean_bias"],
            h @ w["log_variance_kernel"] + w["log_variance_bias"])


@pytest.mark.parametrize("mu0, s0", [(0.0, 1.0), (0.5, 2.0), (-1.0, 0.3)])
def test_kl_equals_the_closed_form(mu0, s0):
    """KL(N(mu, sigma^2) || N(mu_0, s_0^2)) = 1/2 sum_k ((mu_k - mu_0)^2 / s_0^2
    + sigma_k^2 / s_0^2 - 1 - log(sigma_k^2 / s_0^2))."""
    layer = randomised(GaussianEncoder(V, K, hidden_units=HIDDEN, prior_mean=mu0,
                                       prior_stddev=s0))
    d = counts()
    out = layer(d)
    mu, log_var = numpy_posterior(layer, d)
    ratio = np.exp(log_var) / s0 ** 2
    expected = 0.5 * ((mu - mu0) ** 2 / s0 ** 2 + ratio - 1.0 - np.log(ratio)).sum(-1)
    assert np.abs(log_var).max() > 0.1                # not the initial variance 1
    np.testing.assert_allclose(out["mean"].numpy(), mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["log_variance"].numpy(), log_var, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["kl"].numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.kl_divergence(layer.posterior(d)).numpy(), expected,
                               rtol=1e-5, atol=1e-6)



@pytest.mark.parametrize("mu0, s0", [(0.0, 1.0), (0.5, 2.0), (-1.0, 0.3)])
def test_the_keras_ops_closed_form_equals_tfp(mu0, s0):
    """``gaussian_kl`` (what the layer uses under PyTorch, where TFP has no substrate) gives
    ``tfd.kl_divergence`` of the same posterior and prior."""
    layer = randomised(GaussianEncoder(V, K, hidden_units=HIDDEN, prior_mean=mu0,
                                       prior_stddev=s0))
    mean, log_variance = layer.encode(counts())
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(gaussian_kl(mean, log_variance, mu0, s0)),
        layer.kl_divergence(layer.gaussian(mean, log_variance)).numpy(), rtol=1e-6, atol=1e-6)

def test_shapes_posterior_and_initial_unit_variance():
    layer = GaussianEncoder(V, K, hidden_units=HIDDEN)
    d = counts()
    out = layer(d)
    assert {key: tuple(value.shape) for key, value in out.items()} == {
        "mean": (5, K), "log_variance": (5, K), "theta": (5, K), "kl": (5,)}
    assert layer.compute_output_shape((5, V)) == {
        "mean": (5, K), "log_variance": (5, K), "theta": (5, K), "kl": (5,)}
    np.testing.assert_array_equal(out["log_variance"].numpy(), 0.0)
    posterior = layer.posterior(d)
    assert posterior.batch_shape == [5] and posterior.event_shape == [K]
    np.testing.assert_array_equal(posterior.mean().numpy(), out["mean"].numpy())
    with pytest.raises(ValueError, match="expects counts"):
        GaussianEncoder(V, K)(np.ones((2, V + 1), np.float32))
    for bad in (dict(latent_dim=0), dict(hidden_units=(4, -1)), dict(prior_stddev=0.0),
                dict(prior_stddev=float("nan"))):
        with pytest.raises(ValueError, match="GaussianEncoder"):
            GaussianEncoder(**{"vocab_size": V, "latent_dim": K, **bad})


def test_theta_is_the_mean_or_a_reparameterised_draw():
    """theta is mu in evaluation; a draw mu + sigma * eps when training or with
    ``sample=True``, eps drawn from the layer's seed generator: the same generator state
    gives the same eps whatever mu and sigma are (two layers of other weights), another
    state another eps (so a checkpoint of the state resumes the draws exactly)."""
    layer = randomised(GaussianEncoder(V, K, hidden_units=HIDDEN))
    other = randomised(GaussianEncoder(V, K, hidden_units=HIDDEN))
    d = counts()
    out = layer(d)
    np.testing.assert_array_equal(out["theta"].numpy(), out["mean"].numpy())
    np.testing.assert_array_equal(layer(d, training=True, sample=False)["theta"].numpy(),
                                  out["mean"].numpy())

    def eps(encoder, state, **kwargs):
        encoder.seed_generator.state.assign(state)
        drawn = encoder(d, **kwargs)
        return ((drawn["theta"] - drawn["mean"]) / tf.exp(0.5 * drawn["log_variance"])).numpy()

    for kwargs in (dict(training=True), dict(sample=True)):
        state = layer.seed_generator.state.numpy()
        first = eps(layer, state, **kwargs)
        np.testing.assert_allclose(eps(other, state, **kwargs), first, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(eps(layer, state, **kwargs), first)
        assert not np.allclose(eps(layer, state + 1, **kwargs), first)
        assert np.all(np.isfinite(first)) and np.abs(first).max() > 0


def test_both_topic_layers_are_the_gaussian_encoder_with_their_weight_names():
    """The NTM and Topic-RNN's inference network build their encoder weights, posterior and
    KL through GaussianEncoder, under their own names (the checkpoint keys of earlier runs)."""
    ntm = randomised(NeuralTopicModel(V, 4, hidden_units=HIDDEN, latent_dim=K, name="ntm"))
    rnn = randomised(TopicRNNInference(V, K, hidden_units=HIDDEN, name="inference_network"))
    assert [w.path for w in ntm.weights] == [f"ntm/{n}" for n in ENCODER_WEIGHTS] + [
        "ntm/topic_kernel", "ntm/topic_bias", "ntm/topic_word_weights"]
    assert [w.path for w in rnn.weights] == [f"inference_network/{n}" for n in ENCODER_WEIGHTS]
    d = counts()
    for layer in (ntm, rnn):
        assert isinstance(layer, GaussianEncoder)
        for name in ("encode", "gaussian", "posterior", "prior", "kl_divergence"):
            assert getattr(type(layer), name) is getattr(GaussianEncoder, name), name
        plain = GaussianEncoder(V, K, hidden_units=HIDDEN)
        plain.build((None, V))
        plain.set_weights([w.numpy() for w in layer.weights[:len(ENCODER_WEIGHTS)]])
        want, got = plain(d), layer(d)
        for key in want:
            np.testing.assert_array_equal(got[key].numpy(), want[key].numpy(), err_msg=key)
    assert rnn.num_topics == K and ntm.latent_dim == K


@pytest.mark.parametrize("layer", [
    GaussianEncoder(V, K, hidden_units=HIDDEN, prior_mean=0.2, prior_stddev=1.5, name="enc"),
    GaussianEncoder(V, K, hidden_units=())])
def test_serialises(layer):
    config = keras.saving.serialize_keras_object(layer)
    assert config["registered_name"] == "tcnlm_tf>GaussianEncoder"
    clone = keras.saving.deserialize_keras_object(config)
    assert type(clone) is GaussianEncoder and clone.get_config() == layer.get_config()
    d = counts()
    randomised(layer)
    clone.build((None, V))
    clone.set_weights(layer.get_weights())
    for key, value in layer(d).items():
        np.testing.assert_array_equal(clone(d)[key].numpy(), value.numpy(), err_msg=key)
