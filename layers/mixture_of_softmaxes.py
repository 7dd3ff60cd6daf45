"""Mixture-of-softmaxes output layer (Yang et al., 2018), with optional tied word embeddings.

Reference: Z. Yang, Z. Dai, R. Salakhutdinov, W. W. Cohen, "Breaking the Softmax Bottleneck:
A High-Rank RNN Language Model", ICLR 2018 (arXiv:1711.03953), Sec. 2.3, eq. 2. It is the
strongest comparison decoder of the SDLM paper (Gu et al., 2018, EMNLP).
"""
from __future__ import annotations

import numbers

import keras
from keras import ops

from layers.output_embedding import OutputEmbedding


def log_normaliser(logits):
    """``logsumexp`` over the last axis: ``logits [..., V]`` -> ``[...]``, as ``ops.logsumexp``
    computes it and with its gradient ``softmax(logits) * upstream`` (under TensorFlow both
    bit for bit), but with the exponentials of the forward pass kept for the backward one.

    Differentiated as written, TensorFlow's ``reduce_logsumexp`` broadcasts the upstream
    gradient to ``[..., V]`` (a ``BroadcastTo``) before multiplying it into the
    exponentials; here it is one broadcasting product, ``(upstream / sum) * exp``, in the
    order TensorFlow's own gradients multiply (``upstream * reciprocal(sum)``, then ``* exp``).
    Forward and backward over ``[1200, 10, 4809]`` (an APNEWS MoS batch) took 0.71x and
    0.59x the time in two runs of ``python -m benchmarks.probe_log_normaliser`` on one CPU
    thread. The shift is the row's maximum, or 0 where it is not finite, as in
    ``reduce_logsumexp``."""
    @ops.custom_gradient
    def normaliser(x):
        row_max = ops.max(x, axis=-1, keepdims=True)
        shift = ops.where(ops.isfinite(row_max), row_max, ops.zeros_like(row_max))
        exponentials = ops.exp(x - shift)
        total = ops.sum(exponentials, axis=-1, keepdims=True)

        def grad(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream  # PyTorch: the keyword
            return (upstream[..., None] * ops.reciprocal(total)) * exponentials
        return ops.squeeze(ops.log(total) + shift, axis=-1), grad
    return normaliser(logits)


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class MixtureOfSoftmaxes(OutputEmbedding, keras.layers.Layer):
    """Mixture of ``N`` softmaxes over the vocabulary (Yang et al., 2018, eq. 2).

    Model, for a context vector ``g`` in ``R^{H1}``:

    * prior: ``pi = softmax(W_pi g)``, ``[N]``. No bias, as ``self.prior = nn.Linear(nhidlast,
      n_experts, bias=False)`` in the authors' code;
    * latent contexts: ``h_n = tanh(W_h g + b_h)`` reshaped to ``[N, H2]``, with dropout
      (``latent_dropout``) on ``h`` in training. The authors use locked (variational) dropout
      over time; this layer drops every position independently;
    * ``logits_n = h_n X^T + b`` with ``X`` ``[V, H2]`` the word embeddings (tied, as in the
      authors' code) and ``b`` ``[V]`` one output bias shared by the components;
    * ``log P(w|g) = logsumexp_n(log pi_n + log_softmax(logits_n)[w])``.

    With ``N = 1`` this is a tied softmax behind a ``tanh`` projection. Cost per position is
    ``O(N H2 V)``, ``N`` times a full softmax, and ``[N, V]`` activations.

    Weight tying: pass the model's ``keras.layers.Embedding`` as ``embedding`` to use its
    ``embeddings`` (not owned, not in ``get_config``: the parent model passes it again, as
    ``TiedSoftmax`` does); without it the layer owns a ``word_embeddings`` ``[V,
    embedding_dim]`` weight (uniform in +-0.1, the authors' initialisation).

    Shapes: :meth:`call` ``hidden [..., H1]`` -> ``log P(w|g)`` ``[..., V]`` (sums to one);
    :meth:`target_log_prob` ``hidden [..., H1]``, int ``targets [...]`` -> ``[...]``.
    ``H1`` must be known when the layer is built; under a mixed-precision policy construct the
    layer with ``dtype="float32"``.

    Args:
        vocab_size: ``V``.
        num_mixtures: ``N``; 15 is the authors' setting on PTB and WikiText-2.
        embedding: a ``keras.layers.Embedding`` ``[V, H2]`` to tie to, or ``None``.
        embedding_dim: ``H2`` of the layer's own word embeddings; required without
            ``embedding``, and must equal ``embedding.output_dim`` with it.
        latent_dropout: dropout rate on ``h`` in training (the authors' ``dropoutl``, 0.29 for
            PTB).
        embedding_dropout: dropout rate on the dimensions of ``X`` in training (see
            :class:`~layers.output_embedding.OutputEmbedding`; not in the MoS authors' code).
        **kwargs: passed to :class:`keras.layers.Layer` (``name``, ``dtype``, ...).
    """

    def __init__(
        self,
        vocab_size: int,
        num_mixtures: int = 15,
        embedding: keras.layers.Embedding | None = None,
        embedding_dim: int | None = None,
        latent_dropout: float = 0.0,
        embedding_dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for what, value in (("vocab_size", vocab_size), ("num_mixtures", num_mixtures)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"MixtureOfSoftmaxes {what} must be a positive int, "
                                 f"got {value!r}.")
        if not 0.0 <= latent_dropout < 1.0:
            raise ValueError(f"MixtureOfSoftmaxes latent_dropout must be in [0, 1), "
                             f"got {latent_dropout!r}.")
        self.vocab_size = int(vocab_size)
        self.num_mixtures = int(num_mixtures)
        self.latent_dropout = float(latent_dropout)
        self._init_output_embedding(embedding, embedding_dim, self.vocab_size,
                                    embedding_dropout)
        self.dropout = keras.layers.Dropout(self.latent_dropout, name="latent_dropout")

    def build(self, input_shape):
        h1 = input_shape[-1]
        if h1 is None:
            raise ValueError(f"MixtureOfSoftmaxes needs a known last input dimension, got "
                             f"shape {input_shape}.")
        self.input_dim = h1 = int(h1)
        n, h2 = self.num_mixtures, self.embedding_dim
        self.prior_kernel = self.add_weight(name="prior_kernel", shape=(h1, n),
                                            initializer="glorot_uniform")
        self.latent_kernel = self.add_weight(name="latent_kernel", shape=(h1, n * h2),
                                             initializer="glorot_uniform")
        self.latent_bias = self.add_weight(name="latent_bias", shape=(n * h2,),
                                           initializer="zeros")
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros")
        self._build_output_embedding(self.vocab_size)

    def _components(self, hidden, training):
        """``hidden [..., H1]`` -> (``log pi`` ``[T, N]`` float32, ``h`` ``[T, N, H2]``, ``X``
        ``[V, H2]``, component logits ``[T, N, V]`` float32): the products run in the compute
        dtype, the normalisers in float32."""
        if not self.built:
            self.build(hidden.shape)
        dtype = self.compute_dtype
        g = ops.reshape(ops.cast(hidden, dtype), (-1, self.input_dim))
        prior_logits = ops.matmul(g, ops.cast(self.prior_kernel, dtype))
        log_prior = ops.log_softmax(ops.cast(prior_logits, "float32"), axis=-1)
        latent = ops.tanh(ops.matmul(g, ops.cast(self.latent_kernel, dtype))
                          + ops.cast(self.latent_bias, dtype))
        latent = self.dropout(latent, training=training)
        latent = ops.reshape(latent, (-1, self.num_mixtures, self.embedding_dim))
        embeddings = self._output_embeddings(training)
        logits = (ops.matmul(ops.reshape(latent, (-1, self.embedding_dim)),  # [T * N, H2]
                             ops.transpose(embeddings))
                  + ops.cast(self.output_bias, dtype))
        logits = ops.reshape(ops.cast(logits, "float32"),
                             (-1, self.num_mixtures, self.vocab_size))
        return log_prior, latent, embeddings, logits

    def call(self, hidden, training=False):
        """``hidden [..., H1]`` -> ``log P(w|g)`` ``[..., V]``."""
        log_prior, _, _, logits = self._components(hidden, training)
        log_p = ops.logsumexp(log_prior[:, :, None] + ops.log_softmax(logits, axis=-1), axis=1)
        return ops.reshape(log_p, (*ops.shape(hidden)[:-1], self.vocab_size))

    def target_log_prob(self, hidden, targets, training=False):
        """``log P(target|g)``: ``hidden [..., H1]``, int ``targets [...]`` -> ``[...]``.

        Equals :meth:`call` gathered at ``targets`` (to rounding) without forming the mixed
        ``[..., V]`` distribution: each component's target log-probability is its target
        logit minus its log-normaliser. The target logits ``h_n . x_w + b_w`` are computed
        from the target's embedding row rather than gathered from the ``[T, N, V]`` logits,
        whose gather (and its dense gradient) cost more than the dot products: 1.16x the
        lstm-mos training throughput of the gather under TensorFlow on the CPU. The
        log-normalisers over ``[T, N, V]`` are :func:`log_normaliser`'s.
        """
        log_prior, latent, embeddings, logits = self._components(hidden, training)
        t = ops.reshape(ops.cast(targets, "int32"), (-1,))
        rows = ops.take(embeddings, t, axis=0)  # [T, H2]
        target_logits = (ops.einsum("tnh,th->tn", latent, rows)
                         + ops.cast(ops.take(self.output_bias, t), latent.dtype)[:, None])
        component = ops.cast(target_logits, "float32") - log_normaliser(logits)
        log_p = ops.logsumexp(log_prior + component, axis=-1)
        return ops.reshape(log_p, ops.shape(targets))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.vocab_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            num_mixtures=self.num_mixtures,
            embedding_dim=self.embedding_dim,
            latent_dropout=self.latent_dropout,
            embedding_dropout=self.embedding_dropout,
        )
        return config
