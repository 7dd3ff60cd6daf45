"""Attention over the preceding sentences and late fusion, for the larger-context LM.

Reference: T. Wang, K. Cho, "Larger-Context Language Modelling with Recurrent Neural
Network", ACL 2016: the context of the preceding sentences as bags of words summarised by
attention with the LM's state as query (Sec. 3.1), and late fusion (Sec. 3.2; here into the
LSTM's output h_t rather than its memory cell, see :mod:`tcnlm_tf.models.lclm`).
:class:`ContextAttention` is the attention and the fusion gate; the bags of words (s_l, the
mean context embedding of each sentence) are the model's (:class:`tcnlm_tf.models.lclm.LCLM`).
"""
from __future__ import annotations

import numbers

import keras
from keras import ops

#: the score of a missing sentence before the softmax (exp of it minus a real score is 0)
_MISSING = -1e9


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class ContextAttention(keras.layers.Layer):
    """Attention over N context vectors with each recurrent output as the query, and the
    late-fusion gate that adds the attended context to that output.

    For each position t (``h_t`` in R^H, the top LSTM layer's output) and context sentences
    l = 1..N (``s_l`` in R^e, ``mask_l`` = 1 for a real sentence):

    * ``e_{t,l} = vᵀ tanh(W_a s_l + U_a h_t + b_a)``  (attention scores, size a);
    * ``α_{t,l} = mask_l exp(e_{t,l}) / Σ_k mask_k exp(e_{t,k})``: the softmax over the
      real sentences; every α is 0 when there is none;
    * ``z_t = Σ_l α_{t,l} s_l``  (0 when there is no real sentence);
    * ``r_t = σ(W_r z_t + U_r h_t + b_r)``;
    * ``h'_t = h_t + r_t ⊙ tanh(W_z z_t + b_z)``.

    Weights (row-vector convention ``s @ W``): ``context_kernel [e, a]`` = W_a,
    ``query_kernel [H, a]`` = U_a, ``attention_bias [a]`` = b_a, ``score_vector [a]`` = v,
    ``gate_context_kernel [e, H]`` = W_r, ``gate_hidden_kernel [H, H]`` = U_r,
    ``gate_bias [H]`` = b_r, ``fusion_kernel [e, H]`` = W_z, ``fusion_bias [H]`` = b_z;
    kernels Glorot-uniform, biases zero.

    Shapes: ``[h, s, mask]`` with ``h [B, L, H]``, ``s [B, N, e]``, ``mask [B, N]`` (float,
    1 or 0) -> ``h' [B, L, H]``; :meth:`attention` gives α ``[B, L, N]``.

    Args:
        attention_size: size ``a`` of the attention's hidden layer.
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(self, attention_size: int, **kwargs):
        super().__init__(**kwargs)
        if (isinstance(attention_size, bool) or not isinstance(attention_size, numbers.Integral)
                or attention_size < 1):
            raise ValueError(f"ContextAttention attention_size must be an integer >= 1, got "
                             f"{attention_size!r}.")
        self.attention_size = int(attention_size)

    def build(self, input_shape):
        hidden_shape, context_shape, _ = input_shape
        if hidden_shape[-1] is None or context_shape[-1] is None:
            raise ValueError(f"ContextAttention expects [h [B, L, H], s [B, N, e], mask [B, N]] "
                             f"with known H and e, got shapes {input_shape}.")
        h, e, a = hidden_shape[-1], context_shape[-1], self.attention_size

        def weight(name, shape, initializer="glorot_uniform"):
            return self.add_weight(name=name, shape=shape, initializer=initializer)

        self.context_kernel = weight("context_kernel", (e, a))
        self.query_kernel = weight("query_kernel", (h, a))
        self.attention_bias = weight("attention_bias", (a,), "zeros")
        self.score_vector = weight("score_vector", (a,))
        self.gate_context_kernel = weight("gate_context_kernel", (e, h))
        self.gate_hidden_kernel = weight("gate_hidden_kernel", (h, h))
        self.gate_bias = weight("gate_bias", (h,), "zeros")
        self.fusion_kernel = weight("fusion_kernel", (e, h))
        self.fusion_bias = weight("fusion_bias", (h,), "zeros")

    def attention(self, hidden, context, mask):
        """α [B, L, N] for ``h [B, L, H]``, ``s [B, N, e]``, ``mask [B, N]``."""
        keys = ops.matmul(context, self.context_kernel) + self.attention_bias      # [B, N, a]
        queries = ops.matmul(hidden, self.query_kernel)                           # [B, L, a]
        scores = ops.sum(ops.tanh(queries[:, :, None, :] + keys[:, None, :, :])
                         * self.score_vector, axis=-1)                            # [B, L, N]
        real = ops.cast(mask, scores.dtype)[:, None, :]
        scores = ops.where(real > 0, scores, _MISSING)
        weights = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True)) * real
        return weights / ops.maximum(ops.sum(weights, axis=-1, keepdims=True), 1e-30)

    def call(self, inputs):
        """``[h [B, L, H], s [B, N, e], mask [B, N]]`` -> ``h'`` [B, L, H]."""
        hidden, context, mask = inputs
        summary = ops.matmul(self.attention(hidden, context, mask), context)      # z [B, L, e]
        gate = ops.sigmoid(ops.matmul(summary, self.gate_context_kernel)
                           + ops.matmul(hidden, self.gate_hidden_kernel) + self.gate_bias)
        return hidden + gate * ops.tanh(ops.matmul(summary, self.fusion_kernel)
                                        + self.fusion_bias)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[0])

    def get_config(self):
        config = super().get_config()
        config.update(attention_size=self.attention_size)
        return config
