"""The topic-compositional LSTM recurrence under TensorFlow, with its backward pass written
out (TCNLM, Wang et al., AISTATS 2018, eq. 13-15).

:class:`layers.topic_lstm.TopicCompositionalLSTM` computes the input half of eq. 13-14,
``g_t = W_*a x~_* + b_*``, for all steps before the loop; per step the recurrence adds the
recurrent half (eq. 15 and the rest of eq. 13) with the topic factors ``r = U_b t
[B, 4 n_f]`` fixed per sequence:

* ``p_t = h_{t-1} U_c [B, 4 n_f]``, ``h~_t = p_t ⊙ r``,
* ``z_t[g] = g_t[g] + h~_t[g] U_a[g]`` for each gate ``g`` of i, f, c~, o (``h~_t[g]
  [B, n_f]``, ``U_a[g] [n_f, n_h]``), then the LSTM update of
  :func:`layers.lstm_gates.lstm_update`.

:func:`topic_lstm_recurrence` runs it with :func:`layers.lstm_recurrence.recurrence`, whose
reverse loop does per step only the element-wise gate gradients ``dz_t``, ``dh~_t[g] =
dz_t[g] U_a[g]^T`` and ``dh_{t-1} = (dh~_t ⊙ r) U_c^T + ...``, with ``U_a^T`` and ``U_c^T``
materialised once per call (TensorFlow's automatic gradient of a product inside a
``tf.while_loop`` multiplies by the transposed operand at every step, a product form oneDNN
runs up to 1.4x slower in float32 for the few rows of a batch, and computes the weights'
gradients as L small products summed). After the loop, with ``p`` and ``dh~`` kept per
step:

* ``dU_c = H_prev^T (dH~ ⊙ r)``, one ``[n_h, L B] x [L B, 4 n_f]`` product;
* ``dU_a[g] = H~[g]^T dZ[g]``, one batched ``[4, n_f, L B] x [4, L B, n_h]`` product;
* ``dr = sum_t p_t ⊙ dh~_t``, which reaches ``U_b`` and the topic vector through the
  automatic gradient of ``r = U_b t`` outside.

The gradient of ``g`` is ``dZ``, so ``W_a``, ``W_c``, ``W_b``, the bias and ``x`` get theirs
from the automatic gradient of the hoisted products.

The forward loop does the operations of the cell,
:class:`layers.topic_lstm.TopicCompositionalLSTMCell`, in its order, except that the
element-wise work runs in float32 under every policy (the products run in the dtype of the
weights, bfloat16 under ``mixed_bfloat16``). Masking follows ``keras.src.backend.rnn`` (a
masked step keeps the previous state and repeats the previous output). ``python -m
benchmarks.probe_lstm_recurrence --shapes apnews --contenders tc-keras,tc --reference
tc-keras`` times the layer's training step with this loop against ``keras.layers.RNN``'s.

Shapes (time-major): ``g [L, B, 4 n_h]``, ``h_0, c_0 [B, n_h]``, ``U_c [n_h, 4 n_f]``,
``U_a [4, n_f, n_h]``, ``r [B, 4 n_f]``, ``mask [L, B]`` -> outputs ``[L, B, n_h]``,
``h_L, c_L [B, n_h]``.
"""
from __future__ import annotations

import tensorflow as tf

from layers.lstm_gates import NUM_GATES
from layers.lstm_recurrence import product, product_over_steps, recurrence


class TopicProduct:
    """The recurrent half of eq. 13 and 15, ``U_a[g] (r ⊙ h_{t-1} U_c)[g]`` per gate, from
    ``recurrent_kernel U_c [n_h, 4 n_f]``, ``recurrent_factor_kernel U_a [4, n_f, n_h]`` and
    the topic factors ``r = U_b t [B, 4 n_f]`` (a recurrent half of
    :func:`layers.lstm_recurrence.recurrence`, as :class:`layers.lstm_recurrence.KernelProduct`
    describes). Keeps ``p_t = h_{t-1} U_c`` in the forward loop and ``dh~_t`` in the reverse
    one, each ``[B, 4 n_f]``."""

    kept = (1, 1)

    def __init__(self, recurrent_kernel, recurrent_factor_kernel, factors):
        self.kernel, self.factor_kernel, self.factors = (recurrent_kernel,
                                                         recurrent_factor_kernel, factors)
        self.r = tf.cast(factors, tf.float32)

    def step(self, gates, h):
        """``z_t[g] = g_t[g] + h~_t[g] U_a[g]`` (eq. 13, 15): ``gates [B, 4 n_h]``, ``h
        [B, n_h]`` -> the four gates' ``z_t``, each ``[B, n_h]``, and ``(p_t,)``."""
        p = product(h, self.kernel)
        num_factors = self.factor_kernel.shape[1]
        h_tilde = tf.transpose(tf.reshape(p * self.r, (-1, NUM_GATES, num_factors)), (1, 0, 2))
        recurrent = tf.unstack(product(h_tilde, self.factor_kernel), NUM_GATES)
        return [g + u for g, u in zip(tf.split(gates, NUM_GATES, axis=1), recurrent)], (p,)

    def transposed(self):
        """``(U_a[g]^T [n_h, n_f] for each gate, U_c^T [4 n_f, n_h])``."""
        return (tf.unstack(tf.transpose(self.factor_kernel, (0, 2, 1)), NUM_GATES),
                tf.transpose(self.kernel))

    def step_gradient(self, dz, transposed):
        """From the four gates' ``dz_t [B, n_h]``: ``(dz_t [B, 4 n_h], (dh~_t ⊙ r) U_c^T
        [B, n_h], (dh~_t,))`` with ``dh~_t[g] = dz_t[g] U_a[g]^T``."""
        factor_kernels_t, kernel_t = transposed
        d_tilde = tf.concat([product(d, k) for d, k in zip(dz, factor_kernels_t)], axis=1)
        return tf.concat(dz, axis=1), product(d_tilde * self.r, kernel_t), (d_tilde,)

    def weight_gradients(self, h_prev, dz, kept_forward, kept_backward):
        """``(dU_c, dU_a, dr)`` (module docstring) from ``h_prev [L, B, n_h]``, ``dz
        [L, B, 4 n_h]``, ``p`` and ``dh~`` ``[L, B, 4 n_f]``."""
        (p,), (d_tilde,) = kept_forward, kept_backward
        d_kernel = product_over_steps(h_prev, d_tilde * self.r, self.kernel.dtype)
        num_factors, units = self.factor_kernel.shape[1:]
        dtype = self.factor_kernel.dtype
        d_factor_kernel = tf.matmul(_gate_major(p * self.r, num_factors, dtype),
                                    _gate_major(dz, units, dtype), transpose_a=True)
        d_factors = tf.reduce_sum(p * d_tilde, axis=0)
        return d_kernel, d_factor_kernel, tf.cast(d_factors, self.factors.dtype)


def _gate_major(tensor, size, dtype):
    """``tensor [L, B, 4 size]`` as ``[4, L B, size]`` in ``dtype``."""
    tensor = tf.reshape(tf.cast(tensor, dtype), (-1, NUM_GATES, size))
    return tf.transpose(tensor, (1, 0, 2))


def topic_lstm_recurrence(gates, h0, c0, recurrent_kernel, recurrent_factor_kernel, factors,
                          mask=None):
    """The topic-compositional LSTM over ``gates [L, B, 4 n_h]`` (the input half of eq. 13,
    time-major) from ``h0, c0 [B, n_h]``, with ``recurrent_kernel U_c [n_h, 4 n_f]``,
    ``recurrent_factor_kernel U_a [4, n_f, n_h]`` and the topic factors ``factors = U_b t
    [B, 4 n_f]``; ``mask [L, B]`` (bool) or ``None``.

    Returns ``(outputs [L, B, n_h], h_L [B, n_h], c_L [B, n_h])`` in the dtype of
    ``gates``, with the gradient of the module docstring for ``gates``, ``h0``, ``c0``,
    ``U_c``, ``U_a`` and ``factors``."""
    return recurrence(TopicProduct, gates, h0, c0,
                      (recurrent_kernel, recurrent_factor_kernel, factors), mask)
