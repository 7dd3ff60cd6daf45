"""The naive mixture-of-experts LSTM that TCNLM is compared with (Wang et al., AISTATS
2018, eq. 7-8, Table 6): ``T`` independent LSTM experts computed as one cell, whose outputs
the model mixes with the topic proportions.

* :class:`MixtureOfExpertsLSTMCell`: ``T`` independent LSTM experts computed as one cell.
* :class:`MixtureOfExpertsLSTM`: ``keras.layers.RNN`` over that cell, whose loop under
  TensorFlow computes ``x W + b`` for all steps first and has its backward pass written out.
"""
from __future__ import annotations

import keras
from keras import ops

# DropoutRNNCell lives in a private Keras module; see layers/topic_lstm.py.
from keras.src.layers.rnn.dropout_rnn_cell import DropoutRNNCell

from layers.hoisted_lstm import runs_tensorflow_recurrence
from layers.lstm_gates import (NUM_GATES, blockwise_initializer, check_positive_int,
                               dropped_sequences, grouped_matmul, lstm_bias_initializer,
                               lstm_update)


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class MixtureOfExpertsLSTMCell(keras.layers.Layer, DropoutRNNCell):
    """``T`` independent LSTM experts in one cell: the naive MoE of eq. 7-8 (Table 6).

    Expert ``k`` is a standard LSTM with its own ``W[k], U[k], b[k]`` (eq. 8 with LSTM units)
    and sees only its own state. All experts are computed together:

    * ``kernel [n_x, T * 4 n_h]``: one matmul for all experts; columns
      ``[k * 4 n_h, (k + 1) * 4 n_h)`` are expert ``k``'s LSTMCell kernel (gates i, f, c, o);
    * ``recurrent_kernel [T, n_h, 4 n_h]``: one batched product, i.e. a block-diagonal
      recurrent matrix; block ``k`` is expert ``k``'s LSTMCell recurrent kernel;
    * ``bias [T * 4 n_h]``: expert-major like the kernel columns.

    That is ``T * 4 n_h (n_x + n_h + 1)`` parameters, ``T`` standard LSTMs.

    Shapes: :meth:`call` ``x [B, n_x]``, states ``h, c [B, T * n_h]`` (expert-major: expert
    ``k`` owns ``[k * n_h, (k + 1) * n_h)``) -> ``(h [B, T * n_h], [h, c])``. A model reshapes
    the outputs to ``[B, L, T, n_h]`` and mixes the experts' word distributions with the topic
    vector, ``p(y) = sum_k t_k softmax(V h^(k))`` (eq. 7); that mixing is not part of the cell.

    Args:
        units: hidden size ``n_h`` of each expert.
        num_experts: number of experts ``T`` (one per topic).
        dropout: fraction of the input dropped (one mask per sequence, shared by all gates
            and experts), in training only.
        recurrent_dropout: the same for ``h_{m-1}`` (independent per expert unit).
        kernel_initializer: initializer of each expert's kernel ``[n_x, 4 n_h]``.
        recurrent_initializer: initializer of each expert's recurrent kernel ``[n_h, 4 n_h]``.
        bias_initializer: initializer of the biases.
        unit_forget_bias: add 1 to every expert's forget-gate bias at initialisation.
        seed: seed of the dropout masks.
        **kwargs: passed to :class:`keras.layers.Layer`.
    """

    def __init__(
        self,
        units,
        num_experts,
        dropout=0.0,
        recurrent_dropout=0.0,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        unit_forget_bias=True,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("MixtureOfExpertsLSTMCell", "units", units)
        check_positive_int("MixtureOfExpertsLSTMCell", "num_experts", num_experts)
        self.units = units
        self.num_experts = num_experts
        self.dropout = min(1.0, max(0.0, float(dropout)))
        self.recurrent_dropout = min(1.0, max(0.0, float(recurrent_dropout)))
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.unit_forget_bias = unit_forget_bias
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed=seed)
        self.state_size = [num_experts * units, num_experts * units]
        self.output_size = num_experts * units

    def build(self, input_shape):
        input_dim = input_shape[-1]
        if input_dim is None:
            raise ValueError(
                "MixtureOfExpertsLSTMCell needs a known input size, got input shape "
                f"{input_shape}."
            )
        gate_size = NUM_GATES * self.units
        expert_kernels = blockwise_initializer(
            self.kernel_initializer, self.num_experts, (input_dim, gate_size)
        )

        def kernel_initializer(shape, dtype=None):
            # [T, n_x, 4 n_h] -> [n_x, T * 4 n_h], expert-major columns.
            blocks = expert_kernels((self.num_experts, input_dim, gate_size), dtype=dtype)
            return ops.reshape(ops.transpose(blocks, (1, 0, 2)), shape)

        self.kernel = self.add_weight(
            name="kernel",
            shape=(input_dim, self.num_experts * gate_size),
            initializer=kernel_initializer,
        )
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel",
            shape=(self.num_experts, self.units, gate_size),
            initializer=blockwise_initializer(
                self.recurrent_initializer, self.num_experts, (self.units, gate_size)
            ),
        )
        expert_bias = lstm_bias_initializer(
            self.bias_initializer, self.units, self.unit_forget_bias
        )
        self.bias = self.add_weight(
            name="bias",
            shape=(self.num_experts * gate_size,),
            initializer=lambda shape, dtype=None: ops.tile(
                expert_bias((gate_size,), dtype=dtype), (self.num_experts,)
            ),
        )

    def call(self, inputs, states, training=False):
        """One step of all experts: ``inputs [B, n_x]``, ``states [h, c]`` each
        ``[B, T * n_h]`` -> ``(h [B, T * n_h], [h, c])`` (eq. 8 with LSTM units)."""
        h_tm1, c_tm1 = states
        if training and 0.0 < self.dropout < 1.0:
            inputs = inputs * self.get_dropout_mask(inputs)
        h_in = h_tm1
        if training and 0.0 < self.recurrent_dropout < 1.0:
            h_in = h_tm1 * self.get_recurrent_dropout_mask(h_tm1)
        expert_shape = (-1, self.num_experts, self.units)
        z = ops.matmul(inputs, self.kernel) + self.bias  # [B, T * 4 n_h]
        z = ops.reshape(z, (-1, self.num_experts, NUM_GATES * self.units))
        z = z + grouped_matmul(ops.reshape(h_in, expert_shape), self.recurrent_kernel)
        z = ops.reshape(z, (-1, self.num_experts, NUM_GATES, self.units))
        h, c = lstm_update(*ops.unstack(z, NUM_GATES, axis=-2),
                            ops.reshape(c_tm1, expert_shape))
        flat_shape = (-1, self.num_experts * self.units)
        h = ops.reshape(h, flat_shape)
        return h, [h, ops.reshape(c, flat_shape)]

    def get_config(self):
        config = {
            "units": self.units,
            "num_experts": self.num_experts,
            "dropout": self.dropout,
            "recurrent_dropout": self.recurrent_dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "unit_forget_bias": self.unit_forget_bias,
            "seed": self.seed,
        }
        return {**super().get_config(), **config}


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class MixtureOfExpertsLSTM(keras.layers.RNN):
    """``keras.layers.RNN`` over a :class:`MixtureOfExpertsLSTMCell` (same arguments,
    weights, variable paths and outputs) whose loop under TensorFlow computes the input half
    ``x W + b`` of every expert's gates for all L steps in one product before the loop and
    runs :func:`layers.lstm_recurrence.recurrence` with
    :class:`layers.lstm_recurrence.ExpertProducts`: per step only ``h_{t-1}[k] U[k]``, and
    in the backward pass ``dz_t[k] U[k]^T`` with each ``U[k]^T`` materialised once and
    ``dU`` one batched product after the loop.

    ``keras.layers.RNN``'s own loop runs where TensorFlow does not, where TensorFlow sees a
    GPU, with ``unroll``, and with recurrent dropout in training. Input dropout is the
    cell's (one mask per sequence, drawn by ``keras.layers.RNN``), applied to x before the
    product.

    Shapes: ``x [B, L, n_x]`` -> as ``keras.layers.RNN`` (``[B, L, T n_h]`` with
    ``return_sequences``, plus ``h, c [B, T n_h]`` with ``return_state``)."""

    def __init__(self, cell, **kwargs):
        if not isinstance(cell, MixtureOfExpertsLSTMCell):
            raise ValueError(f"MixtureOfExpertsLSTM needs a MixtureOfExpertsLSTMCell, got "
                             f"{cell!r}.")
        super().__init__(cell, **kwargs)

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """``keras.layers.RNN.from_config`` on a copy of ``config`` (Keras's takes the cell
        out of the dict it is given)."""
        return super().from_config(dict(config), custom_objects)

    def inner_loop(self, sequences, initial_state, mask, training=False):
        """``sequences [B, L, n_x]``, ``initial_state [h0, c0]`` -> ``(last output, outputs,
        [h, c])`` as ``keras.src.backend.rnn`` returns them."""
        if not self._runs_tensorflow_recurrence(training):
            return super().inner_loop(sequences, initial_state, mask, training=training)
        from layers.lstm_recurrence import ExpertProducts, recurrence, rnn_results, \
            time_major_gates

        cell = self.cell
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        sequences = dropped_sequences(cell, sequences, training)
        gates, mask = time_major_gates(sequences, ops.convert_to_tensor(cell.kernel),
                                       ops.convert_to_tensor(cell.bias), mask,
                                       self.go_backwards)
        outputs, h, c = recurrence(
            ExpertProducts, gates, initial_state[0], initial_state[1],
            (ops.convert_to_tensor(cell.recurrent_kernel),), mask, self.zero_output_for_mask)
        return rnn_results(outputs, h, c, self.return_sequences)

    def _runs_tensorflow_recurrence(self, training) -> bool:
        """Whether the loop is :func:`layers.lstm_recurrence.recurrence` (class docstring)."""
        return runs_tensorflow_recurrence(self.cell, training, unroll=self.unroll)
