"""layers.HoistedLSTM: the same layer as keras.layers.LSTM (outputs, states, gradients,
masking, dropout masks, weight paths, config) with x W + b computed before the loop."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.hoisted_lstm import HoistedLSTM

B, L, N_X, N_H = 3, 5, 4, 6


def pair(**kwargs):
    """A keras LSTM and a HoistedLSTM of the same name, arguments and weights."""
    x = np.zeros((B, L, N_X), np.float32)
    reference = keras.layers.LSTM(N_H, name="lstm_0", **kwargs)
    hoisted = HoistedLSTM(N_H, name="lstm_0", hoist=True, **kwargs)
    reference(x)
    hoisted(x)
    rng = np.random.default_rng(0)
    for w in reference.weights:
        w.assign(rng.normal(scale=0.5, size=w.shape).astype(np.float32))
    hoisted.set_weights(reference.get_weights())
    return reference, hoisted


def inputs(seed=1):
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=(B, L, N_X)).astype(np.float32))
    state = [tf.constant(rng.normal(size=(B, N_H)).astype(np.float32)) for _ in range(2)]
    mask = tf.constant(np.arange(L)[None, :] < np.array([[5], [3], [1]]))
    return x, state, mask


@pytest.mark.parametrize("go_backwards", [False, True])
def test_outputs_states_and_gradients_equal_keras_lstm(go_backwards):
    reference, hoisted = pair(return_sequences=True, return_state=True,
                              go_backwards=go_backwards)
    x, state, mask = inputs()
    results = []
    for layer in (reference, hoisted):
        with tf.GradientTape() as tape:
            tape.watch(x)
            outputs = layer(x, initial_state=state, mask=mask)
            loss = sum(tf.reduce_sum(o * (i + 1.0)) for i, o in enumerate(outputs))
        results.append((outputs, tape.gradient(loss, [x, *layer.trainable_weights])))
    (ref_out, ref_grad), (out, grad) = results
    for a, b in zip(ref_out, out):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    for a, b in zip(ref_grad, grad):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("recurrent_dropout", [0.0, 0.3])
def test_dropout_masks_are_keras_lstms(recurrent_dropout):
    """With the same seed, both draw the same masks (the input mask once per sequence; with
    recurrent dropout both run LSTMCell's per-gate loop), so training outputs are equal
    too, and differ from inference."""
    kwargs = dict(return_sequences=True, dropout=0.4, recurrent_dropout=recurrent_dropout,
                  seed=7)
    reference, hoisted = pair(**kwargs)
    x, _, _ = inputs()
    a, b = reference(x, training=True), hoisted(x, training=True)
    np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(b.numpy(), hoisted(x).numpy(), atol=1e-3)


def test_same_weight_paths_and_config_round_trip():
    reference, hoisted = pair(return_sequences=True)
    assert [w.path for w in hoisted.weights] == [w.path for w in reference.weights]
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(hoisted))
    assert isinstance(clone, HoistedLSTM) and clone.hoist is True
    assert clone.get_config() == hoisted.get_config()
    with pytest.raises(ValueError, match="hoist must be"):
        HoistedLSTM(N_H, hoist="yes")


@pytest.mark.parametrize("policy, hoist, expected", [
    ("float32", "auto", False), ("mixed_bfloat16", "auto", True), ("float32", True, True),
    ("mixed_bfloat16", False, False)])
def test_auto_hoists_under_reduced_precision_only(policy, hoist, expected):
    layer = HoistedLSTM(N_H, hoist=hoist, dtype=policy)
    assert layer._hoists() is expected
    assert HoistedLSTM(N_H, hoist=True, recurrent_dropout=0.2)._hoists() is False


def test_bfloat16_outputs_are_close_to_float32():
    """Under mixed_bfloat16 (the hoisted path by default) the outputs stay within bf16
    rounding of the float32 layer's."""
    reference, _ = pair(return_sequences=True)
    hoisted = HoistedLSTM(N_H, return_sequences=True, dtype="mixed_bfloat16")
    x, _, _ = inputs()
    hoisted(x)
    hoisted.set_weights(reference.get_weights())
    assert hoisted._hoists()
    np.testing.assert_allclose(tf.cast(hoisted(x), tf.float32).numpy(),
                               reference(x).numpy(), atol=0.01)   # 0.0033 measured


def test_a_checkpoint_of_the_keras_lstm_model_loads_into_the_hoisted_one(tmp_path):
    """Models used keras.layers.LSTM before HoistedLSTM: their checkpoints name the same
    variables, restore completely and give the same log-probabilities."""
    from tcnlm_tf.models.lstm import LSTMLanguageModel
    from tcnlm_tf.runs.checkpoints import model_checkpoint

    class KerasLSTMModel(LSTMLanguageModel):
        def make_layer(self, index):
            return keras.layers.LSTM(self.hidden_size, return_sequences=True,
                                     return_state=True, name=f"lstm_{index}")

    V = 30
    rng = np.random.default_rng(0)
    stream = rng.integers(3, V, size=(2, 9))
    data = {"inputs": tf.constant(stream[:, :8]), "targets": tf.constant(stream[:, 1:]),
            "weights": tf.ones([2, 8])}
    kwargs = dict(embedding_dim=8, hidden_size=12, num_layers=2, dropout=0.0,
                  decoder_options={"cutoffs": (10,)}, name="lstm")
    old, new = KerasLSTMModel(V, **kwargs), LSTMLanguageModel(V, **kwargs)
    old(data)
    new(data)
    for w in old.weights:
        w.assign(rng.normal(scale=0.3, size=w.shape).astype(np.float32))
    prefix = model_checkpoint(old).write(str(tmp_path / "old"))
    model_checkpoint(new).read(prefix).assert_consumed()
    np.testing.assert_allclose(new(data).target_log_probs.numpy(),
                               old(data).target_log_probs.numpy(), rtol=1e-5, atol=1e-6)
