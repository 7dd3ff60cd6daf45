"""The Gaussian inference network shared by TCNLM's neural topic model and Topic-RNN.

References: W. Wang, Z. Gan, W. Wang, D. Shen, J. Huang, W. Ping, S. Satheesh, L. Carin,
"Topic Compositional Neural Language Model", AISTATS 2018, Sec. 3.1 (eq. 4-5: the Gaussian
``theta ~ N(mu_0, sigma_0^2 I)``) and Sec. 3.3 (the ``KL(q(theta|d) || p(theta))`` term of
the ELBO, eq. 17); A. B. Dieng, C. Wang, J. Gao, J. Paisley, "TopicRNN: A Recurrent Neural
Network with Long-Range Semantic Dependency", ICLR 2017, Sec. 3 ("model inference": the
feed-forward network that gives ``q(theta|X_c)``, a diagonal Gaussian, and its KL to
``N(0, I)``). Both follow Y. Miao, E. Grefenstette, P. Blunsom, "Discovering Discrete Latent
Topics with Neural Variational Inference", ICML 2017.
"""
from __future__ import annotations

import math
import numbers
from typing import Sequence

import keras


def distributions():
    """TFP's distributions for the running Keras backend: ``tfp.distributions`` under
    TensorFlow, TFP's JAX substrate under JAX, ``None`` under PyTorch (TFP has no PyTorch
    substrate; :class:`GaussianEncoder` then uses the same reparameterisation and the
    closed-form KL of :func:`gaussian_kl` in ``keras.ops``)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow_probability as tfp
        return tfp.distributions
    if backend == "jax":
        from tensorflow_probability.substrates import jax as tfp_jax
        return tfp_jax.distributions
    return None


def _tfp_distributions():
    """:func:`distributions`, or ``NotImplementedError`` saying what to use instead."""
    tfd = distributions()
    if tfd is None:
        raise NotImplementedError(
            f"TFP has no substrate for the {keras.backend.backend()} backend, so "
            "GaussianEncoder has no TFP posterior or prior there; use call()'s mean, "
            "log_variance, theta and kl (closed form, gaussian_kl).")
    return tfd


def gaussian_kl(mean, log_variance, prior_mean: float, prior_stddev: float):
    """``KL(N(mu, diag(sigma^2)) || N(mu_0, sigma_0^2 I))`` in closed form, summed over the
    last axis: ``mean``, ``log_variance`` ``[..., K]`` -> ``[...]``,

    ``1/2 sum_k ((mu_k - mu_0)^2 / sigma_0^2 + sigma_k^2 / sigma_0^2 - 1
    - log(sigma_k^2 / sigma_0^2))``

    (TCNLM eq. 17's KL term). What :class:`GaussianEncoder` uses where TFP has no substrate
    (PyTorch); equal to ``tfd.kl_divergence`` of the same Gaussians (a test checks)."""
    ops = keras.ops
    log_prior_variance = 2.0 * math.log(prior_stddev)
    ratio = ops.exp(log_variance - log_prior_variance)
    terms = (ops.square(mean - prior_mean) / prior_stddev ** 2 + ratio - 1.0
             - (log_variance - log_prior_variance))
    return 0.5 * ops.sum(terms, axis=-1)


def positive_int(value, what: str) -> int:
    """Returns ``value`` as an int; ``ValueError`` naming ``what`` unless it is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{what} must be a positive integer, got {value!r}.")
    return int(value)


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class GaussianEncoder(keras.layers.Layer):
    """Bag-of-words counts -> the diagonal Gaussian posterior ``q(theta|d)`` and its KL to
    the prior ``p(theta) = N(mu_0, sigma_0^2 I)`` (TCNLM eq. 4-5 and 17, Wang et al. 2018;
    Topic-RNN's inference network, Dieng et al. 2017, Sec. 3).

    Shapes: counts ``d [B, V]`` -> ``mu [B, K]``, ``log sigma^2 [B, K]``, ``theta [B, K]`` and
    ``KL [B]`` (:meth:`call`); :meth:`posterior` gives ``q(theta|d)`` as a
    ``tfp.distributions`` distribution with batch shape ``[B]`` and event shape ``[K]``
    (under JAX, one of TFP's JAX substrate).

    ``log1p(d)`` goes through ``len(hidden_units)`` Dense+ReLU layers, then two linear heads
    give ``mu`` and ``log sigma^2``:

    * the encoder reads ``log1p(d)`` rather than the raw counts: a monotone rescaling of the
      input only, so that a word with tens of occurrences does not saturate the first layer;
    * the mean head and the hidden layers start with Glorot-uniform kernels and zero biases;
    * the log-variance head starts with a zero kernel and a zero bias (as in Miao et al.'s
      code), so every initial posterior variance is exactly 1: with the prior ``N(0, I)`` the
      initial KL comes from the means alone. (Topic-RNN's head gives ``log sigma``;
      ``log sigma^2`` is the same family.)

    The posterior is ``tfd.Independent(tfd.Normal(mu, exp(log sigma^2 / 2)), 1)``: its
    ``sample()`` is the reparameterised draw ``mu + sigma * eps``, ``eps ~ N(0, I)``, and the
    KL is ``tfd.kl_divergence`` to :meth:`prior`, the analytic
    ``1/2 sum_k ((mu_k - mu_0)^2 / sigma_0^2 + sigma_k^2 / sigma_0^2 - 1
    - log(sigma_k^2 / sigma_0^2))``.

    Backends (all computing with ``keras.ops``): under TensorFlow the distributions are
    ``tfp.distributions``, under JAX TFP's JAX substrate, both drawing with a seed from the
    layer's ``keras.random.SeedGenerator`` (``seed_generator``: its state is a variable
    outside the weights, which a training checkpoint keeps beside the dropout layers' own,
    so a resumed run draws what an uninterrupted one would); under PyTorch, for which TFP
    has no substrate, :meth:`call` draws ``mu + sigma * eps`` with ``keras.random.normal``
    and takes the KL from :func:`gaussian_kl` (the same Gaussian reparameterisation and KL,
    tested equal), and
    :meth:`posterior`, :meth:`prior` and :meth:`gaussian` raise ``NotImplementedError``.

    The weights (``encoder_<i>_kernel``/``_bias``, ``mean_kernel``, ``mean_bias``,
    ``log_variance_kernel``, ``log_variance_bias``) belong to this layer itself, so a subclass
    (:class:`layers.topic_model.NeuralTopicModel`, :class:`layers.topic_rnn.
    TopicRNNInference`) holds them under its own name: ``<layer>/mean_kernel``.

    The layer computes in float32 (its default policy); the KL and the logs are not meant for
    float16.

    Args:
        vocab_size: ``V``, the width of the counts ``d``.
        latent_dim: ``K``, the dimension of ``theta``.
        hidden_units: widths of the ReLU layers (may be empty).
        prior_mean: ``mu_0``, the mean of every coordinate of the prior.
        prior_stddev: ``sigma_0 > 0``, the prior's standard deviation in every coordinate.
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(self, vocab_size: int, latent_dim: int,
                 hidden_units: Sequence[int] = (256, 256), prior_mean: float = 0.0,
                 prior_stddev: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        owner = type(self).__name__
        self.vocab_size = positive_int(vocab_size, f"{owner} vocab_size")
        self.hidden_units = tuple(positive_int(h, f"{owner} hidden_units")
                                  for h in hidden_units)
        self.latent_dim = positive_int(latent_dim, f"{owner} latent_dim")
        if not (math.isfinite(prior_stddev) and prior_stddev > 0):
            raise ValueError(f"{owner} prior_stddev must be positive, got {prior_stddev!r}.")
        self.prior_mean = float(prior_mean)
        self.prior_stddev = float(prior_stddev)
        # Every backend draws from a seed the layer carries (a JAX function cannot use a
        # global random state): its state is a variable outside the weights, so a resumed
        # training continues the stream exactly where the checkpoint left it.
        self.seed_generator = keras.random.SeedGenerator(name="theta_seed")

    def build(self, input_shape):
        if input_shape[-1] != self.vocab_size:
            raise ValueError(f"{type(self).__name__} expects counts [B, {self.vocab_size}], "
                             f"got shape {input_shape}.")
        self.encoder_kernels, self.encoder_biases = [], []
        width = self.vocab_size
        for i, units in enumerate(self.hidden_units):
            self.encoder_kernels.append(self.add_weight(
                name=f"encoder_{i}_kernel", shape=(width, units), initializer="glorot_uniform"))
            self.encoder_biases.append(self.add_weight(
                name=f"encoder_{i}_bias", shape=(units,), initializer="zeros"))
            width = units
        self.mean_kernel = self.add_weight(name="mean_kernel", shape=(width, self.latent_dim),
                                           initializer="glorot_uniform")
        self.mean_bias = self.add_weight(name="mean_bias", shape=(self.latent_dim,),
                                         initializer="zeros")
        self.log_variance_kernel = self.add_weight(
            name="log_variance_kernel", shape=(width, self.latent_dim), initializer="zeros")
        self.log_variance_bias = self.add_weight(
            name="log_variance_bias", shape=(self.latent_dim,), initializer="zeros")

    def encode(self, counts):
        """``d [B, V]`` -> ``(mu [B, K], log sigma^2 [B, K])`` of ``q(theta|d)``."""
        ops = keras.ops
        h = ops.log1p(ops.cast(counts, self.compute_dtype))
        for kernel, bias in zip(self.encoder_kernels, self.encoder_biases):
            h = ops.relu(ops.matmul(h, kernel) + bias)
        mean = ops.matmul(h, self.mean_kernel) + self.mean_bias
        log_variance = ops.matmul(h, self.log_variance_kernel) + self.log_variance_bias
        return mean, log_variance

    @staticmethod
    def gaussian(mean, log_variance):
        """``N(mean, diag(exp(log_variance)))`` over the last axis, a TFP distribution:
        ``[B, K]`` each -> batch shape ``[B]``, event shape ``[K]``."""
        tfd = _tfp_distributions()
        return tfd.Independent(tfd.Normal(mean, keras.ops.exp(0.5 * log_variance)), 1)

    def posterior(self, counts):
        """``q(theta|d)``: ``d [B, V]`` -> TFP distribution, batch shape ``[B]``, event
        ``[K]``."""
        if not self.built:
            self.build(counts.shape)
        return self.gaussian(*self.encode(counts))

    def prior(self):
        """``p(theta) = N(mu_0, sigma_0^2 I)`` (TCNLM eq. 4), a TFP distribution: batch shape
        ``[]``, event ``[K]``."""
        tfd = _tfp_distributions()
        ops = keras.ops
        return tfd.Independent(
            tfd.Normal(ops.full([self.latent_dim], self.prior_mean, self.compute_dtype),
                       ops.full([self.latent_dim], self.prior_stddev, self.compute_dtype)),
            1,
        )

    def kl_divergence(self, posterior):
        """``KL(posterior || prior())`` [B], analytic (``tfd.kl_divergence``)."""
        return _tfp_distributions().kl_divergence(posterior, self.prior())

    def _draw_and_kl(self, mean, log_variance, draw: bool):
        """``(theta, KL)`` of ``q = N(mean, diag(exp(log_variance)))``: ``theta`` [B, K] a
        reparameterised draw from ``q`` if ``draw`` else ``mean``; ``KL(q || prior())`` [B].
        Through TFP where it has a substrate, else in closed form (class docstring)."""
        if distributions() is not None:
            posterior = self.gaussian(mean, log_variance)
            seed = self.seed_generator.next()
            if keras.backend.backend() == "tensorflow":   # TFP's stateless seeds are int32
                seed = keras.ops.cast(seed, "int32")
            return (posterior.sample(seed=seed) if draw else mean,
                    self.kl_divergence(posterior))
        theta = mean
        if draw:
            theta = mean + keras.ops.exp(0.5 * log_variance) * keras.random.normal(
                keras.ops.shape(mean), dtype=mean.dtype, seed=self.seed_generator)
        return theta, gaussian_kl(mean, log_variance, self.prior_mean, self.prior_stddev)

    def call(self, counts, training=False, sample=None):
        """Counts ``d [B, V]`` -> a dict of ``mean`` (``mu``), ``log_variance``
        (``log sigma^2``) and ``theta``, all ``[B, K]``, and ``kl`` ``[B]``,
        ``KL(q(theta|d) || N(mu_0, sigma_0^2 I))``.

        ``theta`` is the reparameterised draw ``mu + sigma * eps`` when sampling, else ``mu``;
        ``sample=None`` means "sample iff ``training``" (both Python bools)."""
        mean, log_variance = self.encode(counts)
        theta, kl = self._draw_and_kl(mean, log_variance,
                                      training if sample is None else sample)
        return {"mean": mean, "log_variance": log_variance, "theta": theta, "kl": kl}

    def compute_output_shape(self, input_shape):
        batch = input_shape[0]
        return {"mean": (batch, self.latent_dim), "log_variance": (batch, self.latent_dim),
                "theta": (batch, self.latent_dim), "kl": (batch,)}

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, latent_dim=self.latent_dim,
                      hidden_units=list(self.hidden_units), prior_mean=self.prior_mean,
                      prior_stddev=self.prior_stddev)
        return config
