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


def lstm_recurrence(gates, h0, c0, recurrent_kernel, mask=None, zero_output_for_mask=False):
    """The LSTM over ``gates = x W + b [L, B, 4 n]`` (time-major) from ``h0, c0 [B, n]``
    with ``recurrent_kernel U [n, 4 n]``; ``mask [L, B]`` (bool) or ``None``.

    Returns ``(outputs [L, B, n], h_L [B, n], c_L [B, n])`` in the dtype of ``gates``, with
    the gradient of the module docstring for ``gates``, ``h0``, ``c0`` and ``U``."""
    time_mask = None if mask is None else tf.expand_dims(tf.cast(mask, tf.bool), -1)

    @tf.custom_gradient
    def run(gates, h0, c0, recurrent_kernel):
        saved, h_prev, outputs, h, c = _forward(gates, h0, c0, recurrent_kernel, time_mask,
                                                zero_output_for_mask)

        def gradient(d_outputs, d_h, d_c):
            return _backward(saved, h_prev, (gates, h0, c0, recurrent_kernel), time_mask,
                             zero_output_for_mask, d_outputs, d_h, d_c)

        dtype = gates.dtype
        return (tf.cast(outputs, dtype), tf.cast(h, dtype), tf.cast(c, dtype)), gradient

    return run(*(tf.convert_to_tensor(a) for a in (gates, h0, c0, recurrent_kernel)))


def _unstacked(tensor):
    """A TensorArray of the steps of ``tensor [L, ...]`` in float32."""
    tensor = tf.cast(tensor, tf.float32)
    return tf.TensorArray(tf.float32, size=tf.shape(tensor)[0]).unstack(tensor)


def _arrays(length, count):
    """``count`` empty float32 TensorArrays of ``length`` steps."""
    return tuple(tf.TensorArray(tf.float32, size=length) for _ in range(count))


def _product(a, b):
    """``a b`` in the dtype of ``b`` (``a`` float32), returned in float32."""
    return tf.cast(tf.matmul(tf.cast(a, b.dtype), b), tf.float32)


def _cell(z, c_tm1):
    """One step's gates from ``z [B, 4 n]`` and ``c_{t-1} [B, n]``: returns ``(i, f, c~, o,
    tanh(c_t), c_t, h_t)``, each ``[B, n]``."""
    zi, zf, zc, zo = tf.split(z, 4, axis=1)
    i, f, candidate, o = tf.sigmoid(zi), tf.sigmoid(zf), tf.tanh(zc), tf.sigmoid(zo)
    c = f * c_tm1 + i * candidate
    tanh_c = tf.tanh(c)
    return i, f, candidate, o, tanh_c, c, o * tanh_c


def _forward(gates, h0, c0, recurrent_kernel, mask, zero_output_for_mask):
    """The forward loop. Returns ``(saved, h_prev, outputs, h_L, c_L)`` in float32:
    ``saved``, the steps' activations ``i, f, c~, o`` and ``tanh(c_t)`` (unmasked values)
    and ``c_{t-1}`` (after masking); ``h_prev`` the states ``h_{t-1}`` (after masking) and
    the ``outputs``, each ``[L, B, n]``. All are tensors, not TensorArrays: the gradient
    function captures them, and a SavedModel can hold a function that captures a tensor
    but not one that captures a TensorArray's list."""
    length = tf.shape(gates)[0]
    gate_steps = _unstacked(gates)
    mask_steps = None if mask is None else tf.TensorArray(tf.bool, size=length).unstack(mask)

    def body(t, h, c, y, outputs, saved):
        i, f, candidate, o, tanh_c, c_new, h_new = _cell(
            gate_steps.read(t) + _product(h, recurrent_kernel), c)
        values = (i, f, candidate, o, tanh_c, c, h)      # h_{t-1} kept under a mask only
        if mask_steps is None:
            y = h_new
        else:
            m = mask_steps.read(t)
            y = tf.where(m, h_new, tf.zeros_like(y) if zero_output_for_mask else y)
            h_new, c_new = tf.where(m, h_new, h), tf.where(m, c_new, c)
        saved = tuple(a.write(t, v) for a, v in zip(saved, values))
        return t + 1, h_new, c_new, y, outputs.write(t, y), saved

    h0, c0 = tf.cast(h0, tf.float32), tf.cast(c0, tf.float32)
    (outputs,), saved = _arrays(length, 1), _arrays(length, 6 if mask is None else 7)
    _, h, c, _, outputs, saved = tf.while_loop(
        lambda t, *_: t < length, body, (0, h0, c0, tf.zeros_like(h0), outputs, saved))
    outputs, saved = outputs.stack(), tuple(a.stack() for a in saved)
    if mask is None:        # the states are the outputs
        return saved, tf.concat([h0[None], outputs[:-1]], axis=0), outputs, h, c
    return saved[:6], saved[6], outputs, h, c


def _zeros_for_none(gradient, like):
    """``gradient`` in float32, zeros shaped like ``like`` where it is ``None``."""
    if gradient is None:
        return tf.zeros(tf.shape(like), tf.float32)
    return tf.cast(gradient, tf.float32)


def _cell_gradient(dh, dc, i, f, candidate, o, tanh_c, c_tm1):
    """Gradients of one step, each ``[B, n]``: from ``dh_t`` and ``dc_t`` (the gradient
    reaching ``c_t`` other than through ``h_t``) to ``(dz_t [B, 4 n], dc_{t-1})``:
    ``dc = dc_t + dh_t o (1 - tanh^2 c_t)``, ``dz_t = [dc c~ i (1 - i), dc c_{t-1} f (1 - f),
    dc i (1 - c~^2), dh_t tanh(c_t) o (1 - o)]``, ``dc_{t-1} = dc f`` (``dz_t U^T`` is the
    caller's)."""
    sigmoid_grad, tanh_grad = tf.raw_ops.SigmoidGrad, tf.raw_ops.TanhGrad
    dc = dc + tanh_grad(y=tanh_c, dy=dh * o)
    dz = tf.concat([sigmoid_grad(y=i, dy=dc * candidate), sigmoid_grad(y=f, dy=dc * c_tm1),
                    tanh_grad(y=candidate, dy=dc * i), sigmoid_grad(y=o, dy=dh * tanh_c)],
                   axis=1)
    return dz, dc * f


def _backward(saved, h_prev, inputs, mask, zero_output_for_mask, d_outputs, d_h, d_c):
    """The reverse loop: the gradients of ``(gates, h0, c0, U)`` (``inputs``) from those of
    the outputs and of ``h_L, c_L`` (``None``: zeros); ``saved`` and ``h_prev`` as
    :func:`_forward` returns them."""
    gates, h0, c0, recurrent_kernel = inputs
    saved = tuple(_unstacked(a) for a in saved)
    dy_steps = _unstacked(_zeros_for_none(d_outputs, h_prev))
    length = tf.shape(gates)[0]
    kernel_t = tf.transpose(recurrent_kernel)                        # U^T [4 n, n]
    if mask is None:
        def step(t, dh, dc, dy_carried):
            dz, dc_tm1 = _cell_gradient(dh + dy_steps.read(t), dc, *(a.read(t) for a in saved))
            return dz, _product(dz, kernel_t), dc_tm1, dy_carried
    else:
        step = _masked_step(saved, dy_steps, kernel_t,
                            tf.TensorArray(tf.bool, size=length).unstack(mask),
                            zero_output_for_mask)

    def body(t, dh, dc, dy_carried, dz_steps):
        dz, dh, dc, dy_carried = step(t, dh, dc, dy_carried)
        return t - 1, dh, dc, dy_carried, dz_steps.write(t, dz)

    (dz_steps,) = _arrays(length, 1)
    _, dh0, dc0, _, dz_steps = tf.while_loop(
        lambda t, *_: t >= 0, body,
        (length - 1, _zeros_for_none(d_h, h0), _zeros_for_none(d_c, c0),
         tf.zeros(tf.shape(h0), tf.float32), dz_steps))
    dz = dz_steps.stack()                                            # [L, B, 4 n]
    n, width = tf.shape(h0)[1], tf.shape(gates)[2]
    d_kernel = tf.matmul(tf.cast(tf.reshape(h_prev, (-1, n)), recurrent_kernel.dtype),
                         tf.cast(tf.reshape(dz, (-1, width)), recurrent_kernel.dtype),
                         transpose_a=True)                           # H_prev^T dZ
    return (tf.cast(dz, gates.dtype), tf.cast(dh0, h0.dtype), tf.cast(dc0, c0.dtype),
            d_kernel)


def _masked_step(saved, dy_steps, kernel_t, mask_steps, zero_output_for_mask):
    """The reverse step under a mask: a masked step passes ``dh, dc`` (and, unless
    ``zero_output_for_mask``, the output's gradient) on to step ``t - 1`` unchanged and
    has ``dz_t = 0``."""
    def step(t, dh, dc, dy_carried):
        m, dy = mask_steps.read(t), dy_steps.read(t) + dy_carried
        dz, dc_tm1 = _cell_gradient(tf.where(m, dh + dy, 0.0), tf.where(m, dc, 0.0),
                                    *(a.read(t) for a in saved))
        dy_carried = tf.zeros_like(dy) if zero_output_for_mask else tf.where(m, 0.0, dy)
        return (dz, tf.where(m, 0.0, dh) + _product(dz, kernel_t),
                tf.where(m, 0.0, dc) + dc_tm1, dy_carried)

    return step
