"""Attention over the preceding sentences and its fusion with an LSTM, for the larger-context
LM.

Reference: T. Wang, K. Cho, "Larger-Context Language Modelling with Recurrent Neural
Network", ACL 2016: the context of the preceding sentences as bags of words summarised by
attention with the LM's state as query (Sec. 2-3), and late fusion (Sec. 3.2): a controller
gate fuses the context with the LSTM's memory cell just before the output gate makes h_t, so
that h_t (which feeds the next step's gates) sees the context while the memory cell carried
to the next step does not.

* :class:`ContextAttention`: the attention and the fusion weights; called on a sequence of
  finished LSTM outputs it fuses the context into them after the LSTM (``output`` fusion:
  the context reaches only the output layer).
* :class:`LateFusionLSTMCell`: an LSTM cell with the attention and the late fusion inside the
  recurrence (:class:`LateFusionLSTM` runs it over a sequence).

The bags of words (s_l, the mean context embedding of each sentence) are the model's
(:class:`tcnlm_tf.models.lclm.LCLM`).
"""
from __future__ import annotations

import numbers

import keras
from keras import ops

#: the score of a missing sentence before the softmax (exp of it minus a real score is 0)
_MISSING = -1e9
#: gates in the order of keras.layers.LSTMCell: input, forget, candidate, output
_GATES = 4


def _masked_softmax(scores, mask):
    """Softmax of ``scores [..., N]`` over the entries where ``mask [..., N]`` is 1; all 0
    where no entry is."""
    real = ops.cast(mask, scores.dtype)
    scores = ops.where(real > 0, scores, _MISSING)
    weights = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True)) * real
    return weights / ops.maximum(ops.sum(weights, axis=-1, keepdims=True), 1e-30)


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class ContextAttention(keras.layers.Layer):
    """Attention over N context vectors with each recurrent output as the query, and the
    gate that adds the attended context to that output (``output`` fusion, after the LSTM;
    :class:`LateFusionLSTMCell` uses the same weights inside the recurrence).

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

    def keys(self, context):
        """``W_a s_l + b_a`` [B, N, a] for ``s [B, N, e]``: the part of the scores that does
        not depend on the query (computed once per sequence)."""
        return ops.matmul(context, self.context_kernel) + self.attention_bias

    def attention(self, hidden, context, mask):
        """α [B, L, N] for ``h [B, L, H]``, ``s [B, N, e]``, ``mask [B, N]``."""
        keys = self.keys(context)                                                 # [B, N, a]
        queries = ops.matmul(hidden, self.query_kernel)                           # [B, L, a]
        scores = ops.sum(ops.tanh(queries[:, :, None, :] + keys[:, None, :, :])
                         * self.score_vector, axis=-1)                            # [B, L, N]
        return _masked_softmax(scores, mask[:, None, :])

    def step_summary(self, query, keys, context, mask):
        """``z = Σ_l α_l s_l`` [B, e] for one query ``h [B, H]`` (one recurrent step), with
        ``keys`` from :meth:`keys`, ``s [B, N, e]`` and ``mask [B, N]``."""
        scores = ops.sum(ops.tanh(keys + ops.matmul(query, self.query_kernel)[:, None, :])
                         * self.score_vector, axis=-1)                            # [B, N]
        return ops.sum(_masked_softmax(scores, mask)[..., None] * context, axis=1)

    def gated_context(self, controlled, summary):
        """``r ⊙ tanh(W_z z + b_z)`` with the controller gate ``r = σ(W_r z + U_r u + b_r)``:
        ``u [..., H]`` (what the gate reads besides z), ``z [..., e]`` -> ``[..., H]``."""
        gate = ops.sigmoid(ops.matmul(summary, self.gate_context_kernel)
                           + ops.matmul(controlled, self.gate_hidden_kernel) + self.gate_bias)
        return gate * ops.tanh(ops.matmul(summary, self.fusion_kernel) + self.fusion_bias)

    def call(self, inputs):
        """``[h [B, L, H], s [B, N, e], mask [B, N]]`` -> ``h' = h + r ⊙ tanh(W_z z + b_z)``,
        ``r = σ(W_r z + U_r h + b_r)`` [B, L, H]: the ``output`` fusion, after the LSTM."""
        hidden, context, mask = inputs
        summary = ops.matmul(self.attention(hidden, context, mask), context)      # z [B, L, e]
        return hidden + self.gated_context(hidden, summary)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[0])

    def get_config(self):
        config = super().get_config()
        config.update(attention_size=self.attention_size)
        return config


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class LateFusionLSTMCell(keras.layers.Layer):
    """An LSTM cell whose hidden state is fused with an attended context (Wang and Cho 2016,
    Sec. 3.2, attention-based context with late fusion), for ``keras.layers.RNN``.

    One step, for the input ``x_t``, the previous ``h_{t-1}``, ``c_{t-1}`` and the context
    vectors ``s_1..s_N`` (``mask_l`` = 1 for a real one):

    * attention with the previous hidden state as query (the context of step t must exist
      before h_t does): ``e_{t,l} = vᵀ tanh(W_a s_l + U_a h_{t-1} + b_a)``,
      ``α_{t,l}`` = softmax over the real sentences, ``z_t = Σ_l α_{t,l} s_l`` (0 when there
      is none);
    * the LSTM without the context: ``i, f, o = σ(W x_t + U h_{t-1} + b)``,
      ``c~_t = tanh(W_c x_t + U_c h_{t-1} + b_c)``, ``c_t = f ⊙ c_{t-1} + i ⊙ c~_t``;
    * the controller gate on the context and the memory cell:
      ``r_t = σ(W_r z_t + U_r c_t + b_r)``;
    * late fusion: ``c^l_t = tanh(c_t) + r_t ⊙ tanh(W_z z_t + b_z)``, ``h_t = o_t ⊙ c^l_t``.

    ``h_t`` goes to the output layer and to the next step's gates and attention;
    ``c_t``, free of the context, is the memory carried to the next step. So the
    within-sentence memory and the document context stay separate, as Wang and Cho intend,
    and the recurrence still sees the context through ``h_{t-1}``.

    Weights: ``kernel [n_x, 4n]`` (Glorot-uniform), ``recurrent_kernel [n, 4n]``
    (orthogonal), ``bias [4n]`` (zeros, forget gate ones), gates in Keras' order i, f, c, o;
    and the attention and fusion weights of a :class:`ContextAttention` sub-layer
    ``context_attention`` (its ``gate_hidden_kernel`` is ``U_r``, read on ``c_t``).

    State: ``[h [B, n], c [B, n], keys [B, N a], s [B, N e], mask [B, N]]``: the last three
    are the per-sequence context (``keys = W_a s + b_a``, flattened), passed through every
    step unchanged; :meth:`context_state` builds them. With ``input_gates_given`` a step's
    input is ``W x_t + b`` ([B, 4n], :meth:`input_gates` computed for all steps at once).

    Args:
        units: hidden size ``n``.
        num_sentences: ``N``, context vectors per example.
        context_dim: ``e``, the size of a context vector.
        attention_size: ``a``, the attention's hidden size (default ``units``).
        input_gates_given: whether step inputs are :meth:`input_gates` outputs.
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(self, units: int, num_sentences: int, context_dim: int,
                 attention_size: int | None = None, input_gates_given: bool = False,
                 **kwargs):
        super().__init__(**kwargs)
        for name, value in (("units", units), ("num_sentences", num_sentences),
                            ("context_dim", context_dim)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"LateFusionLSTMCell {name} must be an integer >= 1, got "
                                 f"{value!r}.")
        self.units, self.num_sentences = int(units), int(num_sentences)
        self.context_dim = int(context_dim)
        self.attention_size = int(attention_size or units)
        self.input_gates_given = bool(input_gates_given)
        self.context_attention = ContextAttention(self.attention_size, dtype=self.dtype_policy,
                                                  name="context_attention")
        n = self.units
        self.state_size = [n, n, self.num_sentences * self.attention_size,
                           self.num_sentences * self.context_dim, self.num_sentences]
        self.output_size = n

    def build(self, input_shape):
        input_dim = input_shape[-1]
        if input_dim is None:
            raise ValueError(f"LateFusionLSTMCell needs a known input size, got {input_shape}.")
        n = self.units
        if not self.input_gates_given:
            self.build_input(input_dim)
        self.recurrent_kernel = self.add_weight(name="recurrent_kernel", shape=(n, _GATES * n),
                                                initializer="orthogonal")
        self.context_attention.build([(None, None, n), (None, self.num_sentences,
                                                        self.context_dim),
                                      (None, self.num_sentences)])

    def build_input(self, input_dim: int) -> None:
        """Create ``kernel`` and ``bias`` for inputs of size ``input_dim`` (the layer that
        hoists :meth:`input_gates` out of the loop calls this before the cell is built)."""
        n = self.units

        def bias_init(shape, dtype=None):
            return ops.concatenate([ops.zeros((n,), dtype), ops.ones((n,), dtype),
                                    ops.zeros((2 * n,), dtype)])

        self.kernel = self.add_weight(name="kernel", shape=(input_dim, _GATES * n),
                                      initializer="glorot_uniform")
        self.bias = self.add_weight(name="bias", shape=(_GATES * n,), initializer=bias_init)

    def input_gates(self, inputs):
        """``W x + b`` for inputs ``[..., n_x]`` -> ``[..., 4n]`` (all steps in one matmul)."""
        return ops.matmul(inputs, self.kernel) + self.bias

    def context_state(self, context, mask, initial_state=None):
        """The initial state for context vectors ``s [B, N, e]`` and ``mask [B, N]``:
        ``[h0, c0, keys, s, mask]`` flattened as :attr:`state_size`; ``h0, c0`` zeros unless
        ``initial_state=[h0, c0]``."""
        context = ops.cast(context, self.compute_dtype)
        keys = self.context_attention.keys(context)
        batch = ops.shape(context)[0]
        if initial_state is None:
            zeros = ops.zeros((batch, self.units), self.compute_dtype)
            initial_state = [zeros, zeros]
        return [*initial_state,
                ops.reshape(keys, (batch, self.num_sentences * self.attention_size)),
                ops.reshape(context, (batch, self.num_sentences * self.context_dim)),
                ops.cast(mask, self.compute_dtype)]

    def get_initial_state(self, batch_size=None):
        """Always raises: the cell has no context without :meth:`context_state`."""
        raise ValueError("LateFusionLSTMCell needs its context: call the RNN with "
                         "initial_state=cell.context_state(s, mask).")

    def call(self, inputs, states, training=False):
        """One step: ``inputs [B, n_x]`` (or ``[B, 4n]`` with ``input_gates_given``) and
        ``states`` as :meth:`context_state` -> ``(h [B, n], new states)``."""
        h_tm1, c_tm1, keys, context, mask = states
        n, sentences = self.units, self.num_sentences
        if not self.input_gates_given:
            inputs = self.input_gates(inputs)
        summary = self.context_attention.step_summary(
            h_tm1, ops.reshape(keys, (-1, sentences, self.attention_size)),
            ops.reshape(context, (-1, sentences, self.context_dim)), mask)          # z [B, e]
        z = inputs + ops.matmul(h_tm1, self.recurrent_kernel)
        i = ops.sigmoid(z[:, :n])
        f = ops.sigmoid(z[:, n:2 * n])
        c = f * c_tm1 + i * ops.tanh(z[:, 2 * n:3 * n])
        o = ops.sigmoid(z[:, 3 * n:])
        h = o * (ops.tanh(c) + self.context_attention.gated_context(c, summary))
        return h, [h, c, keys, context, mask]

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, num_sentences=self.num_sentences,
                      context_dim=self.context_dim, attention_size=self.attention_size,
                      input_gates_given=self.input_gates_given)
        return config


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class LateFusionLSTM(keras.layers.Layer):
    """A :class:`LateFusionLSTMCell` run over a sequence (Wang and Cho 2016, Sec. 3.2).

    Shapes: :meth:`call` takes ``[x [B, L, n_x], s [B, N, e], mask [B, N]]`` and returns the
    hidden states ``[B, L, units]`` (``return_sequences=True``) or the last one ``[B, units]``;
    with ``return_state`` it returns ``(outputs, h [B, units], c [B, units])``.
    ``initial_state=[h0, c0]`` starts from a given state instead of zeros. The input half of
    the gates (``W x_t + b``) is computed for all ``L`` steps before the loop; the cell and
    its weights are made at :meth:`build`, when ``N`` and ``e`` are known.

    Args:
        units: hidden size.
        attention_size: the attention's hidden size (default ``units``).
        return_sequences: return every step's output, or only the last.
        return_state: also return the final ``h`` and ``c``.
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(self, units: int, attention_size: int | None = None,
                 return_sequences: bool = True, return_state: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.units, self.attention_size = units, attention_size
        self.return_sequences, self.return_state = return_sequences, return_state

    def build(self, input_shape):
        x_shape, context_shape, _ = input_shape
        if x_shape[-1] is None or None in tuple(context_shape[1:]):
            raise ValueError(f"LateFusionLSTM expects [x [B, L, n_x], s [B, N, e], mask "
                             f"[B, N]] with known n_x, N and e, got shapes {input_shape}.")
        self.cell = LateFusionLSTMCell(self.units, context_shape[1], context_shape[2],
                                       self.attention_size, input_gates_given=True,
                                       dtype=self.dtype_policy, name="cell")
        self.cell.build_input(x_shape[-1])
        self.rnn = keras.layers.RNN(self.cell, return_sequences=self.return_sequences,
                                    return_state=True, dtype=self.dtype_policy, name="rnn")
        self.rnn.build((x_shape[0], x_shape[1], _GATES * self.units))

    def call(self, inputs, initial_state=None, training=None):
        """``inputs = [x, s, mask]``; ``initial_state = [h0, c0]``, each ``[B, units]``."""
        x, context, mask = inputs
        state = self.cell.context_state(context, mask, initial_state)
        outputs, h, c = self.rnn(self.cell.input_gates(x), initial_state=state,
                                 training=training)[:3]
        return (outputs, h, c) if self.return_state else outputs

    def compute_output_shape(self, input_shape):
        x_shape = input_shape[0]
        output = ((x_shape[0], x_shape[1], self.units) if self.return_sequences
                  else (x_shape[0], self.units))
        if self.return_state:
            return output, (x_shape[0], self.units), (x_shape[0], self.units)
        return output

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, attention_size=self.attention_size,
                      return_sequences=self.return_sequences, return_state=self.return_state)
        return config
