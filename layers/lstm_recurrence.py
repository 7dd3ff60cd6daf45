"""The LSTM recurrence under TensorFlow, with its backward pass written out.

The recurrence of ``keras.layers.LSTMCell`` (Hochreiter and Schmidhuber 1997; gates i, f,
c~, o in keras order) from the hoisted input half ``g_t = x_t W + b``:

* ``z_t = g_t + h_{t-1} U``, ``[i, f, c~, o] = [sigmoid, sigmoid, tanh, sigmoid](z_t)``,
* ``c_t = f * c_{t-1} + i * c~``, ``h_t = o * tanh(c_t)``.

:func:`lstm_recurrence` runs it in a ``tf.while_loop`` that keeps the gate activations and
``tanh(c_t)`` of every step, and its gradient runs a reverse loop that does per step only
the element-wise gate gradients ``dz_t`` and ``dh_{t-1} = dz_t U^T + ...``, with ``U^T``
materialised once per call as an ordinary ``[4 n, n]`` matrix (TensorFlow's automatic
gradient of ``h_{t-1} U`` multiplies by the transposed ``U`` at every step, a product form
oneDNN runs 1.4-1.7x slower for the few rows of a batch on this project's CPU), and then
``dU = H_{prev}^T dZ`` as one ``[n, L B] x [L B, 4 n]`` product after the loop instead of L
accumulated ones.
The gradient of ``g`` is ``dZ`` itself, so ``dW``, ``db`` and ``dx`` come from the hoisted
product's own gradient, also one large product each.

:func:`recurrence` is the same pair of loops for any recurrent half of ``z_t`` (an object
like :class:`KernelProduct`, ``h_{t-1} U`` here): :class:`ExpertProducts` is that of ``K``
independent LSTMs with a block-diagonal ``U`` (for
:class:`layers.mixture_of_experts.MixtureOfExpertsLSTM`), and
:mod:`layers.topic_lstm_recurrence` has the topic-compositional ``U_a (r ⊙ h_{t-1} U_c)``.
:func:`time_major_gates` and :func:`rnn_results` are the hoisted input half before the loop
and the results after it of the Keras layers that run these loops.

Element-wise work runs in float32; the products ``h_{t-1} U`` and ``dz_t U^T`` and ``dU``
run in the dtype of ``U`` (bfloat16 under ``mixed_bfloat16``), with ``g`` and the results
cast once outside the loops, the step's operand and result once per step.

Masking follows ``keras.src.backend.rnn``: at a masked step the state ``(h, c)`` is the
previous one and the output is the previous output (zeros before the first unmasked step)
or, with ``zero_output_for_mask``, zeros.

Shapes (time-major): ``g [L, B, 4 n]``, ``h_0, c_0 [B, n]``, ``U [n, 4 n]``, ``mask [L, B]``
-> outputs ``[L, B, n]``, ``h_L, c_L [B, n]``.
"""
from __future__ import annotations

import tensorflow as tf

from layers.lstm_gates import grouped_matmul


class KernelProduct:
    """The recurrent half ``h_{t-1} U`` of the plain LSTM, ``U [n, 4 n]`` (the weights
    :func:`recurrence` is given).

    What :func:`recurrence` asks of a recurrent half, made from the weights (tensors):

    * ``kept``: how many ``[B, ...]`` float32 tensors :meth:`step` and :meth:`step_gradient`
      keep per step for :meth:`weight_gradients`;
    * :meth:`step`: ``(g_t [B, 4 n], h_{t-1} [B, n])`` -> the four gates' ``z_t``, each
      ``[B, n]``, and the tensors it keeps;
    * :meth:`transposed`: the operands of :meth:`step_gradient`, made once per gradient;
    * :meth:`step_gradient`: the four gates' ``dz_t`` -> ``dz_t`` in the layout of ``g``, the
      recurrent part of ``dh_{t-1}`` and the tensors it keeps;
    * :meth:`weight_gradients`: the gradients of the weights after the loop.
    """

    kept = (0, 0)

    def __init__(self, recurrent_kernel):
        self.kernel = recurrent_kernel

    def step(self, gates, h):
        """``z_t = g_t + h_{t-1} U``, split into the four gates; nothing kept."""
        return tf.split(gates + product(h, self.kernel), 4, axis=1), ()

    def transposed(self):
        """``U^T [4 n, n]``."""
        return tf.transpose(self.kernel)

    def step_gradient(self, dz, kernel_t):
        """``dz_t [B, 4 n]`` and ``dz_t U^T [B, n]``; nothing kept."""
        dz = tf.concat(dz, axis=1)
        return dz, product(dz, kernel_t), ()

    def weight_gradients(self, h_prev, dz, kept_forward, kept_backward):
        """``(dU,)``: ``H_prev^T dZ``, one ``[n, L B] x [L B, 4 n]`` product in the dtype of
        ``U``, from ``h_prev [L, B, n]`` and ``dz [L, B, 4 n]``."""
        del kept_forward, kept_backward
        return (product_over_steps(h_prev, dz, self.kernel.dtype),)


class ExpertProducts:
    """The recurrent half of ``K`` independent LSTMs run as one (the experts of
    :class:`layers.mixture_of_experts.MixtureOfExpertsLSTMCell`): ``h_{t-1}[k] U[k]`` for
    each expert ``k``, ``recurrent_kernel U [K, n, 4 n]`` (a block-diagonal recurrent
    matrix), states ``[B, K n]`` and gates ``[B, K 4 n]`` expert-major (expert ``k``'s
    gates i, f, c~, o in ``[4 n k, 4 n (k + 1))``); a recurrent half as
    :class:`KernelProduct` describes. Nothing kept."""

    kept = (0, 0)

    def __init__(self, recurrent_kernel):
        self.kernel = recurrent_kernel
        self.experts, self.units = recurrent_kernel.shape[:2]

    def step(self, gates, h):
        """``z_t[k] = g_t[k] + h_{t-1}[k] U[k]``, as the four gates' ``[B, K n]``."""
        expert_shape = (-1, self.experts, self.units)
        recurrent = grouped_matmul(tf.cast(tf.reshape(h, expert_shape), self.kernel.dtype),
                                   self.kernel)
        recurrent = tf.cast(recurrent, tf.float32)                       # [B, K, 4 n]
        z = tf.reshape(tf.reshape(gates, (-1, self.experts, 4 * self.units)) + recurrent,
                       (-1, self.experts, 4, self.units))
        return [tf.reshape(g, (-1, self.experts * self.units)) for g in tf.unstack(z, 4, 2)], ()

    def transposed(self):
        """``U[k]^T`` for each expert, ``[K, 4 n, n]``."""
        return tf.transpose(self.kernel, (0, 2, 1))

    def step_gradient(self, dz, kernel_t):
        """``dz_t [B, K 4 n]`` and ``dz_t[k] U[k]^T`` for each expert, ``[B, K n]``."""
        dz = tf.stack([tf.reshape(d, (-1, self.experts, self.units)) for d in dz], axis=2)
        dz = tf.reshape(dz, (-1, self.experts, 4 * self.units))          # [B, K, 4 n]
        dh = product(tf.transpose(dz, (1, 0, 2)), kernel_t)              # [K, B, n]
        return (tf.reshape(dz, (-1, self.experts * 4 * self.units)),
                tf.reshape(tf.transpose(dh, (1, 0, 2)), (-1, self.experts * self.units)), ())

    def weight_gradients(self, h_prev, dz, kept_forward, kept_backward):
        """``(dU,)``: ``H_prev[k]^T dZ[k]`` for each expert, one batched ``[K, n, L B] x
        [K, L B, 4 n]`` product in the dtype of ``U``."""
        del kept_forward, kept_backward

        def expert_major(tensor, size):
            tensor = tf.reshape(tf.cast(tensor, self.kernel.dtype), (-1, self.experts, size))
            return tf.transpose(tensor, (1, 0, 2))

        return (tf.matmul(expert_major(h_prev, self.units), expert_major(dz, 4 * self.units),
                          transpose_a=True),)


def lstm_recurrence(gates, h0, c0, recurrent_kernel, mask=None, zero_output_for_mask=False):
    """The LSTM over ``gates = x W + b [L, B, 4 n]`` (time-major) from ``h0, c0 [B, n]``
    with ``recurrent_kernel U [n, 4 n]``; ``mask [L, B]`` (bool) or ``None``.

    Returns ``(outputs [L, B, n], h_L [B, n], c_L [B, n])`` in the dtype of ``gates``, with
    the gradient of the module docstring for ``gates``, ``h0``, ``c0`` and ``U``."""
    return recurrence(KernelProduct, gates, h0, c0, (recurrent_kernel,), mask,
                      zero_output_for_mask)


def time_major_gates(sequences, kernel, bias, mask, go_backwards):
    """The input half ``x W + b`` of a layer's gates for all steps in one product, and its
    mask, time-major in the order the steps run: ``sequences [B, L, n_x]``, ``kernel
    [n_x, m]``, ``bias [m]`` or ``None``, ``mask [B, L]`` or ``None`` -> ``(gates [L, B, m],
    mask [L, B] or None)``, both reversed in time with ``go_backwards`` (as
    ``keras.src.backend.rnn`` runs them)."""
    x = tf.transpose(sequences, (1, 0, 2))                          # [L, B, n_x]
    if mask is not None:
        mask = tf.transpose(mask, (1, 0))                            # [L, B]
    if go_backwards:
        x = tf.reverse(x, (0,))
        mask = None if mask is None else tf.reverse(mask, (0,))
    steps, batch = tf.shape(x)[0], tf.shape(x)[1]
    gates = tf.matmul(tf.reshape(x, (steps * batch, x.shape[-1])), kernel)    # [L B, m]
    if bias is not None:
        gates = tf.nn.bias_add(gates, bias)
    return tf.reshape(gates, (steps, batch, gates.shape[-1])), mask


def rnn_results(outputs, h, c, return_sequences):
    """``(last output, outputs, [h, c])`` as ``keras.src.backend.rnn`` returns them, from
    the time-major ``outputs [L, B, n]``: outputs ``[B, L, n]`` with ``return_sequences``,
    else the last one ``[B, 1, n]``."""
    last = outputs[-1]
    outputs = tf.transpose(outputs, (1, 0, 2)) if return_sequences else last[:, None]
    return last, outputs, [h, c]


def recurrence(recurrent, gates, h0, c0, weights, mask=None, zero_output_for_mask=False):
    """The LSTM over the input half ``gates [L, B, 4 n]`` (time-major) from ``h0, c0
    [B, n]``, with the recurrent half ``recurrent(*weights)`` (see :class:`KernelProduct`);
    ``mask [L, B]`` (bool) or ``None``.

    Returns ``(outputs [L, B, n], h_L [B, n], c_L [B, n])`` in the dtype of ``gates``, with
    the gradient of the module docstring for ``gates``, ``h0``, ``c0`` and every weight."""
    time_mask = None if mask is None else tf.expand_dims(tf.cast(mask, tf.bool), -1)

    @tf.custom_gradient
    def run(gates, h0, c0, *weights):
        half = recurrent(*weights)
        saved, h_prev, kept, outputs, h, c = _forward(half, gates, h0, c0, time_mask,
                                                      zero_output_for_mask)

        def gradient(d_outputs, d_h, d_c):
            return _backward(half, saved, h_prev, kept, (gates, h0, c0), time_mask,
                             zero_output_for_mask, d_outputs, d_h, d_c)

        dtype = gates.dtype
        return (tf.cast(outputs, dtype), tf.cast(h, dtype), tf.cast(c, dtype)), gradient

    return run(*(tf.convert_to_tensor(a) for a in (gates, h0, c0, *weights)))


def _unstacked(tensor):
    """A TensorArray of the steps of ``tensor [L, ...]`` in float32."""
    tensor = tf.cast(tensor, tf.float32)
    return tf.TensorArray(tf.float32, size=tf.shape(tensor)[0]).unstack(tensor)


def _arrays(length, count):
    """``count`` empty float32 TensorArrays of ``length`` steps."""
    return tuple(tf.TensorArray(tf.float32, size=length) for _ in range(count))


def product(a, b):
    """``a b`` in the dtype of ``b`` (``a`` float32), returned in float32."""
    return tf.cast(tf.matmul(tf.cast(a, b.dtype), b), tf.float32)


def product_over_steps(a, b, dtype):
    """``A^T B`` over all steps: ``a [L, B, m]``, ``b [L, B, k]`` -> ``[m, k]``, one product
    in ``dtype``."""
    return tf.matmul(tf.cast(tf.reshape(a, (-1, tf.shape(a)[-1])), dtype),
                     tf.cast(tf.reshape(b, (-1, tf.shape(b)[-1])), dtype), transpose_a=True)


def _cell(z, c_tm1):
    """One step's gates from the four gates' ``z`` and ``c_{t-1}``, each ``[B, n]``: returns
    ``(i, f, c~, o, tanh(c_t), c_t, h_t)``, each ``[B, n]``."""
    zi, zf, zc, zo = z
    i, f, candidate, o = tf.sigmoid(zi), tf.sigmoid(zf), tf.tanh(zc), tf.sigmoid(zo)
    c = f * c_tm1 + i * candidate
    tanh_c = tf.tanh(c)
    return i, f, candidate, o, tanh_c, c, o * tanh_c


def _forward(half, gates, h0, c0, mask, zero_output_for_mask):
    """The forward loop. Returns ``(saved, h_prev, kept, outputs, h_L, c_L)`` in float32:
    ``saved``, the steps' activations ``i, f, c~, o`` and ``tanh(c_t)`` (unmasked values)
    and ``c_{t-1}`` (after masking); ``h_prev`` the states ``h_{t-1}`` (after masking) and
    the ``outputs``, each ``[L, B, n]``; ``kept`` what ``half.step`` keeps, each
    ``[L, B, ...]``. All are tensors, not TensorArrays: the gradient function captures them,
    and a SavedModel can hold a function that captures a tensor but not one that captures a
    TensorArray's list."""
    length = tf.shape(gates)[0]
    gate_steps = _unstacked(gates)
    mask_steps = None if mask is None else tf.TensorArray(tf.bool, size=length).unstack(mask)

    def body(t, h, c, y, outputs, saved, kept):
        z, kept_t = half.step(gate_steps.read(t), h)
        i, f, candidate, o, tanh_c, c_new, h_new = _cell(z, c)
        values = (i, f, candidate, o, tanh_c, c, h)      # h_{t-1} kept under a mask only
        if mask_steps is None:
            y = h_new
        else:
            m = mask_steps.read(t)
            y = tf.where(m, h_new, tf.zeros_like(y) if zero_output_for_mask else y)
            h_new, c_new = tf.where(m, h_new, h), tf.where(m, c_new, c)
        saved = tuple(a.write(t, v) for a, v in zip(saved, values))
        kept = tuple(a.write(t, v) for a, v in zip(kept, kept_t))
        return t + 1, h_new, c_new, y, outputs.write(t, y), saved, kept

    h0, c0 = tf.cast(h0, tf.float32), tf.cast(c0, tf.float32)
    (outputs,), saved = _arrays(length, 1), _arrays(length, 6 if mask is None else 7)
    _, h, c, _, outputs, saved, kept = tf.while_loop(
        lambda t, *_: t < length, body,
        (0, h0, c0, tf.zeros_like(h0), outputs, saved, _arrays(length, half.kept[0])))
    outputs, saved = outputs.stack(), tuple(a.stack() for a in saved)
    kept = tuple(a.stack() for a in kept)
    if mask is None:        # the states are the outputs
        return saved, tf.concat([h0[None], outputs[:-1]], axis=0), kept, outputs, h, c
    return saved[:6], saved[6], kept, outputs, h, c


def _zeros_for_none(gradient, like):
    """``gradient`` in float32, zeros shaped like ``like`` where it is ``None``."""
    if gradient is None:
        return tf.zeros(tf.shape(like), tf.float32)
    return tf.cast(gradient, tf.float32)


def _cell_gradient(dh, dc, i, f, candidate, o, tanh_c, c_tm1):
    """Gradients of one step, each ``[B, n]``: from ``dh_t`` and ``dc_t`` (the gradient
    reaching ``c_t`` other than through ``h_t``) to ``(dz_t, dc_{t-1})``, ``dz_t`` the four
    gates': ``dc = dc_t + dh_t o (1 - tanh^2 c_t)``, ``dz_t = [dc c~ i (1 - i),
    dc c_{t-1} f (1 - f), dc i (1 - c~^2), dh_t tanh(c_t) o (1 - o)]``,
    ``dc_{t-1} = dc f`` (the recurrent half's part of ``dh_{t-1}`` is the caller's)."""
    sigmoid_grad, tanh_grad = tf.raw_ops.SigmoidGrad, tf.raw_ops.TanhGrad
    dc = dc + tanh_grad(y=tanh_c, dy=dh * o)
    dz = (sigmoid_grad(y=i, dy=dc * candidate), sigmoid_grad(y=f, dy=dc * c_tm1),
          tanh_grad(y=candidate, dy=dc * i), sigmoid_grad(y=o, dy=dh * tanh_c))
    return dz, dc * f


def _backward(half, saved, h_prev, kept, inputs, mask, zero_output_for_mask, d_outputs, d_h,
              d_c):
    """The reverse loop: the gradients of ``(gates, h0, c0)`` (``inputs``) and of the
    weights of ``half`` from those of the outputs and of ``h_L, c_L`` (``None``: zeros);
    ``saved``, ``h_prev`` and ``kept`` as :func:`_forward` returns them."""
    gates, h0, c0 = inputs
    saved = tuple(_unstacked(a) for a in saved)
    dy_steps = _unstacked(_zeros_for_none(d_outputs, h_prev))
    length = tf.shape(gates)[0]
    operands = half.transposed()
    if mask is None:
        def step(t, dh, dc, dy_carried):
            dz, dc_tm1 = _cell_gradient(dh + dy_steps.read(t), dc, *(a.read(t) for a in saved))
            dz, dh_tm1, kept_t = half.step_gradient(dz, operands)
            return dz, dh_tm1, dc_tm1, dy_carried, kept_t
    else:
        step = _masked_step(half, operands, saved, dy_steps,
                            tf.TensorArray(tf.bool, size=length).unstack(mask),
                            zero_output_for_mask)

    def body(t, dh, dc, dy_carried, dz_steps, kept):
        dz, dh, dc, dy_carried, kept_t = step(t, dh, dc, dy_carried)
        kept = tuple(a.write(t, v) for a, v in zip(kept, kept_t))
        return t - 1, dh, dc, dy_carried, dz_steps.write(t, dz), kept

    (dz_steps,) = _arrays(length, 1)
    _, dh0, dc0, _, dz_steps, kept_backward = tf.while_loop(
        lambda t, *_: t >= 0, body,
        (length - 1, _zeros_for_none(d_h, h0), _zeros_for_none(d_c, c0),
         tf.zeros(tf.shape(h0), tf.float32), dz_steps, _arrays(length, half.kept[1])))
    dz = dz_steps.stack()                                            # [L, B, 4 n]
    weight_gradients = half.weight_gradients(h_prev, dz, kept,
                                             tuple(a.stack() for a in kept_backward))
    return (tf.cast(dz, gates.dtype), tf.cast(dh0, h0.dtype), tf.cast(dc0, c0.dtype),
            *weight_gradients)


def _masked_step(half, operands, saved, dy_steps, mask_steps, zero_output_for_mask):
    """The reverse step under a mask: a masked step passes ``dh, dc`` (and, unless
    ``zero_output_for_mask``, the output's gradient) on to step ``t - 1`` unchanged and
    has ``dz_t = 0``."""
    def step(t, dh, dc, dy_carried):
        m, dy = mask_steps.read(t), dy_steps.read(t) + dy_carried
        dz, dc_tm1 = _cell_gradient(tf.where(m, dh + dy, 0.0), tf.where(m, dc, 0.0),
                                    *(a.read(t) for a in saved))
        dz, dh_tm1, kept_t = half.step_gradient(dz, operands)
        dy_carried = tf.zeros_like(dy) if zero_output_for_mask else tf.where(m, 0.0, dy)
        return (dz, tf.where(m, 0.0, dh) + dh_tm1, tf.where(m, 0.0, dc) + dc_tm1, dy_carried,
                kept_t)

    return step
