"""Tests of NPMI topic coherence over sliding windows (tcnlm_tf.coherence)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tcnlm_tf.coherence import (coherence_summary, count_cooccurrences, npmi_matrix,
                                topic_coherence)
from tcnlm_tf.errors import UserError

# Document 1 is the stream "a b c a d": with a window of 3 its windows are {a,b,c}, {b,c,a} and
# {c,a,d}. Document 2, "b d", is shorter than the window, so it is one window {b,d}.
TINY = [[["a", "b", "c"], ["a", "d"]], [["b", "d"]]]


def naive_counts(documents, words, window):
    """Enumerate every window explicitly: the definition, with no cleverness."""
    words = list(dict.fromkeys(words))
    index = {w: i for i, w in enumerate(words)}
    word_windows = np.zeros(len(words), np.int64)
    pair_windows = np.zeros((len(words), len(words)), np.int64)
    num_windows = 0
    for document in documents:
        tokens = [t for sentence in document for t in sentence]
        if not tokens:
            continue
        span = len(tokens) if window == 0 or len(tokens) < window else window
        for s in range(len(tokens) - span + 1):
            present = sorted({index[t] for t in tokens[s:s + span] if t in index})
            num_windows += 1
            word_windows[present] += 1
            pair_windows[np.ix_(present, present)] += 1
    return word_windows, pair_windows, num_windows


def test_hand_computed_window_3():
    counts = count_cooccurrences(TINY, ["a", "b", "c", "d", "e"], window=3)
    # Windows: w1 {a,b,c}, w2 {a,b,c}, w3 {a,c,d}, w4 {b,d}; "e" never occurs.
    assert counts.num_windows == 4
    assert counts.words == ["a", "b", "c", "d", "e"]
    np.testing.assert_array_equal(counts.word_windows, [3, 3, 3, 2, 0])
    np.testing.assert_array_equal(counts.pair_windows, [[3, 2, 3, 1, 0],
                                                        [2, 3, 2, 1, 0],
                                                        [3, 2, 3, 1, 0],
                                                        [1, 1, 1, 2, 0],
                                                        [0, 0, 0, 0, 0]])
    npmi = npmi_matrix(counts)
    p_a = p_b = p_c = 3 / 4
    p_d = 2 / 4

    def by_hand(p_ij, p_i, p_j):
        return math.log(p_ij / (p_i * p_j)) / -math.log(p_ij)

    assert npmi[0, 1] == pytest.approx(by_hand(2 / 4, p_a, p_b))       # = log(8/9) / log 2
    assert npmi[0, 1] == pytest.approx(math.log(8 / 9) / math.log(2))
    assert npmi[0, 2] == pytest.approx(1.0)                             # a and c always together
    assert npmi[1, 3] == pytest.approx(by_hand(1 / 4, p_b, p_d))       # = log(2/3) / log 4
    assert npmi[2, 3] == pytest.approx(by_hand(1 / 4, p_c, p_d))
    assert npmi[0, 4] == -1.0 and npmi[4, 4] == -1.0        # absent word: never co-occurs

    [abc, ae] = topic_coherence([["a", "b", "c"], ["a", "e", "b"]], counts, n=2)
    assert abc == pytest.approx(math.log(8 / 9) / math.log(2))
    assert ae == -1.0
    [abc] = topic_coherence([["a", "b", "c"]], counts, n=3)
    assert abc == pytest.approx((2 * math.log(8 / 9) / math.log(2) + 1.0) / 3)


def test_window_zero_counts_whole_documents():
    counts = count_cooccurrences(TINY, ["a", "b", "c", "d"], window=0)
    # Document 1 is one window {a,b,c,d}, document 2 one window {b,d}.
    assert counts.num_windows == 2
    np.testing.assert_array_equal(counts.word_windows, [1, 2, 1, 2])
    np.testing.assert_array_equal(counts.pair_windows[1], [1, 2, 1, 2])
    npmi = npmi_matrix(counts)
    assert npmi[1, 3] == 1.0                                  # b and d in every window: p = 1
    assert npmi[0, 1] == pytest.approx(0.0, abs=1e-12)        # log((1/2) / (1/2 * 1)) = 0


def test_long_window_is_one_window_per_document():
    for window in (5, 6, 100):
        long_window = count_cooccurrences(TINY, ["a", "b", "c", "d"], window=window)
        whole = count_cooccurrences(TINY, ["a", "b", "c", "d"], window=0)
        np.testing.assert_array_equal(long_window.pair_windows, whole.pair_windows)
        assert long_window.num_windows == whole.num_windows


@pytest.mark.parametrize("seed", range(40))
def test_matches_window_enumeration(seed):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(rng.integers(2, 10))]
    documents = [[[vocab[k] for k in rng.integers(0, len(vocab), rng.integers(0, 9))]
                  for _ in range(rng.integers(0, 4))] for _ in range(rng.integers(1, 6))]
    documents.append([vocab[:1]])                     # at least one token in the corpus
    words = list(rng.choice(vocab + ["absent"], rng.integers(1, 8)))
    window = int(rng.integers(0, 8))
    counts = count_cooccurrences(documents, words, window)
    word_windows, pair_windows, num_windows = naive_counts(documents, words, window)
    assert counts.num_windows == num_windows
    np.testing.assert_array_equal(counts.word_windows, word_windows)
    np.testing.assert_array_equal(counts.pair_windows, pair_windows)


def test_perfect_never_and_independent_co_occurrence():
    rng = np.random.default_rng(0)
    documents = []
    for has_x, has_y in (rng.random((4000, 2)) < 0.5).tolist():
        tokens = ["filler"] * 3 + ["x"] * has_x + ["y"] * has_y
        tokens += ["p", "q"] if has_x else ["r"]    # p, q only ever together; r never with x
        documents.append([tokens])
    counts = count_cooccurrences(documents, ["x", "y", "p", "q", "r"], window=0)
    npmi = npmi_matrix(counts)
    assert npmi[2, 3] == pytest.approx(1.0)                 # p, q: always together
    assert npmi[0, 2] == pytest.approx(1.0)                 # x, p: always together
    assert npmi[0, 4] == -1.0 and npmi[2, 4] == -1.0        # r never with x or p
    assert abs(npmi[0, 1]) < 0.05                           # x, y independent


def test_symmetry_and_order_invariance():
    rng = np.random.default_rng(1)
    vocab = [f"w{i}" for i in range(30)]
    documents = [[[vocab[k] for k in rng.integers(0, 30, 40)]] for _ in range(50)]
    counts = count_cooccurrences(documents, vocab[:12], window=10)
    npmi = npmi_matrix(counts)
    np.testing.assert_array_equal(counts.pair_windows, counts.pair_windows.T)
    np.testing.assert_array_equal(np.diag(counts.pair_windows), counts.word_windows)
    np.testing.assert_allclose(npmi, npmi.T)
    assert np.all((npmi >= -1 - 1e-12) & (npmi <= 1 + 1e-12))
    topic = vocab[:12]
    [forward] = topic_coherence([topic], counts, n=12)
    [backward] = topic_coherence([topic[::-1]], counts, n=12)
    assert forward == pytest.approx(backward)


def planted_corpus(rng, topics, noise, num_docs=300, length=60):
    """Each document draws most tokens from one planted topic's words, the rest from noise."""
    documents = []
    for _ in range(num_docs):
        topic = topics[rng.integers(len(topics))]
        tokens = [topic[k] for k in rng.integers(0, len(topic), length)]
        for position in np.flatnonzero(rng.random(length) < 0.3):
            tokens[position] = noise[rng.integers(len(noise))]
        documents.append([tokens[:length // 2], tokens[length // 2:]])
    return documents


def test_planted_topics_are_more_coherent_than_random_ones():
    rng = np.random.default_rng(2)
    topics = [[f"t{k}w{i}" for i in range(20)] for k in range(5)]
    noise = [f"noise{i}" for i in range(200)]
    documents = planted_corpus(rng, topics, noise)
    shuffled = rng.permutation([w for topic in topics for w in topic]).tolist()
    random_topics = [shuffled[20 * k:20 * (k + 1)] for k in range(5)]
    counts = count_cooccurrences(documents, shuffled)
    planted = coherence_summary(topics, counts)
    mixed = coherence_summary(random_topics, counts)
    assert planted["mean"] > 0.3
    assert planted["mean"] > mixed["mean"] + 0.3
    assert min(planted["per_topic"]) > max(mixed["per_topic"])


def test_summary_structure():
    rng = np.random.default_rng(3)
    topics = [[f"t{k}w{i}" for i in range(20)] for k in range(3)]
    counts = count_cooccurrences(planted_corpus(rng, topics, ["n1", "n2"], num_docs=30),
                                 [w for topic in topics for w in topic], window=20)
    summary = coherence_summary(topics, counts, ns=(5, 10, 15, 20))
    assert list(summary["per_n"]) == [5, 10, 15, 20]
    for n, value in summary["per_n"].items():
        assert value == pytest.approx(np.mean(topic_coherence(topics, counts, n)))
    assert summary["mean"] == pytest.approx(np.mean(list(summary["per_n"].values())))
    assert len(summary["per_topic"]) == 3
    assert np.mean(summary["per_topic"]) == pytest.approx(summary["mean"])


def test_random_corpus_of_200k_tokens_runs():
    rng = np.random.default_rng(4)
    vocab = [f"w{i}" for i in range(3000)]
    tokens = rng.integers(0, len(vocab), 200_000)
    documents = [[[vocab[k] for k in tokens[d:d + 400][s:s + 20]] for s in range(0, 400, 20)]
                 for d in range(0, len(tokens), 400)]
    words = rng.choice(vocab, 1000, replace=False).tolist()
    counts = count_cooccurrences(documents, words)
    assert counts.num_windows == 500 * (400 - 20 + 1)
    assert counts.pair_windows.shape == (1000, 1000)
    assert np.all(counts.word_windows <= counts.num_windows)
    topics = [words[20 * k:20 * (k + 1)] for k in range(50)]
    assert -1 <= coherence_summary(topics, counts)["mean"] <= 1


def test_user_errors():
    with pytest.raises(UserError, match="window"):
        count_cooccurrences(TINY, ["a"], window=-1)
    with pytest.raises(UserError, match="no tokens"):
        count_cooccurrences([[[]], []], ["a"])
    counts = count_cooccurrences(TINY, ["a", "b", "c", "d"], window=3)
    with pytest.raises(UserError, match="--top-n"):
        coherence_summary([["a", "b", "c", "d"]], counts, ns=(2, 5))
    with pytest.raises(UserError, match="--top-n"):
        topic_coherence([["a", "b"], ["a"]], counts, n=2)
    with pytest.raises(UserError, match=">= 2"):
        topic_coherence([["a", "b"]], counts, n=1)
    with pytest.raises(UserError, match="no topics"):
        coherence_summary([], counts)


def test_uncounted_word_is_a_programming_error():
    counts = count_cooccurrences(TINY, ["a", "b"], window=3)
    with pytest.raises(ValueError, match="not counted"):
        topic_coherence([["a", "c"]], counts, n=2)
