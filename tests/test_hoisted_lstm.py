"""layers.HoistedLSTM: the same layer as keras.layers.LSTM (outputs, states, gradients,
masking, dropout masks, weight paths, config) with x W + b computed before the loop."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.hoisted_lstm import HoistedLSTM
from tests.random_weights import same_random_weights

B, L, N_X, N_H = 3, 5, 4, 6


def pair(hoist="auto", **kwargs):
    """A keras LSTM and a HoistedLSTM of the same name, arguments and weights."""
    x = np.zeros((B, L, N_X), np.float32)
    reference = keras.layers.LSTM(N_H, name="lstm_0", **kwargs)
    hoisted = HoistedLSTM(N_H, name="lstm_0", hoist=hoist, **kwargs)
    reference(x)
    hoisted(x)
    return same_random_weights(reference, hoisted)


def inputs(seed=1):
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=(B, L, N_X)).astype(np.float32))
    state = [tf.constant(rng.normal(size=(B, N_H)).astype(np.float32)) for _ in range(2)]
    # lengths 5 and 3, and a mask with holes whose first step is masked
    mask = tf.constant([[True] * 5, [True] * 3 + [False] * 2,
                        [False, True, False, False, True]])
    return x, state, mask


def outputs_and_gradients(layer, x, state, mask, compiled=False):
    """The layer's outputs and the gradients of a weighted sum of them (each output its own
    weight) for x, the initial state (when given) and every weight."""
    sources = [x, *(state or []), *layer.trainable_weights]

    def run():
        with tf.GradientTape() as tape:
            tape.watch([x, *(state or [])])
            outputs = layer(x, initial_state=state, mask=mask)
            outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
            weights = tf.sin(tf.range(N_H, dtype=tf.float32))
            loss = sum(tf.reduce_sum(tf.cast(o, tf.float32) * (i + 1.0) * weights)
                       for i, o in enumerate(outputs))
        return outputs, tape.gradient(loss, sources)

    return tf.function(run)() if compiled else run()


def assert_same(reference, hoisted, x, state, mask, compiled=False):
    (ref_out, ref_grad), (out, grad) = (outputs_and_gradients(layer, x, state, mask, compiled)
                                        for layer in (reference, hoisted))
    assert len(out) == len(ref_out) and len(grad) == len(ref_grad)
    for a, b in zip(ref_out, out):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    for a, b in zip(ref_grad, grad):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("return_sequences", [False, True])
def test_outputs_states_and_gradients_equal_keras_lstm(go_backwards, masked,
                                                       return_sequences):
    """Outputs, returned states and the gradients of x, the initial state and every weight
    (with the hoisted layer's defaults: under TensorFlow, its own recurrence)."""
    reference, hoisted = pair(return_sequences=return_sequences, return_state=True,
                              go_backwards=go_backwards)
    x, state, mask = inputs()
    assert_same(reference, hoisted, x, state, mask if masked else None)


@pytest.mark.parametrize("options", [dict(return_state=False), dict(zero_output_for_mask=True),
                                     dict(unroll=True), dict(activation="relu")])
def test_the_other_options_equal_keras_lstm_in_a_tf_function(options):
    """In a ``tf.function`` too, with no initial state, without returned states (their
    gradients then never reach the recurrence), zeros for masked outputs, and the options
    that take ``keras.src.backend.rnn``'s hoisted loop (``unroll``, another activation)."""
    reference, hoisted = pair(hoist=True, return_sequences=True, **options)
    x, _, mask = inputs()
    assert_same(reference, hoisted, x, None, mask, compiled=True)


def test_the_tensorflow_recurrence_runs_for_the_defaults_only(monkeypatch):
    import layers.lstm_recurrence

    calls = []
    recurrence = layers.lstm_recurrence.lstm_recurrence
    monkeypatch.setattr(layers.lstm_recurrence, "lstm_recurrence",
                        lambda *a, **k: calls.append(1) or recurrence(*a, **k))
    x, _, _ = inputs()
    HoistedLSTM(N_H)(x)
    assert calls == [1]
    HoistedLSTM(N_H, unroll=True)(x)
    HoistedLSTM(N_H, recurrent_activation="hard_sigmoid")(x)
    HoistedLSTM(N_H, hoist=False)(x)
    assert calls == [1]


def test_the_same_numbers_twice():
    _, hoisted = pair(return_sequences=True, return_state=True)
    x, state, mask = inputs()
    first, second = (outputs_and_gradients(hoisted, x, state, mask, compiled=True)
                     for _ in range(2))
    for a, b in zip(tf.nest.flatten(first), tf.nest.flatten(second)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


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
    reference, hoisted = pair(hoist=True, return_sequences=True)
    assert [w.path for w in hoisted.weights] == [w.path for w in reference.weights]
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(hoisted))
    assert isinstance(clone, HoistedLSTM) and clone.hoist is True
    assert clone.get_config() == hoisted.get_config()
    with pytest.raises(ValueError, match="hoist must be"):
        HoistedLSTM(N_H, hoist="yes")


@pytest.mark.parametrize("policy, hoist, expected", [
    ("float32", "auto", True), ("mixed_bfloat16", "auto", True), ("float32", True, True),
    ("mixed_bfloat16", False, False)])
def test_auto_hoists_under_tensorflow(policy, hoist, expected):
    """Under TensorFlow ``"auto"`` hoists in every precision (its own recurrence); where
    that recurrence does not run, under a reduced precision only."""
    layer = HoistedLSTM(N_H, hoist=hoist, dtype=policy)
    assert layer._hoists() is expected
    assert HoistedLSTM(N_H, hoist=True, recurrent_dropout=0.2)._hoists() is False
    assert HoistedLSTM(N_H, unroll=True)._hoists() is False
    assert HoistedLSTM(N_H, unroll=True, dtype="mixed_bfloat16")._hoists() is True


def test_bfloat16_outputs_and_gradients_are_close_to_float32():
    """Under mixed_bfloat16 the outputs and gradients stay within bf16 rounding of the
    float32 layer's."""
    reference, _ = pair(return_sequences=True, return_state=True)
    hoisted = HoistedLSTM(N_H, return_sequences=True, return_state=True,
                          dtype="mixed_bfloat16")
    x, state, mask = inputs()
    hoisted(x)
    hoisted.set_weights(reference.get_weights())
    assert hoisted._hoists()
    (ref_out, ref_grad), (out, grad) = (outputs_and_gradients(layer, x, state, mask)
                                        for layer in (reference, hoisted))
    for a, b in zip(ref_out, out):
        assert b.dtype == tf.bfloat16
        np.testing.assert_allclose(tf.cast(b, tf.float32).numpy(), a.numpy(), atol=0.02)
    for a, b in zip(ref_grad, grad):
        assert b.dtype == tf.float32
        scale = np.abs(a.numpy()).max()
        np.testing.assert_allclose(b.numpy(), a.numpy(), atol=0.02 * scale)


@pytest.mark.parametrize("writer", ["keras", "hoisted"])
def test_a_layer_checkpoint_of_either_loads_into_the_other(tmp_path, writer):
    reference, hoisted = pair(return_sequences=True)
    source, target = (reference, hoisted) if writer == "keras" else (hoisted, reference)
    fresh = (HoistedLSTM(N_H, name="lstm_0", return_sequences=True) if writer == "keras"
             else keras.layers.LSTM(N_H, name="lstm_0", return_sequences=True))
    x, _, _ = inputs()
    fresh(x)
    prefix = tf.train.Checkpoint(lstm=source).write(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(lstm=fresh).read(prefix).assert_consumed()
    np.testing.assert_allclose(fresh(x).numpy(), target(x).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("masked", [False, True])
def test_a_saved_model_holds_the_layer(tmp_path, masked):
    """``tf.saved_model.save`` keeps the gradient functions of the functions it saves, so
    what TensorFlow's recurrence hands its gradient must be savable (tensors, not
    TensorArrays); the loaded function gives the layer's outputs."""
    _, hoisted = pair(return_sequences=True, return_state=True)
    x, _, mask = inputs()
    module = tf.Module()
    module.layer = hoisted
    module.run = tf.function(
        lambda x, mask: hoisted(x, mask=mask if masked else None),
        input_signature=[tf.TensorSpec([None, None, N_X]), tf.TensorSpec([None, None], tf.bool)])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    for a, b in zip(hoisted(x, mask=mask if masked else None), loaded.run(x, mask)):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)


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
