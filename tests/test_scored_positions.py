"""In sentence mode the output layer runs at the real targets only
(:meth:`~tcnlm_tf.models.lstm.RecurrentLanguageModel.scored_log_probs`): the log
probabilities there are those of the whole batch, each position keeps its own example's
context, the padding gets 0 and no gradient, and the output layer sees only the real
targets' rows; in document and stream modes, every position."""
import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf.models.base import Context
from tcnlm_tf.models.lstm import LSTMLanguageModel
from tcnlm_tf.models.topic_guided import NaiveMoE

V, B, L, T = 40, 4, 7, 3


def padded_batch(seed: int = 0) -> dict[str, tf.Tensor]:
    """[B, L] targets with each row padded (id 0) after a different length."""
    rng = np.random.default_rng(seed)
    targets = rng.integers(3, V, size=(B, L))
    for row, length in enumerate([7, 2, 5, 1]):
        targets[row, length:] = 0
    return {"inputs": tf.constant(rng.integers(3, V, size=(B, L))),
            "targets": tf.constant(targets),
            "weights": tf.constant((targets != 0).astype(np.float32))}


def models():
    lstm = LSTMLanguageModel(V, embedding_dim=8, hidden_size=12, dropout=0.0,
                             decoder_options={"cutoffs": (10, 20)})
    moe = NaiveMoE(V, topic_vocab_size=30, num_topics=T, ntm_hidden_units=(8,),
                   embedding_dim=8, hidden_size=6, dropout=0.0,
                   decoder_options={"cutoffs": (10, 20)})
    # one topic vector per example, far apart, so that a position scored with another
    # example's context is off
    topics = tf.constant(np.random.default_rng(1).dirichlet([0.2] * T, size=B), tf.float32)
    return {"lstm": (lstm, Context()), "moe": (moe, Context({"topics": topics}))}


@pytest.mark.parametrize("name", ["lstm", "moe"])
def test_scored_positions_get_the_whole_batch_values_and_padding_gets_zero(name):
    model, context = models()[name]
    batch = padded_batch()
    hidden, _ = model.encode(batch["inputs"], context)
    whole = model.target_log_prob(hidden, batch["targets"], context).numpy()
    scored = model.scored_log_probs(hidden, batch, context).numpy()
    real = batch["weights"].numpy() > 0
    np.testing.assert_allclose(scored[real], whole[real], rtol=1e-6, atol=1e-6)
    assert np.all(scored[~real] == 0.0)
    assert np.all(whole[~real] != 0.0)     # so the zeros above are the scoring's


def test_the_moe_scores_depend_on_which_examples_context_a_position_gets():
    """So the test above sees a position scored with another example's topics."""
    model, context = models()["moe"]
    batch = padded_batch()
    hidden, _ = model.encode(batch["inputs"], context)
    swapped = Context({"topics": tf.reverse(context["topics"], [0])})
    real = batch["weights"].numpy() > 0
    right = model.scored_log_probs(hidden, batch, context).numpy()[real]
    wrong = model.scored_log_probs(hidden, batch, swapped).numpy()[real]
    assert np.max(np.abs(right - wrong)) > 1e-3


@pytest.mark.parametrize("gather, shape", [(True, (15, 12)), (False, (B, L, 12))])
def test_the_output_layer_sees_only_the_real_targets_rows_when_it_gathers(gather, shape):
    model, context = models()["lstm"]
    model.gather_targets = gather
    batch = padded_batch()
    hidden, _ = model.encode(batch["inputs"], context)
    seen = []
    layer_call = model.softmax.target_log_prob

    def spy(h, targets, training=False):
        seen.append(tuple(h.shape))
        return layer_call(h, targets, training=training)

    model.softmax.target_log_prob = spy
    try:
        model.scored_log_probs(hidden, batch, context)
    finally:
        del model.softmax.target_log_prob
    assert seen == [shape]


@pytest.mark.parametrize("mode, gathers", [("sentence", True), ("document", False),
                                           ("stream", False)])
def test_a_run_gathers_in_sentence_mode_only(mode, gathers):
    from benchmarks.harness import train_run_config

    config = train_run_config(["--dataset", "synthetic", "--mode", mode])
    assert LSTMLanguageModel.lm_arguments(config, ["w"] * V)["gather_targets"] is gathers


def test_padding_gets_no_gradient_and_real_positions_the_whole_batch_gradient():
    model, context = models()["lstm"]
    batch = padded_batch()
    hidden, _ = model.encode(batch["inputs"], context)
    weights = batch["weights"]

    def gradient(score):
        with tf.GradientTape() as tape:
            tape.watch(hidden)
            loss = tf.reduce_sum(tf.where(weights > 0, -score(), 0.0))
        return tape.gradient(loss, hidden).numpy()

    scored = gradient(lambda: model.scored_log_probs(hidden, batch, context))
    whole = gradient(lambda: model.target_log_prob(hidden, batch["targets"], context))
    np.testing.assert_allclose(scored, whole, rtol=1e-5, atol=1e-7)
    assert np.all(scored[weights.numpy() == 0] == 0.0)
    assert np.any(scored[weights.numpy() > 0] != 0.0)


def test_without_weights_every_position_is_scored():
    model, context = models()["lstm"]
    batch = padded_batch()
    hidden, _ = model.encode(batch["inputs"], context)
    unweighted = {k: v for k, v in batch.items() if k != "weights"}
    np.testing.assert_array_equal(
        model.scored_log_probs(hidden, unweighted, context).numpy(),
        model.target_log_prob(hidden, batch["targets"], context).numpy())


def test_context_rows_are_each_examples_and_gathered_only_when_read():
    context = Context({"topics": tf.constant([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]),
                       "unread": "not a tensor: gathering it would raise"})
    picked = context.rows(tf.constant([2, 0, 0]))
    np.testing.assert_array_equal(picked["topics"].numpy(),
                                  [[0.5, 0.5], [1.0, 0.0], [1.0, 0.0]])
    assert sorted(picked.tensors) == ["topics", "unread"]
    with pytest.raises((ValueError, TypeError, tf.errors.InvalidArgumentError)):
        picked["unread"]
