"""Tests for layers.topic_model (bag of words and the Gaussian-softmax NTM of TCNLM Sec. 3.1)."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.topic_model import BagOfWords, NeuralTopicModel

VOCAB, TOPICS, LATENT, HIDDEN = 40, 5, 4, (16, 12)


def random_counts(rng, batch=6, vocab=VOCAB, length=25):
    ids = rng.integers(0, vocab, size=(batch, length))
    return BagOfWords(vocab)(ids).numpy()


def make_ntm(**kwargs):
    """An NTM with random (non-initial) weights, so zero-initialised weights are exercised."""
    config = dict(vocab_size=VOCAB, num_topics=TOPICS, hidden_units=HIDDEN, latent_dim=LATENT)
    config.update(kwargs)
    ntm = NeuralTopicModel(**config)
    ntm.build((None, config["vocab_size"]))
    rng = np.random.default_rng(7)
    for w in ntm.weights:
        scale = 2.0 / ntm.topic_word_scale if w.name == "topic_word_weights" else 0.3
        w.assign(rng.normal(scale=scale, size=w.shape).astype("float32"))
    return ntm


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def numpy_forward(ntm, d):
    """Eval-mode reference in float64: (mu, log_var, t, beta) from the layer's weights."""
    w = {v.name: v.numpy().astype(np.float64) for v in ntm.weights}
    h = np.log1p(d.astype(np.float64))
    for i in range(len(ntm.hidden_units)):
        h = np.maximum(h @ w[f"encoder_{i}_kernel"] + w[f"encoder_{i}_bias"], 0.0)
    mu = h @ w["mean_kernel"] + w["mean_bias"]
    log_var = h @ w["log_variance_kernel"] + w["log_variance_bias"]
    t = softmax(mu @ w["topic_kernel"] + w["topic_bias"])
    beta = softmax(ntm.topic_word_scale * w["topic_word_weights"])
    return mu, log_var, t, beta


def numpy_diversity(beta, clip=True):
    unit = beta / np.linalg.norm(beta, axis=1, keepdims=True)
    cosine = np.abs(unit @ unit.T)
    cosine = np.clip(cosine, 0.0, 1.0 - 1e-6) if clip else np.minimum(cosine, 1.0)
    a = np.arccos(cosine)
    phi = a.mean()
    nu = ((a - phi) ** 2).mean()
    return phi, nu, phi - nu


def test_bag_of_words_matches_numpy():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 12, size=(4, 30))
    ids[:, 20:] = 0  # trailing padding
    ids[0, :5] = 3  # repeated id
    expected = np.zeros((4, 12), np.float32)
    for b in range(4):
        for i in ids[b]:
            if i:
                expected[b, i] += 1
    counts = BagOfWords(12)(tf.constant(ids, tf.int64))
    assert counts.dtype == tf.float32
    np.testing.assert_array_equal(counts.numpy(), expected)
    assert counts.numpy()[0, 3] >= 5 and not counts.numpy()[:, 0].any()


def test_shapes_and_simplex():
    ntm = make_ntm()
    d = random_counts(np.random.default_rng(1))
    out = ntm(d)
    assert set(out) == {"topics", "mean", "log_variance", "theta", "reconstruction", "kl"}
    for key, shape in [("topics", (6, TOPICS)), ("mean", (6, LATENT)),
                       ("log_variance", (6, LATENT)), ("theta", (6, LATENT)),
                       ("reconstruction", (6,)), ("kl", (6,))]:
        assert tuple(out[key].shape) == shape, key
    np.testing.assert_allclose(out["topics"].numpy().sum(-1), 1.0, atol=1e-6)
    beta = ntm.topic_word().numpy()
    assert beta.shape == (TOPICS, VOCAB) and (beta > 0).all()
    np.testing.assert_allclose(beta.sum(-1), 1.0, atol=1e-6)
    assert ntm.posterior(d).event_shape == [LATENT]
    assert NeuralTopicModel(VOCAB, TOPICS).latent_dim == TOPICS


def test_reconstruction_matches_numpy():
    ntm = make_ntm()
    d = random_counts(np.random.default_rng(2))
    out = ntm(d, training=False)
    mu, log_var, t, beta = numpy_forward(ntm, d)
    np.testing.assert_allclose(out["mean"].numpy(), mu, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["log_variance"].numpy(), log_var, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["topics"].numpy(), t, rtol=1e-4, atol=1e-6)
    expected = (d * np.log(t @ beta)).sum(-1)
    np.testing.assert_allclose(out["reconstruction"].numpy(), expected, rtol=1e-4)


def test_kl_matches_closed_form():
    mu0, sigma0 = 0.5, 2.0
    ntm = make_ntm(prior_mean=mu0, prior_stddev=sigma0)
    out = ntm(random_counts(np.random.default_rng(3)))
    mu = out["mean"].numpy().astype(np.float64)
    log_var = out["log_variance"].numpy().astype(np.float64)
    expected = 0.5 * (np.exp(log_var) / sigma0**2 + (mu - mu0) ** 2 / sigma0**2 - 1.0
                      - log_var + np.log(sigma0**2)).sum(-1)
    np.testing.assert_allclose(out["kl"].numpy(), expected, rtol=1e-4, atol=1e-6)
    # The default prior N(0, 1) gives a different value.
    default_kl = make_ntm()(random_counts(np.random.default_rng(3)))["kl"].numpy()
    assert np.abs(default_kl - expected).max() > 1e-2


def test_objective_is_the_weighted_negative_elbo_minus_diversity():
    """objective = sum_b w_b (KL_b - log p(d_b|t_b)) - lambda R sum_b w_b (eq. 17-18), from
    a NumPy forward pass; without weights, each example weighs 1/B."""
    ntm = make_ntm(prior_mean=0.5, prior_stddev=2.0, diversity_weight=0.3)
    d = random_counts(np.random.default_rng(10))
    mu, log_var, t, beta = numpy_forward(ntm, d)
    kl = 0.5 * (np.exp(log_var) / 4.0 + (mu - 0.5) ** 2 / 4.0 - 1.0 - log_var
                + np.log(4.0)).sum(-1)
    reconstruction = (d * np.log(t @ beta)).sum(-1)
    diversity = numpy_diversity(beta)[2]
    w = np.random.default_rng(11).uniform(0.1, 1.0, len(d))
    out = ntm(d)
    expected = (w * (kl - reconstruction)).sum() - 0.3 * diversity * w.sum()
    np.testing.assert_allclose(float(ntm.objective(out, tf.constant(w, tf.float32))),
                               expected, rtol=1e-4)
    np.testing.assert_allclose(float(ntm.objective(out)),
                               (kl - reconstruction).mean() - 0.3 * diversity, rtol=1e-4)
    given = ntm.objective(out, tf.constant(w, tf.float32), diversity=tf.constant(2.0))
    np.testing.assert_allclose(float(given), (w * (kl - reconstruction)).sum() - 0.6 * w.sum(),
                               rtol=1e-4)


def test_eval_uses_mean_and_training_samples():
    # Seeded: the draws' statistics are checked against bounds of about 4.5 standard errors
    # (0.016 for a mean, 0.011 for a standard deviation, at 4000 draws), which an unseeded
    # run still misses now and then.
    keras.utils.set_random_seed(2)
    ntm = make_ntm()
    d = np.repeat(random_counts(np.random.default_rng(4), batch=1), 4000, axis=0)
    a, b = ntm(d, training=False), ntm(d, training=False)
    np.testing.assert_array_equal(a["theta"].numpy(), b["theta"].numpy())
    np.testing.assert_array_equal(a["theta"].numpy(), a["mean"].numpy())
    np.testing.assert_array_equal(ntm(d, training=True, sample=False)["theta"].numpy(),
                                  a["mean"].numpy())
    s1, s2 = ntm(d, training=True), ntm(d, training=False, sample=True)
    assert np.abs(s1["theta"].numpy() - s2["theta"].numpy()).min() > 0
    # Standardised draws (theta - mu) / sigma are N(0, 1) per coordinate.
    z = (s1["theta"].numpy() - s1["mean"].numpy()) / np.exp(0.5 * s1["log_variance"].numpy())
    assert np.ptp(s1["log_variance"].numpy(), axis=0).max() < 1e-5  # same doc everywhere
    np.testing.assert_allclose(z.mean(0), 0.0, atol=0.07)
    np.testing.assert_allclose(z.std(0), 1.0, atol=0.05)
    assert not np.allclose(np.exp(0.5 * s1["log_variance"].numpy()[0]), 1.0, atol=0.05)
    # Sampled topics differ from the eval topics, and the reconstruction follows them.
    assert np.abs(s1["topics"].numpy() - a["topics"].numpy()).max() > 1e-3


def test_diversity_matches_paper_formula():
    ntm = make_ntm()
    _, _, expected = numpy_diversity(ntm.topic_word().numpy().astype(np.float64))
    assert float(ntm.diversity()) == pytest.approx(expected, rel=1e-4)

    # Orthogonal (disjoint one-hot-like) topics: a_ij = pi/2 off the diagonal, 0 on it (the
    # layer's clipped diagonal angle is arccos(1 - 1e-6) ~= 1.4e-3 instead).
    t = 4
    ortho = NeuralTopicModel(vocab_size=8, num_topics=t, hidden_units=())
    ortho.build((None, 8))
    logits = np.full((t, 8), -40.0, np.float32)
    logits[np.arange(t), 2 * np.arange(t)] = 40.0
    ortho.topic_word_weights.assign(logits / ortho.topic_word_scale)
    phi = (t - 1) / t * np.pi / 2
    nu = (t - 1) / t * (np.pi / 2 - phi) ** 2 + (1 / t) * phi**2
    assert numpy_diversity(ortho.topic_word().numpy(), clip=False)[2] == pytest.approx(phi - nu)
    clipped = numpy_diversity(ortho.topic_word().numpy().astype(np.float64))
    assert float(ortho.diversity()) == pytest.approx(clipped[2], abs=1e-4)
    assert float(ortho.diversity()) == pytest.approx(phi - nu, abs=2e-3)

    # Identical topics: every angle is (nearly) 0.
    ortho.topic_word_weights.assign(np.tile(logits[:1], (t, 1)) / ortho.topic_word_scale)
    assert abs(float(ortho.diversity())) < 2e-3


def test_gradients_finite_for_all_weights():
    ntm = make_ntm()
    d = random_counts(np.random.default_rng(5))
    with tf.GradientTape() as tape:
        loss = ntm.objective(ntm(d, training=True))
    grads = tape.gradient(loss, ntm.trainable_weights)
    assert len(grads) == 2 * len(HIDDEN) + 7
    for w, g in zip(ntm.trainable_weights, grads):
        assert g is not None, w.name
        assert np.isfinite(g.numpy()).all(), w.name
        assert np.abs(g.numpy()).max() > 0, w.name


def test_mirrored_strategy_train_step():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        ntm = NeuralTopicModel(VOCAB, TOPICS, hidden_units=(8,))
        ntm.build((None, VOCAB))
        optimizer = keras.optimizers.Adam(0.01)
    d = tf.constant(random_counts(np.random.default_rng(6)))

    def replica_step(counts):
        with tf.GradientTape() as tape:
            loss = ntm.objective(ntm(counts, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, ntm.trainable_weights),
                                      ntm.trainable_weights))
        return loss

    @tf.function
    def step(counts):
        return strategy.run(replica_step, args=(counts,))

    before = ntm.topic_word_weights.numpy()
    losses = [float(strategy.reduce("MEAN", step(d), axis=None)) for _ in range(3)]
    assert np.isfinite(losses).all()
    assert np.abs(ntm.topic_word_weights.numpy() - before).max() > 0


def planted_topic_fit(topic_word_scale: float, steps: int = 300):
    """Trains a 5-topic NTM with Adam(1e-3) on documents drawn from 3 planted topics; returns
    (final loss / initial loss, worst planted topic's best cosine with a learned topic)."""
    rng = np.random.default_rng(0)
    vocab, t_true, docs, length = 30, 3, 300, 40
    planted = np.zeros((t_true, vocab))
    for k in range(t_true):  # topic k puts its mass on words 1 + 9k .. 9 + 9k (id 0 = padding)
        planted[k, 1 + 9 * k : 10 + 9 * k] = rng.dirichlet(np.full(9, 2.0))
    props = rng.dirichlet(np.full(t_true, 0.2), size=docs)
    counts = np.stack([rng.multinomial(length, p @ planted) for p in props]).astype(np.float32)

    keras.utils.set_random_seed(0)
    # Five learned topics for three planted ones: with exactly three, an unlucky start can
    # merge two planted topics into one learned topic (a local optimum).
    ntm = NeuralTopicModel(vocab, 5, hidden_units=(32,), topic_word_scale=topic_word_scale)
    ntm.build((None, vocab))
    optimizer = keras.optimizers.Adam(1e-3)
    d = tf.constant(counts)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = ntm.objective(ntm(d, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, ntm.trainable_weights),
                                      ntm.trainable_weights))
        return loss

    losses = [float(step()) for _ in range(steps)]
    beta = ntm.topic_word().numpy()
    cosine = (planted / np.linalg.norm(planted, axis=1, keepdims=True)) @ (
        beta / np.linalg.norm(beta, axis=1, keepdims=True)).T
    return np.mean(losses[-20:]) / np.mean(losses[:5]), cosine.max(axis=1).min()


def test_learns_planted_topics():
    loss_ratio, worst_cosine = planted_topic_fit(topic_word_scale=30.0)
    assert loss_ratio < 0.85
    assert worst_cosine > 0.9


def test_topic_word_scale_speeds_up_topic_learning():
    """The same Adam steps with the plain parameterisation (scale 1) leave the topics blurred:
    the reason for the default scale of 30 (see the class docstring)."""
    _, plain = planted_topic_fit(topic_word_scale=1.0)
    _, scaled = planted_topic_fit(topic_word_scale=30.0)
    assert plain < 0.8 < scaled


def test_topic_word_scale_keeps_initial_topics_and_is_validated():
    betas = []
    for scale in (1.0, 30.0):
        keras.utils.set_random_seed(3)
        ntm = NeuralTopicModel(VOCAB, TOPICS, hidden_units=HIDDEN, topic_word_scale=scale)
        ntm.build((None, VOCAB))
        betas.append(ntm.topic_word().numpy())
    np.testing.assert_allclose(betas[0], betas[1], rtol=1e-5)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="topic_word_scale"):
            NeuralTopicModel(VOCAB, TOPICS, topic_word_scale=bad)


def test_config_round_trip_and_saved_model(tmp_path):
    ntm = make_ntm(prior_mean=0.3, prior_stddev=1.5, diversity_weight=0.2, topic_word_scale=4.0,
                   name="ntm")
    config = ntm.get_config()
    assert {k: config[k] for k in ("vocab_size", "num_topics", "hidden_units", "latent_dim",
                                   "prior_mean", "prior_stddev", "diversity_weight",
                                   "topic_word_scale")} == dict(
        vocab_size=VOCAB, num_topics=TOPICS, hidden_units=list(HIDDEN), latent_dim=LATENT,
        prior_mean=0.3, prior_stddev=1.5, diversity_weight=0.2, topic_word_scale=4.0)
    clone = NeuralTopicModel.from_config(config)
    clone.build((None, VOCAB))
    clone.set_weights(ntm.get_weights())
    assert clone.get_config() == config
    d = random_counts(np.random.default_rng(8))
    for key, value in ntm(d).items():
        np.testing.assert_allclose(clone(d)[key].numpy(), value.numpy(), rtol=1e-6, err_msg=key)

    ids = keras.Input((25,), dtype="int32")
    model = keras.Model(ids, NeuralTopicModel.from_config(config)(BagOfWords(VOCAB)(ids)))
    model.layers[-1].set_weights(ntm.get_weights())
    x = np.random.default_rng(9).integers(0, VOCAB, size=(6, 25)).astype("int32")
    expected = model(x, training=False)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(loaded.layers[-1], NeuralTopicModel)
    assert loaded.layers[-1].diversity_weight == 0.2
    got = loaded(x, training=False)
    assert set(got) == set(expected)
    for key in expected:
        np.testing.assert_allclose(got[key].numpy(), expected[key].numpy(), rtol=1e-6,
                                   err_msg=key)
