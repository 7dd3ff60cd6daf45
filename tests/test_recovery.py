"""Tests of matching learned topics to the synthetic corpus's true topics
(tcnlm_tf.metrics.recovery)."""
from __future__ import annotations

import numpy as np
import pytest

from tcnlm_tf.errors import UserError
from tcnlm_tf.metrics.recovery import topic_recovery

WORDS = [f"word{i}" for i in range(200)]


def sharp_topics(rng, num_topics, vocab_size=len(WORDS), concentration=0.05):
    return rng.dirichlet(np.full(vocab_size, concentration), size=num_topics)


def test_permuted_identical_topics_are_recovered_exactly():
    rng = np.random.default_rng(0)
    true = sharp_topics(rng, 6)
    perm = rng.permutation(6)                         # learned topic t is true topic perm[t]
    result = topic_recovery(true, WORDS, true[perm], WORDS)
    assert [(k, t) for k, t, _ in result["matched"]] == [(k, int(np.argsort(perm)[k]))
                                                        for k in range(6)]
    assert all(cos == pytest.approx(1.0) for _, _, cos in result["matched"])
    assert result["mean_matched_cosine"] == pytest.approx(1.0)
    assert (result["shared_vocab_size"], result["num_true"], result["num_learned"]) == (200, 6, 6)


def test_columns_are_aligned_by_word_not_position():
    rng = np.random.default_rng(1)
    true = sharp_topics(rng, 4)
    order = rng.permutation(len(WORDS))
    # The learned vocabulary has <pad> first, the true words shuffled, and a word of its own.
    learned_words = ["<pad>"] + [WORDS[i] for i in order] + ["extra"]
    learned = np.concatenate([rng.random((4, 1)), true[:, order], rng.random((4, 1))], axis=1)
    learned /= learned.sum(axis=1, keepdims=True)
    result = topic_recovery(true, WORDS, learned, learned_words)
    assert result["shared_vocab_size"] == len(WORDS)
    assert [(k, t) for k, t, _ in result["matched"]] == [(k, k) for k in range(4)]
    assert result["mean_matched_cosine"] == pytest.approx(1.0)
    # Aligned by position instead, the same topics would look unrelated.
    by_position = topic_recovery(true, WORDS, learned[:, 1:-1], WORDS)
    assert by_position["mean_matched_cosine"] < 0.5


def test_words_outside_the_shared_vocabulary_are_dropped():
    true = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    learned = np.array([[0.9, 0.05, 0.05], [0.0, 0.0, 1.0]])   # columns <pad>, b, a
    result = topic_recovery(true, ["a", "b", "the"], learned, ["<pad>", "b", "a"])
    assert result["shared_vocab_size"] == 2
    # Learned topic 0 restricted to (a, b) is (0.05, 0.05): the same direction as true topic 0.
    # True topic 1 is all "the", which the learned vocabulary lacks: on (a, b) it is zero,
    # so its cosine with learned topic 1 (all "a") is 0.
    assert result["matched"] == [(0, 0, pytest.approx(1.0)), (1, 1, 0.0)]
    assert result["mean_matched_cosine"] == pytest.approx(0.5)


def test_noisy_copies_score_high_but_below_one():
    rng = np.random.default_rng(2)
    true = sharp_topics(rng, 5)
    perm = rng.permutation(5)
    noisy = true[perm] + 0.3 * sharp_topics(rng, 5)
    noisy /= noisy.sum(axis=1, keepdims=True)
    result = topic_recovery(true, WORDS, noisy, WORDS)
    assert [t for _, t, _ in result["matched"]] == np.argsort(perm).tolist()
    assert 0.85 < result["mean_matched_cosine"] < 0.999


def test_random_topics_score_low():
    rng = np.random.default_rng(3)
    result = topic_recovery(sharp_topics(rng, 5), WORDS, sharp_topics(rng, 5), WORDS)
    assert result["mean_matched_cosine"] < 0.3


def test_more_learned_than_true_topics():
    rng = np.random.default_rng(4)
    true = sharp_topics(rng, 3)
    learned = np.concatenate([sharp_topics(rng, 4), true[[2, 0, 1]]])   # true k at 4 + (k+1)%3
    result = topic_recovery(true, WORDS, learned, WORDS)
    assert (result["num_true"], result["num_learned"]) == (3, 7)
    assert [(k, t) for k, t, _ in result["matched"]] == [(0, 5), (1, 6), (2, 4)]
    assert result["mean_matched_cosine"] == pytest.approx(1.0)


def test_fewer_learned_than_true_topics():
    rng = np.random.default_rng(5)
    true = sharp_topics(rng, 5)
    result = topic_recovery(true, WORDS, true[[3, 1]], WORDS)
    assert (result["num_true"], result["num_learned"]) == (5, 2)
    assert [(k, t) for k, t, _ in result["matched"]] == [(1, 1), (3, 0)]
    assert result["mean_matched_cosine"] == pytest.approx(1.0)


def test_user_errors():
    with pytest.raises(UserError, match="share no vocabulary"):
        topic_recovery(np.ones((2, 2)), ["a", "b"], np.ones((2, 2)), ["c", "d"])
    with pytest.raises(UserError, match="shape"):
        topic_recovery(np.ones((2, 3)), ["a", "b"], np.ones((2, 2)), ["a", "b"])
    with pytest.raises(UserError, match="more than once"):
        topic_recovery(np.ones((2, 2)), ["a", "b"], np.ones((2, 2)), ["a", "a"])
    with pytest.raises(UserError, match="no topics"):
        topic_recovery(np.ones((2, 2)), ["a", "b"], np.ones((0, 2)), ["a", "b"])
