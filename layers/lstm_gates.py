"""The LSTM pieces the topic-compositional and mixture-of-experts cells share: the gate
order, per-block initializers, the per-group products and the state update of eq. 13 (Wang
et al. 2018) / of every LSTM (Hochreiter and Schmidhuber 1997, in keras.layers.LSTMCell's
form)."""
from __future__ import annotations

import keras
from keras import ops

#: Gates in the order of keras.layers.LSTMCell: input, forget, candidate, output.
NUM_GATES = 4


def blockwise_initializer(initializer, num_blocks, block_shape):
    """An initializer that draws ``num_blocks`` independent ``block_shape`` blocks.

    Returns ``fn(shape, dtype) -> [num_blocks, *block_shape]``. Each block gets the fan-in
    and fan-out of ``block_shape`` alone (Keras would otherwise fold the extra leading axis
    into both fans and shrink a Glorot scale, and an orthogonal initializer would be
    orthogonal only over all blocks together). Keras 3 initializer instances repeat their
    values on every call, so each block uses a fresh copy of ``initializer``; an integer
    seed ``s`` becomes ``s + k`` for block ``k`` so that blocks differ but stay reproducible.
    """
    if isinstance(initializer, keras.initializers.Initializer):
        config = initializer.get_config()
        copies = []
        for k in range(num_blocks):
            block_config = dict(config)
            if isinstance(config.get("seed"), int):
                block_config["seed"] = config["seed"] + k
            copies.append(initializer.__class__.from_config(block_config))
    else:  # a plain function holds no seed to copy
        copies = [initializer] * num_blocks

    def init(shape, dtype=None):
        blocks = ops.stack([c(block_shape, dtype=dtype) for c in copies])
        return ops.reshape(blocks, shape)

    return init


def lstm_bias_initializer(bias_initializer, units, unit_forget_bias):
    """Initializer for one LSTM bias ``[4 * units]`` (gates i, f, c, o), as in LSTMCell:
    with ``unit_forget_bias`` the forget-gate block is ones, the rest ``bias_initializer``."""
    if not unit_forget_bias:
        return bias_initializer

    def init(shape, dtype=None):
        del shape
        return ops.concatenate(
            [
                bias_initializer((units,), dtype=dtype),
                ops.ones((units,), dtype=dtype),
                bias_initializer((2 * units,), dtype=dtype),
            ]
        )

    return init


def lstm_update(i, f, candidate, o, c_tm1):
    """The LSTM state update from the pre-activations of gates i, f, c~ and o and the
    previous cell ``c_tm1``, all ``[..., n]``. Returns ``(h, c)``, each ``[..., n]``:
    ``c = sigmoid(i) * tanh(c~) + sigmoid(f) * c_tm1``, ``h = sigmoid(o) * tanh(c)``.

    The gates come as four tensors (from ``ops.split``/``ops.unstack``, whose gradients
    concatenate): indexing one ``[..., 4, n]`` tensor four times would make each gradient a
    zero-padded ``[..., 4, n]`` tensor, four of them summed, at every step.
    """
    c = ops.sigmoid(i) * ops.tanh(candidate) + ops.sigmoid(f) * c_tm1
    return ops.sigmoid(o) * ops.tanh(c), c


def grouped_matmul(x, kernels):
    """``x [N, G, n]`` and ``kernels [G, n, m]`` -> ``[N, G, m]``: ``x[:, g] kernels[g]``
    for each group ``g`` (the four gates' ``W_*a`` of eq. 13, the experts' ``U[k]`` of
    eq. 8), as one batched product with the groups leading.

    ``einsum("ngi,gio->ngo")`` means the same, and in float32 gives the same products (its
    gradients differ in rounding only), but TensorFlow's CPU ``Einsum`` in bfloat16, on a
    CPU without bfloat16 instructions, takes 12-30x this batched matmul's time and is off
    by 4-9x its rounding error (``python -m benchmarks.probe_grouped_matmul``, whose
    ``tc`` and ``moe`` workloads are the two uses; there, in float32, this takes 0.65-0.83x
    einsum's time).
    """
    product = ops.matmul(ops.transpose(x, (1, 0, 2)), kernels)
    return ops.transpose(product, (1, 0, 2))


def check_positive_int(owner, name, value):
    """A ValueError naming ``owner`` and ``name`` unless ``value`` is a positive int."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{owner} {name} must be a positive integer, got {value!r}.")


def dropped_sequences(cell, sequences, training):
    """``sequences [B, L, n_x]`` times ``cell``'s input dropout mask in training (one mask
    per sequence, drawn as ``keras.layers.LSTMCell`` draws it), for a layer that computes
    the input half of the gates for all steps before its loop; unchanged otherwise."""
    if training and 0.0 < cell.dropout < 1.0:
        return sequences * ops.expand_dims(cell.get_dropout_mask(sequences[:, 0, :]), 1)
    return sequences
