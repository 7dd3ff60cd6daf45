"""The topic-guided recurrences under TensorFlow with their backward passes written out
(layers.topic_lstm_recurrence for TopicCompositionalLSTM, layers.lstm_recurrence's
ExpertProducts for MixtureOfExpertsLSTM) give the same layers as keras.layers.RNN over
their cells: outputs, states, the gradients of every weight, the inputs, the topic vector
and the initial state, masking, dropout masks, SavedModels and checkpoints."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import layers.topic_lstm_recurrence
from layers.mixture_of_experts import MixtureOfExpertsLSTM, MixtureOfExpertsLSTMCell
from layers.topic_lstm import TopicCompositionalLSTM
from tests.random_weights import same_random_weights

B, L, NX, NH, NF, T = 4, 6, 5, 7, 3, 4
#: experts and units per expert of the MoE LSTM
K, NE = 2, 3


def keras_loop(layer):
    """``layer`` made to run ``keras.layers.RNN`` over its cell, as under the other
    backends."""
    layer._runs_tensorflow_recurrence = lambda training: False
    return layer


def pair(policy="float32", **kwargs):
    """A TopicCompositionalLSTM over keras.layers.RNN and one with its TensorFlow loop, of
    the same name, arguments and (random, non-zero) weights."""
    x, t, _, _ = inputs()
    reference = keras_loop(TopicCompositionalLSTM(NH, NF, T, name="tc", dtype=policy,
                                                  **kwargs))
    written = TopicCompositionalLSTM(NH, NF, T, name="tc", dtype=policy, **kwargs)
    reference([x, t])
    written([x, t])
    return same_random_weights(reference, written)


def inputs(seed=1):
    """x, topic vectors t, an initial state [h0, c0] and a mask: full length, length 3,
    gaps with the first step masked, and a row masked throughout."""
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=(B, L, NX)).astype(np.float32))
    t = tf.constant(rng.dirichlet(np.ones(T), size=B).astype(np.float32))
    state = [tf.constant(rng.normal(size=(B, NH)).astype(np.float32)) for _ in range(2)]
    mask = tf.constant([[True] * L, [True] * 3 + [False] * (L - 3),
                        [False, True, False, False, True, True], [False] * L])
    return x, t, state, mask


def outputs_and_gradients(layer, x, t, state, mask, compiled=False):
    """The layer's outputs and the gradients of a weighted sum of them (each output its own
    weight) for x, t, the initial state (when given) and every weight."""
    sources = [x, t, *(state or []), *layer.trainable_weights]

    def run():
        with tf.GradientTape() as tape:
            tape.watch([x, t, *(state or [])])
            outputs = layer([x, t], initial_state=state, mask=mask)
            outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
            weights = tf.sin(tf.range(NH, dtype=tf.float32))
            loss = sum(tf.reduce_sum(tf.cast(o, tf.float32) * (i + 1.0) * weights)
                       for i, o in enumerate(outputs))
        return outputs, tape.gradient(loss, sources)

    return tf.function(run)() if compiled else run()


def assert_close(got, want):
    """Equal to float32 rounding: to 1e-5 relative, or 1e-5 of the largest entry."""
    want = want.numpy()
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5,
                               atol=1e-5 * max(np.abs(want).max(), 1e-3))


def assert_same(reference, written, x, t, state, mask, compiled=False):
    (ref_out, ref_grad), (out, grad) = (outputs_and_gradients(layer, x, t, state, mask,
                                                              compiled)
                                        for layer in (reference, written))
    assert len(out) == len(ref_out) and len(grad) == len(ref_grad)
    for a, b in zip(ref_out, out):
        assert b.dtype == a.dtype and b.shape == a.shape
        assert_close(b, a)
    for a, b in zip(ref_grad, grad):
        assert b is not None and b.dtype == a.dtype
        assert_close(b, a)


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("return_sequences", [False, True])
def test_outputs_states_and_gradients_equal_keras_rnn(masked, return_sequences):
    """Outputs, returned states and the gradients of x, t, the initial state and every
    weight, with and without a mask (a row masked throughout, gaps, a masked first step)."""
    reference, written = pair(return_sequences=return_sequences, return_state=True)
    x, t, state, mask = inputs()
    assert_same(reference, written, x, t, state, mask if masked else None)


@pytest.mark.parametrize("return_sequences", [False, True])
def test_without_initial_or_returned_states_in_a_tf_function(return_sequences):
    """From the zero state, without returned states (their gradients then never reach the
    loop), in a ``tf.function``."""
    reference, written = pair(return_sequences=return_sequences)
    x, t, _, mask = inputs()
    assert_same(reference, written, x, t, None, mask, compiled=True)


#: the inputs whose errors the bfloat16 comparison averages. One input's largest error is
#: one row's luck with bf16 rounding: on an AVX2-only AMD EPYC the written-out loop's largest
#: error over keras's, input by input, ranged over 0.6-2.5x without a mask and 0.6-4.9x with
#: one (a masked row leaves the other rows' results bit-identical, so the mask only changes
#: which row's luck is largest); averaged over these 12 inputs it was at most 1.16x and 1.44x.
BF16_INPUTS = range(1, 13)


def relative_error(got, want):
    """The largest difference of ``got`` (any dtype) from ``want``, over ``want``'s largest
    entry."""
    want = want.numpy()
    return np.abs(tf.cast(got, tf.float32).numpy() - want).max() / np.abs(want).max()


@pytest.mark.parametrize("masked", [False, True])
def test_bfloat16_is_as_close_to_float32_as_keras_rnns(masked):
    """Under mixed_bfloat16 the outputs are bf16 and the gradients float32, each no further
    from keras.layers.RNN's in float32 than its bf16 loop is: for every output and gradient,
    the mean over BF16_INPUTS of the largest error (a share of the largest entry) at most 2x
    keras's, or 3 % (the TensorFlow loop does its element-wise work in float32, the cell in
    bf16)."""
    exact, _ = pair(return_sequences=True, return_state=True)
    reference, written = pair("mixed_bfloat16", return_sequences=True, return_state=True)
    errors = []
    for seed in BF16_INPUTS:
        x, t, state, mask = inputs(seed)
        (want_out, want_grad), (ref_out, ref_grad), (out, grad) = (
            outputs_and_gradients(layer, x, t, state, mask if masked else None)
            for layer in (exact, reference, written))
        assert ({o.dtype for o in out} == {tf.bfloat16}
                and {g.dtype for g in grad} == {tf.float32})
        errors.append([(relative_error(ref, want), relative_error(got, want))
                       for want, ref, got
                       in zip(want_out + want_grad, ref_out + ref_grad, out + grad)])
    ref_error, written_error = np.mean(errors, axis=0).T
    assert (written_error <= np.maximum(2 * ref_error, 0.03)).all(), (
        written_error / ref_error)


def test_the_tensorflow_loop_runs_unless_recurrent_dropout_trains(monkeypatch):
    calls = []
    recurrence = layers.topic_lstm_recurrence.topic_lstm_recurrence
    monkeypatch.setattr(layers.topic_lstm_recurrence, "topic_lstm_recurrence",
                        lambda *a, **k: calls.append(1) or recurrence(*a, **k))
    x, t, _, _ = inputs()
    TopicCompositionalLSTM(NH, NF, T)([x, t])
    TopicCompositionalLSTM(NH, NF, T, dropout=0.5)([x, t], training=True)
    layer = TopicCompositionalLSTM(NH, NF, T, recurrent_dropout=0.5)
    layer([x, t])
    assert calls == [1, 1, 1]
    layer([x, t], training=True)
    assert calls == [1, 1, 1]


@pytest.mark.parametrize("recurrent_dropout", [0.0, 0.3])
def test_dropout_masks_are_keras_rnns(recurrent_dropout):
    """With the same seed both draw the same masks, in inference (where keras.layers.RNN
    draws masks it does not use) as in training, so that training after an evaluation
    drops the same units too; and training differs from inference."""
    reference, written = pair(return_sequences=True, dropout=0.4,
                              recurrent_dropout=recurrent_dropout, seed=7)
    x, t, _, _ = inputs()
    for training in (False, True, False, True):
        a, b = reference([x, t], training=training), written([x, t], training=training)
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(b.numpy(), written([x, t]).numpy(), atol=1e-3)


@pytest.mark.parametrize("masked", [False, True])
def test_a_saved_model_holds_the_layer(tmp_path, masked):
    """``tf.saved_model.save`` keeps the gradient functions of the functions it saves, so
    what the loop hands its gradient must be savable; the loaded function gives the
    layer's outputs."""
    _, written = pair(return_sequences=True, return_state=True)
    x, t, _, mask = inputs()
    module = tf.Module()
    module.layer = written
    module.run = tf.function(
        lambda x, t, mask: written([x, t], mask=mask if masked else None),
        input_signature=[tf.TensorSpec([None, None, NX]), tf.TensorSpec([None, T]),
                         tf.TensorSpec([None, None], tf.bool)])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    for a, b in zip(written([x, t], mask=mask if masked else None), loaded.run(x, t, mask)):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)


def test_a_checkpoint_of_the_keras_rnn_layer_loads(tmp_path):
    """A checkpoint written by the layer over keras.layers.RNN names the same variables,
    restores completely into a fresh layer and gives the same outputs."""
    reference, _ = pair(return_sequences=True)
    x, t, _, mask = inputs()
    fresh = TopicCompositionalLSTM(NH, NF, T, name="tc", return_sequences=True)
    fresh([x, t])
    assert [w.path for w in fresh.weights] == [w.path for w in reference.weights]
    prefix = tf.train.Checkpoint(layer=reference).write(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(layer=fresh).read(prefix).assert_consumed()
    np.testing.assert_allclose(fresh([x, t], mask=mask).numpy(),
                               reference([x, t], mask=mask).numpy(), rtol=1e-5, atol=1e-6)


def moe_pair(policy="float32", cell_options=None, **kwargs):
    """keras.layers.RNN over a MixtureOfExpertsLSTMCell and a MixtureOfExpertsLSTM, of the
    same names, arguments (``cell_options`` the cells') and (random, non-zero) weights."""
    x, _, _, _ = inputs()
    reference, written = (
        layer(MixtureOfExpertsLSTMCell(NE, K, name="cell", dtype=policy,
                                       **(cell_options or {})),
              name="moe", dtype=policy, **kwargs)
        for layer in (keras.layers.RNN, MixtureOfExpertsLSTM))
    reference(x)
    written(x)
    return same_random_weights(reference, written)


def moe_outputs_and_gradients(layer, x, state, mask):
    """As :func:`outputs_and_gradients`, for a layer of x alone."""
    sources = [x, *(state or []), *layer.trainable_weights]
    with tf.GradientTape() as tape:
        tape.watch([x, *(state or [])])
        outputs = layer(x, initial_state=state, mask=mask)
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        weights = tf.sin(tf.range(K * NE, dtype=tf.float32))
        loss = sum(tf.reduce_sum(tf.cast(o, tf.float32) * (i + 1.0) * weights)
                   for i, o in enumerate(outputs))
    return outputs, tape.gradient(loss, sources)


def moe_state(seed=2):
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(size=(B, K * NE)).astype(np.float32)) for _ in range(2)]


@pytest.mark.parametrize("options", [
    dict(return_sequences=True, return_state=True), dict(return_state=True),
    dict(return_sequences=True, go_backwards=True),
    dict(return_sequences=True, zero_output_for_mask=True)])
@pytest.mark.parametrize("masked", [False, True])
def test_moe_outputs_states_and_gradients_equal_keras_rnn(options, masked):
    reference, written = moe_pair(**options)
    x, _, _, mask = inputs()
    state = moe_state()
    (ref_out, ref_grad), (out, grad) = (moe_outputs_and_gradients(layer, x, state,
                                                                  mask if masked else None)
                                        for layer in (reference, written))
    assert len(out) == len(ref_out) and len(grad) == len(ref_grad)
    for a, b in zip(ref_out + ref_grad, out + grad):
        assert b.dtype == a.dtype and b.shape == a.shape
        assert_close(b, a)


def test_moe_bfloat16_is_close_to_float32():
    """Under mixed_bfloat16, bf16 outputs and float32 gradients within bf16 rounding (3 %
    of the largest entry) of those of keras.layers.RNN in float32."""
    exact, _ = moe_pair(return_sequences=True, return_state=True)
    _, written = moe_pair("mixed_bfloat16", return_sequences=True, return_state=True)
    x, _, _, mask = inputs()
    (want_out, want_grad), (out, grad) = (moe_outputs_and_gradients(layer, x, moe_state(),
                                                                    mask)
                                          for layer in (exact, written))
    assert {o.dtype for o in out} == {tf.bfloat16} and {g.dtype for g in grad} == {tf.float32}
    for want, got in zip(want_out + want_grad, out + grad):
        want = want.numpy()
        np.testing.assert_allclose(tf.cast(got, tf.float32).numpy(), want, rtol=0,
                                   atol=0.03 * np.abs(want).max())


def test_moe_loop_and_dropout_masks_are_keras_rnns(monkeypatch):
    """The TensorFlow loop runs unless recurrent dropout trains; with the same seed both
    layers draw the same masks, so training outputs are equal too."""
    import layers.lstm_recurrence

    calls = []
    recurrence = layers.lstm_recurrence.recurrence
    monkeypatch.setattr(layers.lstm_recurrence, "recurrence",
                        lambda *a, **k: calls.append(1) or recurrence(*a, **k))
    x, _, _, _ = inputs()
    for recurrent_dropout, expected in ((0.0, [1, 1, 1, 1]), (0.3, [1, 1])):
        reference, written = moe_pair(
            return_sequences=True,
            cell_options=dict(seed=7, dropout=0.4, recurrent_dropout=recurrent_dropout))
        calls.clear()
        for training in (False, True, False, True):
            a, b = reference(x, training=training), written(x, training=training)
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
        assert calls == expected
        assert not np.allclose(b.numpy(), written(x).numpy(), atol=1e-3)
    with pytest.raises(ValueError, match="MixtureOfExpertsLSTMCell"):
        MixtureOfExpertsLSTM(keras.layers.LSTMCell(3))


def test_moe_saved_model_and_a_keras_rnn_checkpoint(tmp_path):
    """A checkpoint of keras.layers.RNN over the cell restores completely into a fresh
    MixtureOfExpertsLSTM (the same variable paths) with the same outputs, and a SavedModel
    of the layer gives them too."""
    reference, _ = moe_pair(return_sequences=True, return_state=True)
    x, _, _, mask = inputs()
    fresh = MixtureOfExpertsLSTM(MixtureOfExpertsLSTMCell(NE, K, name="cell"), name="moe",
                                 return_sequences=True, return_state=True)
    fresh(x)
    assert [w.path for w in fresh.weights] == [w.path for w in reference.weights]
    prefix = tf.train.Checkpoint(layer=reference).write(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(layer=fresh).read(prefix).assert_consumed()
    for a, b in zip(reference(x, mask=mask), fresh(x, mask=mask)):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    module = tf.Module()
    module.layer = fresh
    module.run = tf.function(lambda x, mask: fresh(x, mask=mask),
                             input_signature=[tf.TensorSpec([None, None, NX]),
                                              tf.TensorSpec([None, None], tf.bool)])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    for a, b in zip(fresh(x, mask=mask), loaded.run(x, mask)):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)
