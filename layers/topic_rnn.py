"""The layers of Topic-RNN: its inference network and its output layer.

Reference: A. B. Dieng, C. Wang, J. Gao, J. Paisley, "TopicRNN: A Recurrent Neural Network
with Long-Range Semantic Dependency", ICLR 2017, Sec. 3. Its generative process, for a
document with topic vector theta and an RNN with hidden states h_t [H]:

1. theta ~ N(0, I_K);
2. for every word t: the stop-word indicator l_t ~ Bernoulli(sigmoid(Gamma^T h_t + gamma_0)),
   then y_t from the full-vocabulary softmax
   ``p(y_t = i | h_t, theta, l_t) ∝ exp(v_i^T h_t + c_i + (1 - l_t) b_i^T theta)``.

Training maximises the variational lower bound (Sec. 3, "model inference") with
``q(theta | X_c)``, a diagonal Gaussian computed by a feed-forward network from the
document's term frequencies X_c without stop words (:class:`TopicRNNInference`).
:class:`TopicRNNOutput` gives the three logits of step 2; the probabilities built from them
are the model's (:mod:`tcnlm_tf.models.topic_rnn`).
"""
from __future__ import annotations

from typing import Sequence

import keras
from keras import ops

from layers.adaptive_softmax import AdaptiveSoftmax
from layers.gaussian_encoder import GaussianEncoder, positive_int


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class TopicRNNInference(GaussianEncoder):
    """The inference network q(theta | X_c) = N(mu(X_c), diag(sigma^2(X_c))) (Sec. 3).

    A :class:`layers.gaussian_encoder.GaussianEncoder` with K = ``num_topics`` and the
    paper's prior N(0, I): ``log1p(X_c)`` [B, D] goes through ``len(hidden_units)``
    Dense+ReLU layers (the paper's g), then two linear heads give ``mu`` [B, K] and
    ``log sigma^2`` [B, K]; the log-variance head starts at zero, so every initial variance
    is 1, the prior's. (The paper's head gives ``log sigma``; ``log sigma^2`` is the same
    family.)

    :meth:`call`: term frequencies X_c [B, D] -> a dict of [B, K] tensors ``mean`` (mu),
    ``log_variance`` (log sigma^2) and ``theta`` (the reparameterised draw
    mu + sigma * eps when sampling, else mu), and ``kl`` [B], KL(q(theta|X_c) || N(0, I)).

    Args:
        vocab_size: D, the width of the term-frequency input.
        num_topics: K, the dimension of theta.
        hidden_units: widths of the ReLU layers (may be empty).
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(self, vocab_size: int, num_topics: int,
                 hidden_units: Sequence[int] = (256, 256), **kwargs):
        super().__init__(vocab_size, positive_int(num_topics, "TopicRNNInference num_topics"),
                         hidden_units=hidden_units, **kwargs)

    @property
    def num_topics(self) -> int:
        """K, the dimension of theta (the encoder's ``latent_dim``)."""
        return self.latent_dim

    def get_config(self):
        config = super().get_config()
        for fixed in ("latent_dim", "prior_mean", "prior_stddev"):   # K is num_topics; N(0, I)
            del config[fixed]
        config.update(num_topics=self.num_topics)
        return config


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class TopicRNNOutput(AdaptiveSoftmax):
    """The logits of Topic-RNN's word and stop-word distributions (Sec. 3, step 2).

    A full softmax (an :class:`AdaptiveSoftmax` without tail clusters, the project's
    ``--decoder softmax``) whose ``head_kernel`` [H, V] holds the word vectors v_i and
    ``head_bias`` [V] their biases c_i, extended with the stop-word classifier Gamma
    (``stop_kernel`` [H, 1]) and gamma_0 (``stop_bias`` []) and the topic matrix B [V, K],
    stored transposed as ``topic_kernel`` [K, V] (no bias): row k of ``topic_kernel``, the
    column k of B, is topic k's additive bias on every word's logit.

    :meth:`call`: hidden h [..., H] and theta [B, K] -> a dict of

    * ``stop_logit`` [...]: Gamma^T h + gamma_0, the logit of p(l = 1 | h);
    * ``word_logits`` [..., V]: v_i^T h + c_i for every word i;
    * ``topic_bias`` [B, V]: B theta, added to ``word_logits`` where l = 0.

    Args:
        vocab_size: V, the LM vocabulary size.
        num_topics: K, the dimension of theta.
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(self, vocab_size: int, num_topics: int, **kwargs):
        super().__init__(vocab_size, (), **kwargs)
        self.num_topics = positive_int(num_topics, "TopicRNNOutput num_topics")

    def build(self, input_shape):
        super().build(input_shape)
        self.stop_kernel = self.add_weight(name="stop_kernel", shape=(self.input_dim, 1),
                                           initializer="glorot_uniform")
        self.stop_bias = self.add_weight(name="stop_bias", shape=(), initializer="zeros")
        self.topic_kernel = self.add_weight(name="topic_kernel",
                                            shape=(self.num_topics, self.vocab_size),
                                            initializer="glorot_uniform")

    def call(self, hidden, theta):
        """The products in the compute dtype, every output float32."""
        hidden = ops.cast(hidden, self.compute_dtype)
        flat = ops.reshape(hidden, (-1, self.input_dim))
        leading = tuple(ops.shape(hidden)[:-1])
        stop_logit = (ops.matmul(flat, self._weight(self.stop_kernel))[:, 0]
                      + self._weight(self.stop_bias))
        word_logits = self._head_logits(flat)
        topic_bias = ops.matmul(ops.cast(theta, self.compute_dtype),
                                self._weight(self.topic_kernel))
        return {"stop_logit": ops.reshape(ops.cast(stop_logit, "float32"), leading),
                "word_logits": ops.reshape(word_logits, (*leading, self.vocab_size)),
                "topic_bias": ops.cast(topic_bias, "float32")}

    def compute_output_shape(self, hidden_shape, theta_shape):
        leading = tuple(hidden_shape[:-1])
        return {"stop_logit": leading, "word_logits": leading + (self.vocab_size,),
                "topic_bias": (theta_shape[0], self.vocab_size)}

    def get_config(self):
        config = super().get_config()
        del config["cutoffs"], config["div_value"]     # always a full softmax
        config.update(num_topics=self.num_topics)
        return config
