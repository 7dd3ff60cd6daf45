"""The basic-LSTM LM: carried state, resets, and exact output distributions."""
import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf.models.base import Context
from tcnlm_tf.models.lstm import LSTMLanguageModel
from tcnlm_tf.models.registry import MODELS

V = 40


def batch(inputs, targets, reset=None):
    inputs, targets = tf.constant(inputs), tf.constant(targets)
    out = {"inputs": inputs, "targets": targets, "weights": tf.cast(targets != 0, tf.float32)}
    if reset is not None:
        out["reset"] = tf.constant(reset, tf.float32)
    return out


@pytest.fixture(scope="module")
def model():
    m = LSTMLanguageModel(V, embedding_dim=8, hidden_size=12, num_layers=2, dropout=0.3,
                          decoder_options={"cutoffs": (10, 20)})
    rng = np.random.default_rng(0)
    stream = rng.integers(3, V, size=(3, 13))
    m.stream = stream
    m(batch(stream[:, :12], stream[:, 1:]))
    return m


def test_carrying_state_across_windows_equals_one_long_sequence(model):
    s = model.stream
    whole = model(batch(s[:, :12], s[:, 1:])).target_log_probs.numpy()
    first = model(batch(s[:, :6], s[:, 1:7]))
    second = model(batch(s[:, 6:12], s[:, 7:13], reset=[0, 0, 0]), state=first.state)
    split = np.concatenate([first.target_log_probs.numpy(), second.target_log_probs.numpy()], 1)
    np.testing.assert_allclose(split, whole, atol=1e-5)


def test_reset_zeroes_the_carried_state_per_lane(model):
    s = model.stream
    first = model(batch(s[:, :6], s[:, 1:7]))
    fresh = model(batch(s[:, 6:12], s[:, 7:13])).target_log_probs.numpy()
    carried = model(batch(s[:, 6:12], s[:, 7:13], reset=[1, 0, 1]),
                    state=first.state).target_log_probs.numpy()
    np.testing.assert_allclose(carried[[0, 2]], fresh[[0, 2]], atol=1e-5)
    assert not np.allclose(carried[1], fresh[1], atol=1e-4)


@pytest.mark.parametrize("kwargs", [
    {"decoder_options": {"cutoffs": (10, 20)}}, {"decoder_options": {"cutoffs": ()}},
    {"decoder": "softmax", "decoder_options": {"tie": True}},
    {"decoder": "mos", "decoder_options": {"mixtures": 3}}])
def test_full_distribution_sums_to_one_and_matches_target_log_prob(kwargs):
    m = LSTMLanguageModel(V, embedding_dim=8, hidden_size=12, dropout=0.0, **kwargs)
    s = np.random.default_rng(1).integers(3, V, size=(2, 7))
    b = batch(s[:, :6], s[:, 1:])
    target_lp = m(b).target_log_probs.numpy()
    hidden, _ = m.encode(b["inputs"], Context())
    full = m.log_probs(hidden, Context()).numpy()
    np.testing.assert_allclose(np.exp(full).sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.take_along_axis(full, s[:, 1:, None], -1)[..., 0], target_lp,
                               atol=1e-5)


def test_tied_embeddings_share_the_input_matrix():
    m = LSTMLanguageModel(V, embedding_dim=8, hidden_size=12, dropout=0.0, decoder="softmax",
                          decoder_options={"tie": True})
    s = np.random.default_rng(2).integers(3, V, size=(2, 7))
    m(batch(s[:, :6], s[:, 1:]))
    variables = m.trainable_variables
    assert len({id(v) for v in variables}) == len(variables)   # the shared matrix once
    # no output matrix of its own: the only vocabulary-sized weights are E and the bias
    assert [tuple(v.shape) for v in variables if V in v.shape] == [(V, 8), (V,)]
    with tf.GradientTape() as tape:
        loss = -tf.reduce_sum(m(batch(s[:, :6], s[:, 1:])).target_log_probs)
    grad = tape.gradient(loss, m.embedding.embeddings)
    # rows of words that only appear as targets still get gradient through the output layer
    only_targets = sorted(set(s[:, 6]) - set(s[:, :6].ravel()))
    assert only_targets and np.abs(tf.convert_to_tensor(grad).numpy()[only_targets]).sum() > 0


@pytest.mark.parametrize("name", list(MODELS))
def test_checkpoint_keys_do_not_depend_on_models_built_before(name):
    """Checkpoints key variables by path, so a model must get the same paths however many
    models the process built before (an auto-numbered layer name would break load_run)."""
    from tcnlm_tf.config import ModelConfig, RunConfig
    from tcnlm_tf.data.vocab import UNK, Vocabulary
    from tcnlm_tf.models import build_model
    from tcnlm_tf.runs.checkpoints import variable_map

    small = {"num_topics": 3, "num_factors": 4, "ntm_hidden_units": [8], "num_filters": 3,
             "topic_dim": 5}
    config = RunConfig(model=ModelConfig(
        model=name, hidden_size=8, embedding_dim=6,
        options={k: v for k, v in small.items() if k in MODELS[name].option_names}))
    lm_vocab = Vocabulary(["<pad>", UNK, "<eos>"] + [f"w{i}" for i in range(V - 3)], unk=UNK)
    topic_vocab = Vocabulary(["<pad>"] + [f"w{i}" for i in range(11)])
    ids = tf.constant([[2, 5, 7]])
    keys = []
    for _ in range(2):
        m = build_model(config, lm_vocab, topic_vocab)
        m({"inputs": ids, "targets": ids, "weights": tf.ones([1, 3]),
           "bow": tf.constant([[1, 2, 0]]), "preceding": tf.constant([[[1, 2, 0]]]),
           "context_weight": tf.ones([1])})
        keys.append(sorted(variable_map(m.weights)))   # what model_checkpoint stores
    assert keys[0] == keys[1]
