"""``keras.layers.LSTM`` with the input half of its gates computed before the recurrence.

An LSTM's gate pre-activations are ``z_t = x_t W + b + h_{t-1} U`` (Hochreiter and
Schmidhuber 1997; the gates i, f, c~, o of ``keras.layers.LSTMCell``). ``x_t W + b`` does not
depend on the recurrence, so :class:`HoistedLSTM` computes it for all L steps in one
``[B L, n_x] x [n_x, 4 n_h]`` product before the loop, and the loop does only ``h_{t-1} U``
and the gate update, as :class:`layers.topic_lstm.TopicCompositionalLSTM` does for its
input half. ``keras.layers.LSTM`` on a CPU runs the whole cell at every step.

The multiply-adds are the same. Under TensorFlow the loop is
:func:`layers.lstm_recurrence.lstm_recurrence`, whose backward pass is written out (per step
only the gate gradients and ``dz_t U^T`` with ``U^T`` materialised once; ``dU``, ``dW``,
``db`` and ``dx`` one large product each after the loop). On this project's 2-core CPU
(``python -m benchmarks.probe_lstm_recurrence``, forward + backward, no other job;
``results/benchmarks/speed/probe-lstm-recurrence.txt``) its training step takes 1.02x /
0.67x the time of ``torch.nn.LSTM`` at the People's Daily shape (B 20, L 35, 650 -> 650) in
float32 / bf16 and 0.95x / 0.89x at the APNEWS shape (B 64, L 30, 300 -> 600) at 1 thread
(1.02x / 0.78x and 0.98x / 0.97x at 2), against ``keras.layers.LSTM``'s 2.16x / 1.51x and
1.22x / 1.22x. Under the other backends the
loop is ``keras.src.backend.rnn`` over the hoisted ``x W + b``, which pays off under a
reduced precision (the one large bf16 product uses the CPU's bf16 units well, L small ones
do not) and not in float32.

Everything else is ``keras.layers.LSTM``'s: the same weights under the same names (``cell``
is its ``LSTMCell``, so checkpoints of either load into the other), the same arguments,
masking, initial and returned states, ``go_backwards``, ``unroll`` and input dropout (one
mask per sequence, as ``LSTMCell`` draws it, applied to x before the product).

``hoist``: ``"auto"`` (the default) hoists where the TensorFlow recurrence runs (under
TensorFlow with ``LSTMCell``'s default activations and without ``unroll``), and elsewhere
under a reduced-precision compute dtype only; ``True`` always hoists, ``False`` never.
Whatever it says, the layer runs ``keras.layers.LSTM``'s own loop where that loop differs:
with ``recurrent_dropout`` (for which ``LSTMCell`` switches to its per-gate
``implementation=1``, four masks for x and four for h), with ``implementation=1``, and
where TensorFlow sees a GPU or ``use_cudnn=True`` (its loop then uses cuDNN where it can).

Shapes: ``x [B, L, n_x]`` -> as ``keras.layers.LSTM`` (``[B, L, n_h]`` with
``return_sequences``, plus ``h, c [B, n_h]`` with ``return_state``).
"""
from __future__ import annotations

import keras
from keras import ops

from layers.lstm_gates import dropped_sequences


def tensorflow_sees_a_gpu() -> bool:
    """Whether Keras runs TensorFlow and TensorFlow sees a GPU."""
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU"))


def runs_tensorflow_recurrence(cell, training=None, *, unroll=False, on_a_gpu=False,
                               activations=None) -> bool:
    """Whether a recurrent layer over ``cell`` runs a loop of :mod:`layers.lstm_recurrence`
    rather than ``keras.layers.RNN``'s: under TensorFlow, without ``unroll``, where
    TensorFlow sees no GPU (``on_a_gpu``: also where it does, for a layer that decides about
    the GPU itself), with the loop's ``tanh`` and ``sigmoid`` as ``activations`` (the cell's
    ``(activation, recurrent_activation)``; ``None`` for a cell with no others), and without
    recurrent dropout in training (``keras.layers.RNN`` runs the cell there)."""
    return (keras.backend.backend() == "tensorflow" and not unroll
            and (on_a_gpu or not tensorflow_sees_a_gpu())
            and activations in (None, (keras.activations.tanh, keras.activations.sigmoid))
            and not (training and 0.0 < cell.recurrent_dropout < 1.0))


@keras.saving.register_keras_serializable(package="tcnlm_tf")
class HoistedLSTM(keras.layers.LSTM):
    """``keras.layers.LSTM`` whose ``x W + b`` is one product over all steps before the
    recurrence (see the module docstring); same arguments, weights and outputs, plus
    ``hoist`` (``"auto"``, ``True`` or ``False``)."""

    def __init__(self, units, hoist: str | bool = "auto", **kwargs):
        if hoist not in ("auto", True, False):
            raise ValueError(f"HoistedLSTM hoist must be 'auto', True or False, got {hoist!r}.")
        super().__init__(units, **kwargs)
        self.hoist = hoist

    def _hoists(self) -> bool:
        cell = self.cell
        if cell.implementation != 2 or self.use_cudnn is True or (
                self.use_cudnn == "auto" and tensorflow_sees_a_gpu()):
            return False
        if self.hoist != "auto":
            return self.hoist
        return self._runs_tensorflow_recurrence() or self.compute_dtype != "float32"

    def inner_loop(self, sequences, initial_state, mask, training=False):
        """``sequences [B, L, n_x]``, ``initial_state [h0, c0]`` -> ``(last output, outputs,
        [h, c])`` as ``keras.src.backend.rnn`` returns them."""
        if not self._hoists():
            return super().inner_loop(sequences, initial_state, mask, training=training)
        cell = self.cell
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        sequences = dropped_sequences(cell, sequences, training)
        if self._runs_tensorflow_recurrence():
            return self._tensorflow_loop(sequences, initial_state, mask)
        gates = ops.matmul(sequences, cell.kernel)                   # [B, L, 4 n_h]
        if cell.use_bias:
            gates = gates + cell.bias
        recurrent_kernel = ops.convert_to_tensor(cell.recurrent_kernel)

        def step(inputs, states):
            h_tm1, c_tm1 = states
            i, f, candidate, o = ops.split(inputs + ops.matmul(h_tm1, recurrent_kernel), 4,
                                           axis=-1)
            c = (cell.recurrent_activation(f) * c_tm1
                 + cell.recurrent_activation(i) * cell.activation(candidate))
            h = cell.recurrent_activation(o) * cell.activation(c)
            return h, [h, c]

        return keras.src.backend.rnn(
            step, gates, list(initial_state), go_backwards=self.go_backwards, mask=mask,
            unroll=self.unroll, input_length=sequences.shape[1],
            zero_output_for_mask=self.zero_output_for_mask,
            return_all_outputs=self.return_sequences)

    def _runs_tensorflow_recurrence(self) -> bool:
        """Whether the hoisted loop is :func:`layers.lstm_recurrence.lstm_recurrence`: under
        TensorFlow, with LSTMCell's default activations and without ``unroll`` (:meth:`_hoists`
        has seen to the GPU, and ``LSTMCell`` has no recurrent dropout where it hoists)."""
        return runs_tensorflow_recurrence(
            self.cell, unroll=self.unroll, on_a_gpu=True,
            activations=(self.cell.activation, self.cell.recurrent_activation))

    def _tensorflow_loop(self, sequences, initial_state, mask):
        """The hoisted layer under TensorFlow: ``x W + b`` for all steps time-major, then
        :func:`layers.lstm_recurrence.lstm_recurrence` (masking and ``go_backwards`` as
        ``keras.src.backend.rnn``: outputs in the order the steps ran)."""
        from layers.lstm_recurrence import lstm_recurrence, rnn_results, time_major_gates

        cell = self.cell
        gates, mask = time_major_gates(
            sequences, ops.convert_to_tensor(cell.kernel),
            ops.convert_to_tensor(cell.bias) if cell.use_bias else None, mask,
            self.go_backwards)
        outputs, h, c = lstm_recurrence(
            gates, initial_state[0], initial_state[1],
            ops.convert_to_tensor(cell.recurrent_kernel), mask, self.zero_output_for_mask)
        return rnn_results(outputs, h, c, self.return_sequences)

    def get_config(self):
        return {**super().get_config(), "hoist": self.hoist}
