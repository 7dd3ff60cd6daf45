"""Topic-RNN (Dieng et al. 2017): its probabilities and training objective against a NumPy
reference, where theta enters (the non-stop-word branch only), the KL of its inference
network, its layers' serialisation, and a tiny run through train.run."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from tensorboard.backend.event_processing import event_accumulator

from evaluate.scalars import epoch_means
from layers.topic_rnn import TopicRNNInference, TopicRNNOutput
from tcnlm_tf.data.vocab import load_stopwords
from tcnlm_tf.errors import UserError
from tcnlm_tf.models.base import Context
from tcnlm_tf.models.registry import MODELS
from tcnlm_tf.models.topic_rnn import TopicRNN, stop_word_mask
from tests.conftest import TINY_EPOCH, run_flags

V, TOPIC_V, K, H = 12, 9, 3, 6
#: words 0 (<pad>), 2 (<eos>), 3 and 4 are stop words; 1 (<unk>) and 5.. are not
STOP = np.array([1, 0, 1, 1, 1] + [0] * (V - 5), np.float32)
INPUTS = np.array([[2, 5, 3, 7, 4], [2, 8, 9, 0, 0]])
TARGETS = np.array([[5, 3, 7, 4, 2], [8, 9, 2, 0, 0]])
BOW = np.array([[1, 4, 4, 6, 0], [2, 3, 0, 0, 0]])


def make_model(seed=3):
    """A tiny Topic-RNN with random weights everywhere (zero-initialised ones included)."""
    model = TopicRNN(V, TOPIC_V, STOP, num_topics=K, ntm_hidden_units=(5,), embedding_dim=4,
                     hidden_size=H, dropout=0.0)
    model(batch())
    rng = np.random.default_rng(seed)
    for w in model.weights:
        w.assign(rng.normal(scale=0.7, size=w.shape).astype("float32"))
    return model


def batch(targets=TARGETS, bow=BOW):
    targets = tf.constant(targets)
    return {"inputs": tf.constant(INPUTS), "targets": targets, "bow": tf.constant(bow),
            "context_weight": tf.ones([len(INPUTS)]),
            "weights": tf.cast(targets != 0, tf.float32)}


def weights_of(layer):
    return {w.name: w.numpy().astype(np.float64) for w in layer.weights}


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def numpy_posterior(model, bow):
    """(mu, log sigma^2) [B, K] of q(theta|d), and the analytic KL [B], in float64."""
    w = weights_of(model.inference)
    counts = np.stack([np.bincount(row[row > 0], minlength=TOPIC_V) for row in bow])
    h = np.log1p(counts.astype(np.float64))
    h = np.maximum(h @ w["encoder_0_kernel"] + w["encoder_0_bias"], 0.0)
    mu = h @ w["mean_kernel"] + w["mean_bias"]
    log_var = h @ w["log_variance_kernel"] + w["log_variance_bias"]
    kl = 0.5 * (mu ** 2 + np.exp(log_var) - 1.0 - log_var).sum(-1)
    return mu, log_var, kl


def numpy_branches(model, hidden, theta):
    """From hidden [B, L, H] and theta [B, K] (float64): the stop logit Gamma^T h + gamma_0
    [B, L], log p(l=1|h) + log softmax(vh + c) and log p(l=0|h) + log softmax(vh + c +
    B theta), both [B, L, V]."""
    w = weights_of(model.softmax)
    logits = hidden @ w["head_kernel"] + w["head_bias"]
    stop_logit = (hidden @ w["stop_kernel"])[..., 0] + w["stop_bias"]
    bias = (theta @ w["topic_kernel"])[:, None, :]
    return (stop_logit, log_sigmoid(stop_logit)[..., None] + log_softmax(logits),
            log_sigmoid(-stop_logit)[..., None] + log_softmax(logits + bias))


@pytest.fixture(scope="module")
def model():
    return make_model()


def test_probabilities_and_objective_match_numpy(model):
    b = batch()
    mu, _, kl = numpy_posterior(model, BOW)
    hidden = model.encode(b["inputs"], Context())[0]
    stop_logit, stop, content = numpy_branches(model, hidden.numpy().astype(np.float64), mu)
    marginal = np.logaddexp(stop, content)                                     # [B, L, V]
    np.testing.assert_allclose(np.exp(marginal).sum(-1), 1.0, atol=1e-12)

    context = model.context(b)
    np.testing.assert_allclose(context["theta"].numpy(), mu, rtol=1e-5, atol=1e-5)
    full = model.log_probs(hidden, context).numpy()
    np.testing.assert_allclose(np.exp(full).sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(full, marginal, atol=1e-4)

    pick = lambda x: np.take_along_axis(x, TARGETS[..., None], -1)[..., 0]  # noqa: E731
    target_marginal = pick(marginal)
    np.testing.assert_allclose(model.target_log_prob(hidden, b["targets"], context).numpy(),
                               target_marginal, atol=1e-4)

    # the paper's objective: log p(y_t | h, theta, l_t) + log p(l_t | h), l_t observed
    l_obs = STOP[TARGETS] > 0
    joint = np.where(l_obs, pick(stop), pick(content))
    w = TARGETS != 0
    indicator = np.where(l_obs, log_sigmoid(stop_logit), log_sigmoid(-stop_logit))

    out = model(b)
    np.testing.assert_allclose(out.target_log_probs.numpy(), target_marginal, atol=1e-4)
    np.testing.assert_allclose(float(out.aux_loss),
                               kl.sum() + (target_marginal - joint)[w].sum(), rtol=1e-4)
    np.testing.assert_allclose(float(out.aux_metrics["topic_rnn_kl"]), kl.sum(), rtol=1e-4)
    np.testing.assert_allclose(float(out.aux_metrics["stop_word_nll"]), -indicator[w].sum(),
                               rtol=1e-4)
    terms = model.loss_terms(b)
    np.testing.assert_allclose(float(terms["nll_sum"] + terms["aux_loss"]),
                               -joint[w].sum() + kl.sum(), rtol=1e-4)


def test_aux_term_is_minus_log_posterior_of_the_observed_indicator(model):
    """log p(y) - log p(y, l(y)) = -log p(l(y) | y) >= 0 for every real target."""
    out = model(batch())
    assert float(out.aux_loss) - float(out.aux_metrics["topic_rnn_kl"]) > 0.0


def test_theta_biases_only_the_non_stop_word_branch(model):
    hidden = model.encode(tf.constant(INPUTS), Context())[0]
    theta = [Context({"theta": tf.constant(t, tf.float32)})
             for t in (np.zeros((2, K)), np.full((2, K), 2.0), np.eye(2, K))]
    logits = model.softmax(hidden, theta[0]["theta"])["word_logits"]
    # theta = 0: both branches are softmax(vh + c), whatever p(l|h)
    np.testing.assert_allclose(model.log_probs(hidden, theta[0]).numpy(),
                               tf.nn.log_softmax(logits).numpy(), atol=1e-5)
    assert np.abs(model.log_probs(hidden, theta[1]).numpy()
                  - model.log_probs(hidden, theta[2]).numpy()).max() > 1e-3
    stop_bias = model.softmax.stop_bias
    saved = stop_bias.numpy()
    try:
        stop_bias.assign(60.0)          # p(l = 1 | h) = 1: only the stop-word branch
        for t in theta[1:]:
            np.testing.assert_allclose(model.log_probs(hidden, t).numpy(),
                                       tf.nn.log_softmax(logits).numpy(), atol=1e-5)
        stop_bias.assign(-60.0)         # p(l = 0 | h) = 1: softmax(vh + c + B theta)
        bias = model.softmax(hidden, theta[1]["theta"])["topic_bias"][:, None, :]
        np.testing.assert_allclose(model.log_probs(hidden, theta[1]).numpy(),
                                   tf.nn.log_softmax(logits + bias).numpy(), atol=1e-5)
    finally:
        stop_bias.assign(saved)


def test_stop_word_targets_train_without_theta(model):
    """For stop-word targets the objective log p(y | h, l = 1) + log p(l = 1 | h) does not
    depend on theta (here changed through the document); for other targets it does."""
    other_bow = np.array([[7, 7, 8, 0, 0], [5, 5, 5, 1, 0]])

    def joint_nll(targets, bow):
        terms = model.loss_terms(batch(targets, bow))
        return float(terms["nll_sum"] + terms["aux_loss"] - terms["aux_metrics"]["topic_rnn_kl"])

    stop_targets = np.array([[3, 4, 2, 3, 4], [2, 3, 4, 0, 0]])
    assert joint_nll(stop_targets, BOW) == pytest.approx(joint_nll(stop_targets, other_bow),
                                                         abs=1e-5)
    assert abs(joint_nll(TARGETS, BOW) - joint_nll(TARGETS, other_bow)) > 1e-3


def test_kl_is_the_analytic_kl_and_samples_follow_the_posterior(model):
    counts = np.random.default_rng(0).integers(0, 3, size=(4, TOPIC_V)).astype(np.float32)
    out = model.inference(counts, training=False)
    mean, log_var = out["mean"].numpy(), out["log_variance"].numpy()
    assert np.abs(log_var).max() > 0.1                       # not the initial variance 1
    analytic = 0.5 * (mean ** 2 + np.exp(log_var) - 1.0 - log_var).sum(-1)
    np.testing.assert_allclose(out["kl"].numpy(), analytic, rtol=1e-5)
    q = tfp.distributions.MultivariateNormalDiag(mean, tf.exp(0.5 * log_var))
    prior = tfp.distributions.MultivariateNormalDiag(tf.zeros(K), tf.ones(K))
    np.testing.assert_allclose(out["kl"].numpy(),
                               tfp.distributions.kl_divergence(q, prior).numpy(), rtol=1e-5)
    np.testing.assert_array_equal(out["theta"].numpy(), mean)

    tf.random.set_seed(0)
    draws = model.inference(np.repeat(counts[:1], 20000, 0), training=True)["theta"].numpy()
    std = np.exp(0.5 * log_var[0])
    assert (np.abs(draws.mean(0) - mean[0]) < 0.05 * std).all()
    np.testing.assert_allclose(draws.std(0), std, rtol=0.05)
    forced = model.inference(counts, training=False, sample=True)["theta"].numpy()
    assert not np.allclose(forced, mean)


def test_initial_posterior_has_unit_variance():
    layer = TopicRNNInference(TOPIC_V, K, hidden_units=(4,))
    out = layer(np.ones((2, TOPIC_V), np.float32))
    np.testing.assert_array_equal(out["log_variance"].numpy(), 0.0)


def test_topic_words_put_no_mass_on_stop_words_and_specials(model):
    beta = model.topic_word().numpy()
    assert beta.shape == (K, V)
    np.testing.assert_allclose(beta.sum(-1), 1.0, atol=1e-6)
    assert (beta[:, STOP > 0] == 0).all() and (beta[:, 1] == 0).all()     # 1: <unk>
    kernel = model.softmax.topic_kernel.numpy()
    content = np.flatnonzero(STOP == 0)[1:]
    np.testing.assert_allclose(beta[:, content], np.exp(log_softmax(kernel[:, content])),
                               atol=1e-6)


def test_topic_context_uses_the_topic_vector_as_theta(model):
    topics = tf.constant(np.eye(K, dtype=np.float32)[:2])
    np.testing.assert_array_equal(model.topic_context(topics)["theta"].numpy(), topics.numpy())
    infer = model.infer_topics(batch()).numpy()
    np.testing.assert_allclose(infer.sum(-1), 1.0, atol=1e-6)


def test_uninformative_topics_are_the_prior_mean_and_drop_the_topic_term():
    """The ``uniform`` ablation's theta is 0, the mean of the prior: the model then scores as
    with its topic matrix B zeroed, whatever the document. Uniform proportions 1/K (what
    the ablation used before) would not: they add the mean column of B to the logits."""
    model = make_model()
    theta = model.uninformative_topics(tf.constant(len(INPUTS)))
    np.testing.assert_array_equal(theta.numpy(), np.zeros((len(INPUTS), K)))

    def scores(m, topics=None):
        context = None if topics is None else m.topic_context(topics)
        return m(batch(), context=context).target_log_probs.numpy()

    without_b = make_model()
    without_b.softmax.topic_kernel.assign(tf.zeros_like(without_b.softmax.topic_kernel))
    np.testing.assert_allclose(scores(model, theta), scores(without_b), rtol=1e-6)
    uniform = tf.fill([len(INPUTS), K], 1.0 / K)
    assert np.abs(scores(model, uniform) - scores(without_b)).max() > 1e-3


def test_stop_word_mask_marks_stop_words_non_topic_tokens_eos_and_pad_not_unk():
    words = ["<pad>", "<unk>", "<eos>", "the", "election", "of", "senate", '"', ".", "1995",
             "'s", "n't", "u.s.", "four-year"]
    np.testing.assert_array_equal(stop_word_mask(words, load_stopwords()),
                                  [1, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 0, 0])


@pytest.mark.parametrize("layer", [TopicRNNInference(TOPIC_V, K, hidden_units=(4, 5)),
                                   TopicRNNOutput(V, K)])
def test_layers_serialise(layer):
    config = keras.saving.serialize_keras_object(layer)
    assert config["registered_name"].startswith("tcnlm_tf>")
    clone = keras.saving.deserialize_keras_object(config)
    assert type(clone) is type(layer) and clone.get_config() == layer.get_config()


def test_tiny_run_trains_and_logs_its_terms(tmp_path):
    """A whole epoch on the tiny corpus: the training loss falls, the test perplexity beats
    a uniform guess, both model terms reach TensorBoard, and the loaded run's topics put
    no mass on stop words; the loaded run keeps its stop mask after its --stopwords file
    has changed."""
    from tcnlm_tf.data.vocab import DEFAULT_STOPWORDS
    from tcnlm_tf.runs.loading import load_run
    from train.run import main as train

    stopwords = tmp_path / "stop.txt"
    stopwords.write_text(DEFAULT_STOPWORDS.read_text(encoding="utf-8"), encoding="utf-8")
    metrics = train(TINY_EPOCH + ["--model", "topic_rnn", *MODELS["topic_rnn"].test_flags,
                                   "--learning-rate", "0.01", "--log-every", "5",
                                   "--stopwords", str(stopwords)]
                    + run_flags(tmp_path, "trnn"))
    stopwords.write_text("zzz\n", encoding="utf-8")
    load_stopwords.cache_clear()      # as a later process would read the changed file
    run_dir = tmp_path / "runs" / "trnn"
    run = load_run(run_dir)
    np.testing.assert_array_equal(run.model.stop_mask.numpy(),
                                  stop_word_mask(run.lm_vocab.words, load_stopwords()))
    assert metrics["test_perplexity"] < len(run.lm_vocab)
    acc = event_accumulator.EventAccumulator(str(run_dir / "tensorboard"),
                                             size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    assert {"train/loss", "train/topic_rnn_kl", "train/stop_word_nll"} <= set(
        acc.Tags()["tensors"])
    losses = [float(tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors("train/loss")]
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
    kl = [float(tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors("train/topic_rnn_kl")]
    assert epoch_means(run_dir, "train/topic_rnn_kl") == [pytest.approx(np.mean(kl))]
    with pytest.raises(UserError, match="no scalar 'train/nothing'"):
        epoch_means(run_dir, "train/nothing")

    beta = run.model.topic_word().numpy()
    stop = stop_word_mask(run.lm_vocab.words, load_stopwords()) > 0
    assert stop.sum() > 2 and (beta[:, stop] == 0).all()
    np.testing.assert_allclose(beta.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("spread", [1.0, 200.0])
def test_normalisers_equal_both_log_sum_exps_also_past_float32_range(model, spread):
    """One exponential serves both normalisers; where the topic biases of a document span
    so many nats that the shared product would underflow (spread 200), the second one is
    computed directly. Both cases: the two log-sum-exps of float64 NumPy, and gradients
    equal to those of two ``reduce_logsumexp``."""
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=3.0, size=(2, 5, V)).astype(np.float32)
    bias = rng.normal(size=(2, V))
    # document 0: word 0 has the lowest logits and a topic bias `spread` nats above the
    # others'; at spread 200 each term of the shared product underflows to 0
    bias[0, 0], logits[0, :, 0] = spread, -spread
    logits, bias = tf.constant(logits), tf.constant(bias, tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([logits, bias])
        stop_norm, content_norm = model._normalisers(logits, bias)
        direct = (tf.reduce_logsumexp(logits, -1),
                  tf.reduce_logsumexp(logits + bias[:, None], -1))
        shared_sum = tf.reduce_sum(stop_norm * 0.3 + content_norm * 0.7)
        direct_sum = tf.reduce_sum(direct[0] * 0.3 + direct[1] * 0.7)
    l64, b64 = logits.numpy().astype(np.float64), bias.numpy().astype(np.float64)
    expected_content = np.log(np.exp(l64 + b64[:, None]).sum(-1))
    np.testing.assert_allclose(stop_norm.numpy(), np.log(np.exp(l64).sum(-1)), rtol=1e-5)
    np.testing.assert_allclose(content_norm.numpy(), expected_content, rtol=1e-5)
    for x in (logits, bias):
        np.testing.assert_allclose(tape.gradient(shared_sum, x).numpy(),
                                   tape.gradient(direct_sum, x).numpy(), rtol=1e-4, atol=1e-6)
