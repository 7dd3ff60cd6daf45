"""Tests of NPMI topic coherence over sliding windows (tcnlm_tf.metrics.coherence), under both
of its conventions: Lau et al.'s toolkit (the default) and the "limit" one."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tcnlm_tf.errors import UserError
from tcnlm_tf.metrics.coherence import (coherence_summary, count_cooccurrences, npmi_matrix,
                                        topic_coherence, topic_diversity)

# Document 1 is the stream "a b c a d": with a window of 3 its whole windows are {a,b,c},
# {b,c,a} and {c,a,d}. Document 2, "b d", is shorter than the window, so it is one whole window
# {b,d}. The toolkit's windows also overhang the ends: see test_toolkit_hand_computed_window_3.
TINY = [[["a", "b", "c"], ["a", "d"]], [["b", "d"]]]


def window_contents(tokens, window, convention):
    """Every window of one document's tokens, enumerated as the definition says: the toolkit's
    window k (k = 1 .. L + window - 1) holds tokens[max(0, k - window):k]; the whole windows
    are tokens[s:s + span] for every start s."""
    if window > 0 and convention == "toolkit":
        return [tokens[max(0, k - window):k] for k in range(1, len(tokens) + window)]
    span = len(tokens) if window == 0 or len(tokens) < window else window
    return [tokens[s:s + span] for s in range(len(tokens) - span + 1)]


def naive_counts(documents, words, window, convention="limit"):
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
        for contents in window_contents(tokens, window, convention):
            present = sorted({index[t] for t in contents if t in index})
            num_windows += 1
            word_windows[present] += 1
            pair_windows[np.ix_(present, present)] += 1
    return word_windows, pair_windows, num_windows


def toolkit_topic_score(topic, word_windows, pair_windows, num_windows, index):
    """A topic's coherence as the toolkit's observed-coherence step scores it: base-10
    logarithms, and 0 for a pair where either word or the pair was never counted."""
    scores = []
    for i, first in enumerate(topic):
        for second in topic[i + 1:]:
            a, b = index[first], index[second]
            joint, p_a, p_b = pair_windows[a, b], word_windows[a], word_windows[b]
            if joint == 0 or p_a == 0 or p_b == 0:
                scores.append(0.0)
                continue
            pmi = math.log10(joint * num_windows / (p_a * p_b))
            scores.append(pmi / -math.log10(joint / num_windows))
    return sum(scores) / len(scores)


def test_toolkit_hand_computed_window_3():
    counts = count_cooccurrences(TINY, ["a", "b", "c", "d", "e"], window=3)
    # Document 1's windows: [a] [a b] [a b c] [b c a] [c a d] [a d] [d] (5 + 3 - 1 = 7);
    # document 2's: [b] [b d] [b d] [d] (2 + 3 - 1 = 4). Every occurrence is in 3 windows.
    assert counts.convention == "toolkit" and counts.num_windows == 11
    np.testing.assert_array_equal(counts.word_windows, [6, 6, 3, 6, 0])
    np.testing.assert_array_equal(counts.pair_windows, [[6, 3, 3, 2, 0],
                                                        [3, 6, 2, 2, 0],
                                                        [3, 2, 3, 1, 0],
                                                        [2, 2, 1, 6, 0],
                                                        [0, 0, 0, 0, 0]])
    npmi = npmi_matrix(counts)
    assert npmi[0, 1] == pytest.approx(math.log(33 / 36) / math.log(11 / 3))
    assert npmi[2, 3] == pytest.approx(math.log(11 / 18) / math.log(11))
    assert npmi[0, 4] == 0.0 and npmi[4, 4] == 0.0          # absent word: the toolkit's 0
    [ae] = topic_coherence([["a", "e", "b"]], counts, n=2)
    assert ae == 0.0
    [abe] = topic_coherence([["a", "b", "e"]], counts, n=3)
    assert abe == pytest.approx(math.log(33 / 36) / math.log(11 / 3) / 3)


def test_limit_hand_computed_window_3():
    counts = count_cooccurrences(TINY, ["a", "b", "c", "d", "e"], window=3, convention="limit")
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


@pytest.mark.parametrize("convention", ["toolkit", "limit"])
def test_window_zero_counts_whole_documents(convention):
    counts = count_cooccurrences(TINY, ["a", "b", "c", "d"], window=0, convention=convention)
    # Document 1 is one window {a,b,c,d}, document 2 one window {b,d}.
    assert counts.num_windows == 2
    np.testing.assert_array_equal(counts.word_windows, [1, 2, 1, 2])
    np.testing.assert_array_equal(counts.pair_windows[1], [1, 2, 1, 2])
    npmi = npmi_matrix(counts)
    assert npmi[1, 3] == 1.0                                  # b and d in every window: p = 1
    assert npmi[0, 1] == pytest.approx(0.0, abs=1e-12)        # log((1/2) / (1/2 * 1)) = 0


def test_long_limit_window_is_one_window_per_document():
    for window in (5, 6, 100):
        long_window = count_cooccurrences(TINY, ["a", "b", "c", "d"], window=window,
                                          convention="limit")
        whole = count_cooccurrences(TINY, ["a", "b", "c", "d"], window=0, convention="limit")
        np.testing.assert_array_equal(long_window.pair_windows, whole.pair_windows)
        assert long_window.num_windows == whole.num_windows


@pytest.mark.parametrize("convention", ["toolkit", "limit"])
@pytest.mark.parametrize("seed", range(40))
def test_matches_window_enumeration(seed, convention):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(rng.integers(2, 10))]
    documents = [[[vocab[k] for k in rng.integers(0, len(vocab), rng.integers(0, 9))]
                  for _ in range(rng.integers(0, 4))] for _ in range(rng.integers(1, 6))]
    documents.append([vocab[:1]])                     # at least one token in the corpus
    words = list(rng.choice(vocab + ["absent"], rng.integers(1, 8)))
    window = int(rng.integers(0, 8))
    word_windows, pair_windows, num_windows = naive_counts(documents, words, window, convention)
    # whole, and streamed once through in chunks of a few tokens (of whole documents)
    for chunk_tokens in (1 << 20, int(rng.integers(1, 12))):
        counts = count_cooccurrences(iter(documents), words, window, convention,
                                     chunk_tokens=chunk_tokens)
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
    for convention, never in (("limit", -1.0), ("toolkit", 0.0)):
        counts = count_cooccurrences(documents, ["x", "y", "p", "q", "r"], window=0,
                                     convention=convention)
        npmi = npmi_matrix(counts)
        assert npmi[2, 3] == pytest.approx(1.0)                 # p, q: always together
        assert npmi[0, 2] == pytest.approx(1.0)                 # x, p: always together
        assert npmi[0, 4] == never and npmi[2, 4] == never      # r never with x or p
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
    topics = [words[20 * k:20 * (k + 1)] for k in range(50)]
    for convention, windows in (("toolkit", 400 + 20 - 1), ("limit", 400 - 20 + 1)):
        counts = count_cooccurrences(documents, words, convention=convention)
        assert counts.num_windows == 500 * windows
        assert counts.pair_windows.shape == (1000, 1000)
        assert np.all(counts.word_windows <= counts.num_windows)
        assert -1 <= coherence_summary(topics, counts)["mean"] <= 1


def test_user_errors():
    with pytest.raises(UserError, match="window"):
        count_cooccurrences(TINY, ["a"], window=-1)
    with pytest.raises(UserError, match="unknown coherence convention 'gensim'"):
        count_cooccurrences(TINY, ["a"], convention="gensim")
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


@pytest.mark.parametrize("seed", range(12))
def test_toolkit_coherence_matches_its_scoring_step(seed):
    """Random corpora with absent words and pairs never seen together: each topic's score
    under the default convention equals the toolkit's scoring of explicitly enumerated
    windows, for every N."""
    rng = np.random.default_rng(100 + seed)
    vocab = [f"w{i}" for i in range(40)]
    documents = [[[vocab[k] for k in rng.integers(0, len(vocab), rng.integers(1, 30))]
                  for _ in range(rng.integers(1, 4))] for _ in range(rng.integers(3, 30))]
    pool = vocab + ["absent1", "absent2"]
    topics = [list(rng.choice(pool, 8, replace=False)) for _ in range(4)]
    words = [w for topic in topics for w in topic]
    window = int(rng.integers(0, 12))
    counts = count_cooccurrences(documents, words, window)
    word_windows, pair_windows, num_windows = naive_counts(documents, words, window, "toolkit")
    index = {w: i for i, w in enumerate(dict.fromkeys(words))}
    for n in (2, 5, 8):
        expected = [toolkit_topic_score(t[:n], word_windows, pair_windows, num_windows, index)
                    for t in topics]
        assert topic_coherence(topics, counts, n) == pytest.approx(expected, abs=1e-12)


def test_topic_diversity_is_the_distinct_share_of_the_top_words():
    assert topic_diversity([["a", "b"], ["c", "d"]], 2) == 1.0
    assert topic_diversity([["a", "b"], ["a", "b"], ["a", "b"]], 2) == pytest.approx(1 / 3)
    assert topic_diversity([["a", "b", "x"], ["b", "c", "y"]], 2) == 0.75   # only the top 2
    with pytest.raises(UserError, match="needs 3 top words"):
        topic_diversity([["a", "b", "c"], ["a", "b"]], 3)
