"""Bag-of-words input and the Gaussian-softmax neural topic model (NTM) of TCNLM.

Reference: W. Wang, Z. Gan, W. Wang, D. Shen, J. Huang, W. Ping, S. Satheesh, L. Carin,
"Topic Compositional Neural Language Model", AISTATS 2018, Sec. 3.1 (eq. 4-6 and the
diversity regulariser) and Sec. 3.3 (eq. 17-18). The topic model follows the Gaussian
softmax construction of Y. Miao, E. Grefenstette, P. Blunsom, "Discovering Discrete Latent
Topics with Neural Variational Inference", ICML 2017.
"""
from __future__ import annotations

import math
from typing import Sequence

import keras

from layers.gaussian_encoder import GaussianEncoder, positive_int

#: Added to the word probabilities ``t @ beta`` before the log in the reconstruction term
#: (see :meth:`NeuralTopicModel.call`); it only guards against an underflow to exactly zero.
WORD_PROB_FLOOR = 1e-10
#: Cosines are clipped to ``[0, 1 - COSINE_MARGIN]`` before ``arccos`` in
#: :meth:`NeuralTopicModel.diversity`, where ``d arccos(x)/dx = -1/sqrt(1 - x^2)`` is finite.
COSINE_MARGIN = 1e-6


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class BagOfWords(keras.layers.Layer):
    """Word ids -> bag-of-words counts ``d`` (the NTM input of Sec. 3.1).

    Shapes: integer ``ids [B, N]`` with values in ``[0, vocab_size)`` -> float32
    ``counts [B, vocab_size]``, ``counts[b, v]`` = number of positions ``n`` with
    ``ids[b, n] == v``. Id 0 is padding and is not counted, so column 0 is always 0.

    Computed with one scatter-add of the non-padding mask into ``[B, V]`` (no ``[B, N, V]``
    one-hot), in ``keras.ops`` (every backend). The counts are float32 whatever the layer's
    dtype policy: they are exact integers that the topic model consumes in float32.

    Args:
        vocab_size: number of word ids ``V`` (the vocabulary size ``D`` of the paper).
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(self, vocab_size: int, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = positive_int(vocab_size, "BagOfWords vocab_size")

    def call(self, ids):
        """``ids [B, N]`` -> ``counts [B, vocab_size]`` (float32, column 0 is 0; an id outside
        ``[1, vocab_size)`` is not counted).

        A scatter-add of 1 per id (``keras.ops.scatter`` sums repeated indices), which every
        backend traces with static shapes (a bincount's width depends on the values, so JAX
        cannot compile it); the counts are exact integers either way."""
        ids = keras.ops.cast(ids, "int32")
        batch, width = keras.ops.shape(ids)[0], keras.ops.shape(ids)[1]
        flat = keras.ops.reshape(ids, (-1,))
        counted = keras.ops.logical_and(flat > 0, flat < self.vocab_size)
        rows = keras.ops.repeat(keras.ops.arange(batch, dtype="int32"), width)
        indices = keras.ops.stack([rows, keras.ops.where(counted, flat, 0)], axis=1)
        return keras.ops.scatter(indices, keras.ops.cast(counted, "float32"),
                                 (batch, self.vocab_size))

    def compute_output_spec(self, ids):
        """Symbolic ``[B, vocab_size]`` float32 output, whatever the dtype policy."""
        return keras.KerasTensor((ids.shape[0], self.vocab_size), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size)
        return config


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class NeuralTopicModel(GaussianEncoder):
    """Gaussian-softmax neural topic model of TCNLM (Sec. 3.1, eq. 4-6; Miao et al., 2017).

    Generative model (eq. 4): ``theta ~ N(mu_0, sigma_0^2 I)`` in ``R^K``,
    ``t = softmax(W_hat theta + b_hat)`` in the ``T``-simplex, and each word of the document
    is drawn from ``beta^T t`` (eq. 6), where row ``beta_i = softmax(topic_word_logits()_i)``
    is topic ``i``'s distribution over the ``D`` words. So ``log p(d|t) = sum_v d_v
    log((t beta)_v)`` for the bag-of-words counts ``d`` (eq. 5-6).

    Inference network ``q(theta|d) = N(mu(d), diag(sigma^2(d)))``: the
    :class:`layers.gaussian_encoder.GaussianEncoder` this layer extends (``log1p(d)``
    through ``len(hidden_units)`` Dense+ReLU layers, 2 x 256 in the paper's setup, Sec. 5,
    then linear heads for ``mu [B, K]`` and ``log sigma^2 [B, K]``; the log-variance head
    starts at zero, so every initial posterior variance is 1). Its weights are this layer's
    own (``<name>/mean_kernel``, ...), built before the topic weights below.

    * ``W_hat`` starts Glorot-uniform with a zero bias; the topic-word logits start
      Glorot-uniform, so the topics start distinct (see :meth:`diversity`).
    * The topic-word logits are stored as ``topic_word_weights`` and used as
      ``topic_word_scale * topic_word_weights`` (the weights start at Glorot-uniform divided by
      the scale, so the initial logits do not depend on it). The model is unchanged; only its
      learning speed is. Adam moves every variable by about its learning rate per step,
      whatever the gradient's size, and logits that start near 0 must move several units
      before a topic concentrates on its words. With a scale ``s`` they move ``s`` times
      faster: the same as a learning rate ``s * lr`` for the logits alone. On the synthetic
      corpus, Adam at 1e-3 with a scale of 1 recovers the true topics only to a mean cosine
      of 0.24 after 2,000 steps, with the KL term stuck near 0 (the encoder unused). With a
      scale of 30 it reaches 0.93 after 500 steps and 0.98 after 2,000.

    :meth:`call` returns the per-document terms of the NTM part of the ELBO (eq. 17): the
    single-sample reconstruction ``log p(d|t)`` and the analytic
    ``KL(q(theta|d) || N(mu_0, sigma_0^2 I))``. The training objective of eq. 18 maximises
    ``ELBO + diversity_weight * R`` with ``R = diversity()``; :meth:`objective` gives the
    NTM's share of the loss to minimise, with ``diversity_weight`` (lambda = 0.1 in the
    paper).

    The layer computes in float32 (its default policy); the KL and the logs are not meant for
    float16. Works inside ``tf.function`` and in a ``tf.distribute`` replica context.

    Args:
        vocab_size: vocabulary size ``D``; the input is ``d [B, D]``.
        num_topics: number of topics ``T``.
        hidden_units: widths of the encoder's ReLU layers (may be empty).
        latent_dim: dimension ``K`` of ``theta``; ``None`` means ``num_topics``.
        prior_mean: ``mu_0``, the mean of every coordinate of the prior on ``theta``.
        prior_stddev: ``sigma_0 > 0``, the prior's standard deviation in every coordinate.
        diversity_weight: ``lambda`` of eq. 18 (used by :meth:`objective`).
        topic_word_scale: ``s > 0``, the logits' multiplier described above (1 is the plain
            parameterisation).
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(
        self,
        vocab_size: int,
        num_topics: int,
        hidden_units: Sequence[int] = (256, 256),
        latent_dim: int | None = None,
        prior_mean: float = 0.0,
        prior_stddev: float = 1.0,
        diversity_weight: float = 0.1,
        topic_word_scale: float = 30.0,
        **kwargs,
    ):
        topics = positive_int(num_topics, "NeuralTopicModel num_topics")
        super().__init__(vocab_size, topics if latent_dim is None else latent_dim,
                         hidden_units=hidden_units, prior_mean=prior_mean,
                         prior_stddev=prior_stddev, **kwargs)
        self.num_topics = topics
        self.diversity_weight = float(diversity_weight)
        if not (math.isfinite(topic_word_scale) and topic_word_scale > 0):
            raise ValueError(
                f"NeuralTopicModel topic_word_scale must be positive, got {topic_word_scale!r}."
            )
        self.topic_word_scale = float(topic_word_scale)

    def build(self, input_shape):
        """The encoder's weights (:meth:`GaussianEncoder.build`), then ``topic_kernel``
        ``[K, T]``, ``topic_bias`` ``[T]`` and ``topic_word_weights`` ``[T, D]``."""
        super().build(input_shape)
        self.topic_kernel = self.add_weight(
            name="topic_kernel",
            shape=(self.latent_dim, self.num_topics),
            initializer="glorot_uniform",
        )
        self.topic_bias = self.add_weight(
            name="topic_bias", shape=(self.num_topics,), initializer="zeros"
        )
        glorot = keras.initializers.GlorotUniform()
        self.topic_word_weights = self.add_weight(
            name="topic_word_weights",
            shape=(self.num_topics, self.vocab_size),
            initializer=lambda shape, dtype=None: glorot(shape, dtype) / self.topic_word_scale,
        )

    def topic_word_logits(self):
        """``[T, D]`` logits of beta: ``topic_word_scale * topic_word_weights``."""
        return self.topic_word_scale * self.topic_word_weights

    def scaled_weights(self):
        """``[(weight, s)]``: the weights this layer uses multiplied by a constant ``s``
        (``topic_word_weights``), so a trainer can clip the gradients of the unscaled model
        (:func:`train.trainer.clip_gradients`)."""
        return [(self.topic_word_weights, self.topic_word_scale)]

    def topic_word(self):
        """``beta [T, D]``: row ``i`` is topic ``i``'s word distribution (rows sum to 1)."""
        return keras.ops.softmax(self.topic_word_logits(), axis=-1)

    def topic_proportions(self, theta):
        """``t = g(theta) = softmax(W_hat theta + b_hat)`` (eq. 4): ``[B, K]`` -> ``[B, T]``."""
        return keras.ops.softmax(keras.ops.matmul(theta, self.topic_kernel) + self.topic_bias,
                                 axis=-1)

    def call(self, bow_counts, training=False, sample=None):
        """NTM forward pass on bag-of-words counts ``d [B, D]`` (eq. 4-6, 17).

        ``theta`` is a reparameterised draw from ``q(theta|d)`` when sampling, else the
        posterior mean; ``sample=None`` means "sample iff ``training``" (both Python bools).

        ``log((t beta)_v)`` is computed as ``log(t @ beta + WORD_PROB_FLOOR)`` rather than
        with a ``[B, T, D]`` log-sum-exp (96M floats at B=64, T=150, D=10k): every term of
        ``sum_i t_i beta_iv`` is non-negative, so the float32 matmul has no cancellation and
        a relative error of a few ulps, hence an absolute error of ~1e-7 in the log. The
        floor only keeps ``log`` finite if a probability underflows to 0 (the result is
        then ``log(1e-10) = -23``, multiplied by ``d_v``).

        Returns a dict:

        * ``"topics"``: ``t [B, T]``, the document's topic proportions (eq. 4);
        * ``"mean"``, ``"log_variance"``: ``mu``, ``log sigma^2 [B, K]`` of ``q(theta|d)``;
        * ``"theta"``: ``theta [B, K]``;
        * ``"reconstruction"``: ``log p(d|t) = sum_v d_v log((t beta)_v)`` ``[B]`` (eq. 6);
        * ``"kl"``: ``KL(q(theta|d) || N(mu_0, sigma_0^2 I))`` summed over ``K`` ``[B]``.

        The NTM part of the ELBO (eq. 17) is ``mean(reconstruction - kl)``; :meth:`objective`
        turns these outputs into the training loss.
        """
        ops = keras.ops
        d = ops.cast(bow_counts, self.compute_dtype)
        encoded = super().call(d, training=training, sample=sample)
        topics = self.topic_proportions(encoded["theta"])
        word_probs = ops.matmul(topics, self.topic_word())
        reconstruction = ops.sum(d * ops.log(word_probs + WORD_PROB_FLOOR), axis=-1)
        return {
            "topics": topics,
            "mean": encoded["mean"],
            "log_variance": encoded["log_variance"],
            "theta": encoded["theta"],
            "reconstruction": reconstruction,
            "kl": encoded["kl"],
        }

    def objective(self, outputs, weights=None, diversity=None):
        """The NTM's share of the loss to minimise, a scalar: the negative ELBO terms of
        eq. 17 and the diversity regulariser of eq. 18,

            sum_b w_b (KL_b - log p(d_b|t_b)) - lambda R sum_b w_b,

        so ``R`` keeps weight ``lambda`` relative to each ELBO term.

        Args:
            outputs: the dict :meth:`call` returned (``kl``, ``reconstruction`` ``[B]``).
            weights: ``w [B]``, each example's weight; ``None``: ``1 / B`` each (the batch
                mean).
            diversity: ``R`` when the caller has computed it already, else
                :meth:`diversity`.
        """
        ops = keras.ops
        kl, reconstruction = outputs["kl"], outputs["reconstruction"]
        if weights is None:
            weights = ops.ones_like(kl) / ops.cast(ops.size(kl), kl.dtype)
        if diversity is None:
            diversity = self.diversity()
        return (ops.sum(weights * (kl - reconstruction))
                - self.diversity_weight * diversity * ops.sum(weights))

    def diversity(self):
        """Topic diversity regulariser ``R = phi - nu`` (Sec. 3.1), a scalar.

        ``a_ij = arccos(|beta_i . beta_j| / (||beta_i|| ||beta_j||))`` over all ``T^2``
        ordered pairs, the diagonal included, exactly as the paper's ``1/T^2 sum_i sum_j``;
        ``phi = mean(a)``, ``nu = mean((a - phi)^2)``. The cosine is clipped into
        ``[0, 1 - 1e-6]`` first: at cosine 1 (the diagonal, or two identical topics) the
        derivative of ``arccos`` is infinite. The clipped diagonal angle is
        ``arccos(1 - 1e-6) ~= 1.4e-3`` instead of 0 and contributes no gradient.
        """
        ops = keras.ops
        unit = ops.normalize(self.topic_word(), axis=-1, order=2)
        cosine = ops.abs(ops.matmul(unit, ops.transpose(unit)))
        angles = ops.arccos(ops.clip(cosine, 0.0, 1.0 - COSINE_MARGIN))
        phi = ops.mean(angles)
        nu = ops.mean(ops.square(angles - phi))
        return phi - nu

    def compute_output_shape(self, input_shape):
        batch = input_shape[0]
        return {
            "topics": (batch, self.num_topics),
            "mean": (batch, self.latent_dim),
            "log_variance": (batch, self.latent_dim),
            "theta": (batch, self.latent_dim),
            "reconstruction": (batch,),
            "kl": (batch,),
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            num_topics=self.num_topics,
            diversity_weight=self.diversity_weight,
            topic_word_scale=self.topic_word_scale,
        )
        return config
