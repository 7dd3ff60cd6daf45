"""Topic-compositional LSTM (TCNLM, Wang et al., AISTATS 2018, Sec. 3.2); the naive
mixture-of-experts LSTM it is compared with is :mod:`layers.mixture_of_experts`.

Reference: W. Wang, Z. Gan, W. Wang, D. Shen, J. Huang, W. Ping, S. Satheesh, L. Carin,
"Topic Compositional Neural Language Model", AISTATS 2018 (arXiv:1712.09783). The factored
LSTM follows Gan et al., "Semantic Compositional Networks for Visual Captioning", 2016.

* :class:`TopicCompositionalLSTMCell`: the cell of eq. 13-15, for ``keras.layers.RNN``.
* :class:`TopicState`: the cell's per-sequence topic factors as a functional-model layer.
* :class:`TopicCompositionalLSTM`: that cell run over a sequence, taking ``[x, t]``.
"""
from __future__ import annotations

import math

import keras
from keras import ops

# DropoutRNNCell lives in a private Keras module; it is used as keras.layers.LSTMCell uses
# it (per-sequence dropout masks that keras.layers.RNN creates before the loop and clears
# after it). requirements.txt pins keras==3.15.1, whose module path and contract this relies on.
from keras.src.layers.rnn.dropout_rnn_cell import DropoutRNNCell

from layers.hoisted_lstm import runs_tensorflow_recurrence
from layers.lstm_gates import (NUM_GATES, blockwise_initializer, check_positive_int,
                               grouped_matmul, lstm_bias_initializer, lstm_update)


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class TopicCompositionalLSTMCell(keras.layers.Layer, DropoutRNNCell):
    """The topic-compositional LSTM cell (Wang et al., 2018, eq. 13-15).

    The topic vector ``t [B, T]`` (a distribution over ``T`` topics) turns one set of
    factored weights into a document-specific LSTM: for every gate ``* in {i, f, c, o}``

    * eq. 14: ``x~_* = (W_*b t) ⊙ (W_*c x_m)``,
    * eq. 15: ``h~_* = (U_*b t) ⊙ (U_*c h_{m-1})``,
    * eq. 13: ``i, f, o = sigmoid(W_*a x~_* + U_*a h~_* + b_*)``,
      ``c~ = tanh(W_ca x~_c + U_ca h~_c + b_c)``, ``c_m = i ⊙ c~ + f ⊙ c_{m-1}``,
      ``h_m = o ⊙ tanh(c_m)``.

    Deviation from the paper: eq. 13 prints ``σ`` for the candidate ``c~``; this cell uses
    ``tanh``, as a standard LSTM and the factored LSTM of Gan et al. (2016) that TCNLM builds
    on do (a sigmoid candidate could only ever add to the cell). Biases ``b_*``, omitted in
    the paper, are included. For a given ``t`` the cell is exactly a standard LSTM with
    per-gate input weights ``W_*a diag(W_*b t) W_*c = sum_k t_k W_*[k]``, where
    ``W_*[k] = W_*a diag(W_*b[:, k]) W_*c`` is topic ``k``'s LSTM (eq. 11-12), and likewise
    for the recurrent weights.

    Weights (row-vector convention ``x @ W``; the four gates fused along the factor axis,
    ``n_x`` = input size, ``n_h = units``, ``n_f = num_factors``, ``T = num_topics``):

    * ``input_kernel`` ``W_c [n_x, 4 n_f]``, ``recurrent_kernel`` ``U_c [n_h, 4 n_f]``;
    * ``input_topic_kernel`` ``W_b [T, 4 n_f]``, ``recurrent_topic_kernel`` ``U_b [T, 4 n_f]``;
    * ``input_factor_kernel`` ``W_a [4, n_f, n_h]``,
      ``recurrent_factor_kernel`` ``U_a [4, n_f, n_h]``;
    * ``bias [4 n_h]``.

    That is ``4 n_f (n_x + 2T + 3 n_h)`` weights (Sec. 3.2) plus ``4 n_h`` biases.

    The topic enters once per sequence. ``W_b t`` and ``U_b t`` are carried in the state, so
    ``state_size = [n_h, n_h, 4 n_f, 4 n_f]`` = ``(h, c, W_b t, U_b t)``; a step passes the
    last two through and never reads ``W_b``/``U_b``. :meth:`topic_state` builds the initial
    state from ``t``::

        cell = TopicCompositionalLSTMCell(64, num_factors=32, num_topics=T)
        h = keras.layers.RNN(cell, return_sequences=True)(x, initial_state=cell.topic_state(t))

    ``W_b`` and ``U_b`` are created in ``__init__`` (their shapes do not depend on the
    input), so :meth:`topic_state` works before the cell is built. Without an initial state
    the cell has no topic, and :meth:`get_initial_state` raises ``ValueError``. Masked steps
    keep the previous state (``keras.layers.RNN`` does this). Several cells can be stacked
    (``StackedRNNCells`` or several ``RNN`` layers), each with its own :meth:`topic_state`.

    Shapes: :meth:`call` ``x [B, n_x]``, states ``[h [B, n_h], c [B, n_h], W_b t [B, 4 n_f],
    U_b t [B, 4 n_f]]`` -> ``(h [B, n_h], new states)``.

    The input half of eq. 13-14, ``W_*a x~_* + b_*``, does not depend on ``h``:
    :meth:`input_gates` computes it for every step of a sequence in one batched product, and
    a cell made with ``input_gates_given=True`` then takes those ``[B, 4 n_h]`` gate inputs in
    place of ``x`` and computes only the recurrent half in its loop (how
    :class:`TopicCompositionalLSTM` runs it; ``python -m benchmarks.run`` measures both).

    Args:
        units: hidden size ``n_h``.
        num_factors: number of factors ``n_f`` per gate.
        num_topics: number of topics ``T`` (the size of ``t``).
        dropout: fraction of the input ``x`` dropped (one mask per sequence, shared by the
            gates) before ``W_c``, in training only.
        recurrent_dropout: the same for ``h_{m-1}`` before ``U_c``.
        kernel_initializer: initializer of ``W_c`` and of each gate's ``W_a [n_f, n_h]``.
        recurrent_initializer: initializer of ``U_c`` and of each gate's ``U_a [n_f, n_h]``.
        topic_initializer: initializer of ``W_b`` and ``U_b``. The default, normal with mean 1
            and standard deviation 0.1, makes ``W_b t`` close to 1 for a topic distribution
            ``t``, so at initialisation every topic's LSTM is near the factored LSTM
            ``W_a W_c``, with small differences between topics.
        topic_kernel_scale: ``s > 0``: ``W_b`` and ``U_b`` are stored divided by ``s`` (the
            initializer's values too) and multiplied by ``s`` where used. The model and its
            initial values do not change; Adam, which moves every weight by about its
            learning rate per step, then changes ``W_b`` and ``U_b`` ``s`` times faster.
            Their entries are near 1, while ``W_a, W_c`` entries are a few hundredths, so
            with ``s = 1`` the topic factors change 20-50 times more slowly, relative to
            their size, than the weights they modulate. On the synthetic corpus (128 units,
            64 factors, 6 epochs, Adam 1e-3) ``s = 1`` leaves TCNLM at validation perplexity
            198.35, no better than its LSTM, and ``s = 10`` reaches 180.04.
        bias_initializer: initializer of the bias.
        unit_forget_bias: add 1 to the forget-gate bias at initialisation (as LSTMCell).
        seed: seed of the dropout masks.
        input_gates_given: :meth:`call` receives :meth:`input_gates`'s output for the step,
            ``[B, 4 n_h]``, instead of ``x`` (whose size the cell is still built with); the
            input dropout is then :meth:`input_gates`'s.
        **kwargs: passed to :class:`keras.layers.Layer` (``name``, ``dtype``, ...).
    """

    def __init__(
        self,
        units,
        num_factors,
        num_topics,
        dropout=0.0,
        recurrent_dropout=0.0,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        topic_initializer=None,
        topic_kernel_scale=10.0,
        bias_initializer="zeros",
        unit_forget_bias=True,
        seed=None,
        input_gates_given=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (("units", units), ("num_factors", num_factors),
                            ("num_topics", num_topics)):
            check_positive_int("TopicCompositionalLSTMCell", name, value)
        if not (math.isfinite(topic_kernel_scale) and topic_kernel_scale > 0):
            raise ValueError("TopicCompositionalLSTMCell topic_kernel_scale must be positive, "
                             f"got {topic_kernel_scale!r}.")
        self.topic_kernel_scale = float(topic_kernel_scale)
        self.units = units
        self.num_factors = num_factors
        self.num_topics = num_topics
        self.dropout = min(1.0, max(0.0, float(dropout)))
        self.recurrent_dropout = min(1.0, max(0.0, float(recurrent_dropout)))
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.topic_initializer = keras.initializers.get(
            topic_initializer or keras.initializers.RandomNormal(mean=1.0, stddev=0.1)
        )
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.unit_forget_bias = unit_forget_bias
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed=seed)
        self.input_gates_given = bool(input_gates_given)
        factor_size = NUM_GATES * num_factors
        self.state_size = [units, units, factor_size, factor_size]
        self.output_size = units
        self.input_topic_kernel = self.add_weight(
            name="input_topic_kernel",
            shape=(num_topics, factor_size),
            initializer=self._scaled_topic_initializer,
        )
        self.recurrent_topic_kernel = self.add_weight(
            name="recurrent_topic_kernel",
            shape=(num_topics, factor_size),
            initializer=self._scaled_topic_initializer,
        )

    def build(self, input_shape):
        input_dim = input_shape[-1]
        if input_dim is None:
            raise ValueError(
                "TopicCompositionalLSTMCell needs a known input size, got input shape "
                f"{input_shape}."
            )
        factor_shape = (NUM_GATES, self.num_factors, self.units)
        self.input_kernel = self.add_weight(
            name="input_kernel",
            shape=(input_dim, NUM_GATES * self.num_factors),
            initializer=self.kernel_initializer,
        )
        self.input_factor_kernel = self.add_weight(
            name="input_factor_kernel",
            shape=factor_shape,
            initializer=blockwise_initializer(
                self.kernel_initializer, NUM_GATES, factor_shape[1:]
            ),
        )
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel",
            shape=(self.units, NUM_GATES * self.num_factors),
            initializer=self.recurrent_initializer,
        )
        self.recurrent_factor_kernel = self.add_weight(
            name="recurrent_factor_kernel",
            shape=factor_shape,
            initializer=blockwise_initializer(
                self.recurrent_initializer, NUM_GATES, factor_shape[1:]
            ),
        )
        self.bias = self.add_weight(
            name="bias",
            shape=(NUM_GATES * self.units,),
            initializer=lstm_bias_initializer(
                self.bias_initializer, self.units, self.unit_forget_bias
            ),
        )

    def scaled_weights(self):
        """``[(weight, s)]``: ``W_b`` and ``U_b`` (``input_topic_kernel`` and
        ``recurrent_topic_kernel``), used multiplied by ``topic_kernel_scale``, so a trainer
        can clip the gradients of the unscaled model (:func:`train.trainer.clip_gradients`)."""
        return [(self.input_topic_kernel, self.topic_kernel_scale),
                (self.recurrent_topic_kernel, self.topic_kernel_scale)]

    def _scaled_topic_initializer(self, shape, dtype=None):
        return self.topic_initializer(shape, dtype=dtype) / self.topic_kernel_scale

    def topic_state(self, topics, initial_state=None):
        """The initial RNN state for topic vectors ``topics [B, T]``.

        Returns ``[h0 [B, n_h], c0 [B, n_h], topics @ W_b [B, 4 n_f], topics @ U_b
        [B, 4 n_f]]``: the topic factors ``W_*b t`` of eq. 14-15, computed once for the
        whole sequence. ``h0, c0`` are zeros unless ``initial_state=[h0, c0]`` is given.
        Works on eager tensors, inside ``tf.function`` and on symbolic ``KerasTensor``s of
        a functional model, where it adds a :class:`TopicState` layer that shares this cell
        (so ``model.save`` and ``keras.saving.load_model`` keep one cell for both).
        """
        if initial_state is not None and len(initial_state) != 2:
            raise ValueError(
                "TopicCompositionalLSTMCell.topic_state takes initial_state=[h0, c0], got "
                f"{len(initial_state)} tensors."
            )
        tensors = [topics, *(initial_state or [])]
        if any(isinstance(x, keras.KerasTensor) for x in tensors):
            return TopicState(self)(topics, initial_state)
        return self._topic_state(topics, initial_state)

    def _topic_state(self, topics, initial_state):
        topics = ops.cast(topics, self.variable_dtype)
        scale = self.topic_kernel_scale
        input_factors = ops.matmul(topics, scale * self.input_topic_kernel)
        recurrent_factors = ops.matmul(topics, scale * self.recurrent_topic_kernel)
        if initial_state is None:
            zeros = ops.zeros_like(ops.cast(topics[:, :1], self.compute_dtype))
            zeros = ops.tile(zeros, (1, self.units))
            initial_state = [zeros, zeros]
        return [*initial_state, ops.cast(input_factors, self.compute_dtype),
                ops.cast(recurrent_factors, self.compute_dtype)]

    def get_initial_state(self, batch_size=None):
        """Always raises: the cell has no state without a topic vector.

        ``keras.layers.RNN`` calls this only when no ``initial_state`` is passed; zero topic
        factors would zero every gate input (eq. 14-15), which is never what is meant.
        """
        raise ValueError(
            "TopicCompositionalLSTMCell needs its topic: call the RNN with "
            "initial_state=cell.topic_state(t) for topic vectors t [batch, num_topics]."
        )

    def input_gates(self, inputs, input_factors, training=False):
        """Eq. 14 and the input half of eq. 13 for a whole sequence: ``inputs [B, L, n_x]``
        and ``input_factors = W_b t [B, 4 n_f]`` -> ``W_*a x~_* + b_*`` for the four gates,
        ``[B, L, 4 n_h]`` (gate-major). ``W_c x`` for all ``L`` steps is one matmul and the
        four ``W_*a`` products one batched matmul, outside any recurrence. In training, the
        input dropout mask (one per sequence) is applied first."""
        if training and 0.0 < self.dropout < 1.0:
            inputs = inputs * ops.expand_dims(self.get_dropout_mask(inputs[:, 0, :]), 1)
        shape = ops.shape(inputs)
        # eq. 14 for all four gates at once: [B L, 4, n_f].
        x_tilde = ops.reshape(
            ops.matmul(inputs, self.input_kernel) * ops.expand_dims(input_factors, 1),
            (-1, NUM_GATES, self.num_factors),
        )
        z = grouped_matmul(x_tilde, self.input_factor_kernel)
        z = z + ops.reshape(self.bias, (NUM_GATES, self.units))
        return ops.reshape(z, (shape[0], shape[1], NUM_GATES * self.units))

    def call(self, inputs, states, training=False):
        """One step: ``inputs [B, n_x]`` (or, with ``input_gates_given``, the step's
        :meth:`input_gates` ``[B, 4 n_h]``), ``states`` as :meth:`topic_state` returns them
        -> ``(h [B, n_h], [h, c, W_b t, U_b t])`` (eq. 13-15)."""
        h_tm1, c_tm1, input_factors, recurrent_factors = states
        if not self.input_gates_given:
            inputs = self.input_gates(ops.expand_dims(inputs, 1), input_factors, training)[:, 0]
        h_in = h_tm1
        if training and 0.0 < self.recurrent_dropout < 1.0:
            h_in = h_tm1 * self.get_recurrent_dropout_mask(h_tm1)
        # eq. 15 for all four gates at once, gate-major: [4, B, n_f].
        h_tilde = ops.transpose(
            ops.reshape(ops.matmul(h_in, self.recurrent_kernel) * recurrent_factors,
                        (-1, NUM_GATES, self.num_factors)), (1, 0, 2))
        # U_*a h~_* of the four gates in one batched product, [4, B, n_h], taken apart
        # along its leading axis (contiguous) rather than brought back to [B, 4, n_h] by a
        # transpose at every step (the layer's training step takes 20 % longer with the
        # transpose and indexing, measured in RESULTS.md)
        recurrent = ops.unstack(ops.matmul(h_tilde, self.recurrent_factor_kernel), NUM_GATES)
        # eq. 13: (W_*a x~_* + b_*) + U_*a h~_* for each gate *, each [B, n_h].
        z = [x + r for x, r in zip(ops.split(inputs, NUM_GATES, axis=-1), recurrent)]
        h, c = lstm_update(*z, c_tm1)
        return h, [h, c, input_factors, recurrent_factors]

    def get_config(self):
        config = {
            "units": self.units,
            "num_factors": self.num_factors,
            "num_topics": self.num_topics,
            "dropout": self.dropout,
            "recurrent_dropout": self.recurrent_dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
            "topic_initializer": keras.initializers.serialize(self.topic_initializer),
            "topic_kernel_scale": self.topic_kernel_scale,
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "unit_forget_bias": self.unit_forget_bias,
            "seed": self.seed,
            "input_gates_given": self.input_gates_given,
        }
        return {**super().get_config(), **config}


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class TopicState(keras.layers.Layer):
    """``cell.topic_state(t)`` as a layer of a functional model (eq. 14-15, once per sequence).

    ``TopicCompositionalLSTMCell.topic_state`` adds this layer when given symbolic inputs:
    ``t [B, T]`` (and optionally ``initial_state=[h0, c0]``) -> ``[h0, c0, t @ W_b,
    t @ U_b]``, the initial state of ``keras.layers.RNN(cell)``. The layer holds the cell
    itself, not a copy of ``W_b``/``U_b``: training updates the cell's weights, and
    ``model.save`` stores the cell once, so after ``keras.saving.load_model`` this layer and
    the ``RNN`` layer share one reloaded cell again (Keras's shared-object mechanism of
    ``.keras`` files; a bare ``get_config``/``from_config`` round trip of the whole model,
    outside ``model.save``, would give each its own copy).

    Args:
        cell: the :class:`TopicCompositionalLSTMCell` whose topic kernels are used.
    """

    def __init__(self, cell, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(cell, TopicCompositionalLSTMCell):
            raise ValueError(f"TopicState needs a TopicCompositionalLSTMCell, got {cell!r}.")
        self.cell = cell

    def build(self, *args, **kwargs):
        self.built = True   # the cell's topic kernels exist from its __init__

    def call(self, topics, initial_state=None):
        return self.cell._topic_state(topics, initial_state)

    def compute_output_spec(self, topics, initial_state=None):
        batch = topics.shape[0]
        factors = NUM_GATES * self.cell.num_factors
        dtype = self.cell.compute_dtype
        return [keras.KerasTensor((batch, self.cell.units), dtype=dtype),
                keras.KerasTensor((batch, self.cell.units), dtype=dtype),
                keras.KerasTensor((batch, factors), dtype=dtype),
                keras.KerasTensor((batch, factors), dtype=dtype)]

    def get_config(self):
        cell = keras.saving.serialize_keras_object(self.cell)
        # Mark the cell as shared, as Keras marks the second serialisation of an object it
        # has seen (the RNN layer's, which comes after this one in a functional model).
        # Keras marks the first one too, but on a dict that this layer's config has already
        # copied, so without this the reloaded model would have two cells.
        cell["shared_object_id"] = id(self.cell)
        return {**super().get_config(), "cell": cell}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        cell = keras.saving.deserialize_keras_object(config.pop("cell"))
        return cls(cell, **config)


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class TopicCompositionalLSTM(keras.layers.Layer):
    """A :class:`TopicCompositionalLSTMCell` run over a sequence (eq. 13-15).

    Shapes: :meth:`call` takes ``[x [B, L, n_x], t [B, T]]`` and returns ``[B, L, units]``
    (``return_sequences=True``) or the last output ``[B, units]``; with ``return_state``
    it returns ``(outputs, h [B, units], c [B, units])``. The topic factors stay internal.
    ``initial_state=[h0, c0]`` starts from a given state instead of zeros. A mask on ``x``
    (e.g. from ``Embedding(mask_zero=True)``) is honoured: masked steps keep the previous
    state, and with ``return_sequences`` the mask is passed on to the outputs.

    The input half of eq. 13-14 is computed for all steps before the loop
    (:meth:`TopicCompositionalLSTMCell.input_gates`). Under TensorFlow the loop is
    :func:`layers.topic_lstm_recurrence.topic_lstm_recurrence`, whose backward pass is
    written out (per step only the gate gradients and products with the transposed
    recurrent weights, materialised once; the weights' gradients one product each after the
    loop), except where TensorFlow sees a GPU and with recurrent dropout in training; there,
    and under the other backends, it is ``keras.layers.RNN`` over the cell. Both read the
    same weights (the ``cell``'s, tracked under ``rnn`` either way), give the same outputs
    and gradients and draw the same dropout masks.

    Args:
        units: hidden size.
        num_factors: number of factors per gate.
        num_topics: size ``T`` of the topic vector ``t``.
        return_sequences: return every step's output, or only the last.
        return_state: also return the final ``h`` and ``c``.
        dropout: input dropout of the cell.
        recurrent_dropout: recurrent dropout of the cell.
        seed: seed of the dropout masks.
        topic_kernel_scale: see :class:`TopicCompositionalLSTMCell`.
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(
        self,
        units,
        num_factors,
        num_topics,
        return_sequences=True,
        return_state=False,
        dropout=0.0,
        recurrent_dropout=0.0,
        seed=None,
        topic_kernel_scale=10.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.return_sequences = return_sequences
        self.return_state = return_state
        self.cell = TopicCompositionalLSTMCell(
            units,
            num_factors=num_factors,
            num_topics=num_topics,
            dropout=dropout,
            recurrent_dropout=recurrent_dropout,
            seed=seed,
            topic_kernel_scale=topic_kernel_scale,
            input_gates_given=True,
            dtype=self.dtype_policy,
            name="cell",
        )
        self.rnn = keras.layers.RNN(
            self.cell,
            return_sequences=return_sequences,
            return_state=return_state,
            dtype=self.dtype_policy,
            name="rnn",
        )
        self.supports_masking = True

    def build(self, input_shape):
        x_shape, t_shape = input_shape
        if t_shape[-1] != self.cell.num_topics:
            raise ValueError(
                f"TopicCompositionalLSTM expects topics [batch, {self.cell.num_topics}], got "
                f"shape {t_shape}."
            )
        self.rnn.build(x_shape)

    def call(self, inputs, mask=None, initial_state=None, training=None):
        """``inputs = [x [B, L, n_x], t [B, T]]``; ``mask [B, L]`` (or ``[mask_x, mask_t]``)
        for ``x``; ``initial_state = [h0, c0]``, each ``[B, units]``. The topic factors of
        eq. 14-15 are computed once here, and the input half of eq. 13-14 for all ``L``
        steps (:meth:`TopicCompositionalLSTMCell.input_gates`); the cell's loop over the
        steps computes only the recurrent half."""
        x, topics = inputs
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        state = self.cell.topic_state(topics, initial_state)
        gates = self.cell.input_gates(x, state[2], training)
        if self._runs_tensorflow_recurrence(training):
            return self._tensorflow_loop(gates, state, mask)
        outputs = self.rnn(gates, initial_state=state, mask=mask, training=training)
        if self.return_state:
            return outputs[:3]
        return outputs

    def _runs_tensorflow_recurrence(self, training) -> bool:
        """Whether the loop is :func:`layers.topic_lstm_recurrence.topic_lstm_recurrence`:
        under TensorFlow without a GPU, and without recurrent dropout in training (there
        ``keras.layers.RNN`` runs the cell)."""
        return runs_tensorflow_recurrence(self.cell, training)

    def _tensorflow_loop(self, gates, state, mask):
        """The recurrence of ``keras.layers.RNN(cell)`` under TensorFlow, from the input
        half ``gates [B, L, 4 n_h]`` and the cell's ``state``, by
        :func:`layers.topic_lstm_recurrence.topic_lstm_recurrence` (masking as
        ``keras.layers.RNN``); returns what :meth:`call` returns."""
        import tensorflow as tf

        from layers.topic_lstm_recurrence import topic_lstm_recurrence

        cell = self.cell
        h0, c0 = (ops.cast(s, cell.compute_dtype) for s in state[:2])
        # the dropout masks keras.layers.RNN draws (this loop uses none), so that the cell's
        # seed generator moves as under keras.layers.RNN
        cell.get_dropout_mask(gates[:, 0, :])
        cell.get_recurrent_dropout_mask(h0)
        outputs, h, c = topic_lstm_recurrence(
            tf.transpose(gates, (1, 0, 2)), h0, c0,
            ops.convert_to_tensor(cell.recurrent_kernel),
            ops.convert_to_tensor(cell.recurrent_factor_kernel), state[3],
            None if mask is None else tf.transpose(mask, (1, 0)))
        cell.reset_dropout_mask()
        cell.reset_recurrent_dropout_mask()
        outputs = tf.transpose(outputs, (1, 0, 2)) if self.return_sequences else outputs[-1]
        return (outputs, h, c) if self.return_state else outputs

    def compute_output_shape(self, input_shape):
        x_shape = input_shape[0]
        if self.return_sequences:
            output_shape = (x_shape[0], x_shape[1], self.cell.units)
        else:
            output_shape = (x_shape[0], self.cell.units)
        if self.return_state:
            state_shape = (x_shape[0], self.cell.units)
            return output_shape, state_shape, state_shape
        return output_shape

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        output_mask = mask if self.return_sequences else None
        if self.return_state:
            return [output_mask, None, None]
        return output_mask

    def get_config(self):
        config = {
            "units": self.cell.units,
            "num_factors": self.cell.num_factors,
            "num_topics": self.cell.num_topics,
            "return_sequences": self.return_sequences,
            "return_state": self.return_state,
            "dropout": self.cell.dropout,
            "recurrent_dropout": self.cell.recurrent_dropout,
            "seed": self.cell.seed,
            "topic_kernel_scale": self.cell.topic_kernel_scale,
        }
        return {**super().get_config(), **config}
