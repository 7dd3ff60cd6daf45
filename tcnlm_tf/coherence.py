"""Topic coherence by normalised pointwise mutual information (NPMI) over a reference corpus.

Both papers this project reproduces score topics this way: TCNLM (Wang et al. 2018, "Topic
Compositional Neural Language Model", AISTATS, section 5.2) and TDLM (Lau, Baldwin and Cohn
2017, "Topically Driven Neural Language Model", ACL) follow Lau, Newman and Baldwin (2014),
"Machine Reading Tea Leaves: Automatically Evaluating Topic Coherence and Topic Model Quality"
(EACL), which found NPMI to agree best with human ratings.

For one topic and its top-N words w_1..w_N (most probable first)::

    NPMI(wi, wj) = log(p(wi, wj) / (p(wi) p(wj))) / -log p(wi, wj)
    coherence    = mean of NPMI(wi, wj) over the N (N - 1) / 2 unordered pairs i < j

NPMI lies in [-1, 1]: 1 when the two words occur only together, about 0 when they are
independent, -1 in the limit of never co-occurring. Conventions at the edges (natural logs):

* ``p(wi, wj) = 0`` (the words never share a window, including a word absent from the reference
  corpus): NPMI = -1, the limit as the joint probability goes to 0. Lau et al.'s toolkit adds
  1e-12 inside the logs instead, which lands within 1e-2 of -1 for any realistic corpus.
* ``p(wi, wj) = 1`` (both words in every window): NPMI = 1, the limit of perfect co-occurrence.

Probabilities are window frequencies. Each document's sentences are concatenated into one
token stream and a window of ``window`` tokens slides over it one token at a time, so a
document of L >= window tokens has L - window + 1 windows; a document shorter than the window
is one window; ``window=0`` makes every document one window (document co-occurrence). Empty
documents have no window. Then ``p(w) = #windows containing w / #windows`` and
``p(wi, wj) = #windows containing both / #windows``. The default window of 20 tokens is the one
of Lau et al.'s toolkit (github.com/jhlau/topic_interpretability).

The coherence of a topic set for N is the mean over its topics; the papers report the mean over
N in {5, 10, 15, 20} (:func:`coherence_summary`).
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Iterable, Sequence

import numpy as np

from tcnlm_tf.errors import UserError

DEFAULT_NS = (5, 10, 15, 20)

# Overlapping interval pairs materialised at once in count_cooccurrences (bounds memory).
_PAIR_CHUNK = 1 << 20


@dataclasses.dataclass
class CooccurrenceCounts:
    """Window counts of a fixed word list over a reference corpus. W = len(words)."""

    words: list[str]            # the words counted; list index = word id
    word_windows: np.ndarray    # [W] int64, windows containing each word
    pair_windows: np.ndarray    # [W, W] int64, windows containing both; symmetric,
                                # diagonal = word_windows
    num_windows: int            # total windows in the reference corpus


def count_cooccurrences(documents: Iterable[Sequence[Sequence[str]]], words: Iterable[str],
                        window: int = 20) -> CooccurrenceCounts:
    """Count the windows of ``documents`` containing each of ``words`` and each pair of them.

    ``documents`` is a corpus (a document is a list of sentences, a sentence a list of tokens);
    ``words`` is typically the union of all topics' top words (duplicates are dropped, first
    occurrence kept). ``window`` is the sliding-window length in tokens, 0 for whole documents.
    A word that never occurs in the corpus gets zero counts.

    Only occurrences of the counted words matter, so the work is proportional to them, not to
    the number of windows: for one occurrence at position q of a document with n windows of
    length m, the windows containing it are the interval [max(0, q - m + 1), min(q, n - 1)] of
    window starts. A word's occurrences give a union of such intervals (merged into disjoint
    ones); the windows containing words a and b number the summed overlaps of a's intervals with
    b's. Window starts are numbered across the corpus, one document after another, so intervals
    of different documents never overlap (they may touch; merging those keeps the union).
    """
    if window < 0:
        raise UserError(f"coherence window must be >= 0 tokens (0 = whole documents), "
                        f"got {window}; pass a non-negative window")
    vocab = list(dict.fromkeys(words))
    index = {w: i for i, w in enumerate(vocab)}
    num_words = len(vocab)

    token_ids: list[int] = []
    lengths: list[int] = []
    for document in documents:
        ids = [index.get(token, -1) for token in itertools.chain.from_iterable(document)]
        token_ids.extend(ids)
        lengths.append(len(ids))
    length = np.asarray(lengths, np.int64)
    if length.sum() == 0:
        raise UserError("the reference corpus for topic coherence has no tokens; "
                        "pass a corpus with at least one non-empty document")

    # Per document: window length m, number of windows n, first window's corpus-wide number.
    span = np.where((window == 0) | (length < window), length, window)
    num_doc_windows = np.where(length > 0, length - span + 1, 0)
    first_window = np.cumsum(num_doc_windows) - num_doc_windows
    num_windows = int(num_doc_windows.sum())

    # One interval of window starts [start, end) per occurrence of a counted word.
    ids = np.asarray(token_ids, np.int64)
    doc = np.repeat(np.arange(len(length)), length)
    position = np.arange(len(ids)) - np.repeat(np.cumsum(length) - length, length)
    hit = ids >= 0
    word, doc, position = ids[hit], doc[hit], position[hit]
    start = first_window[doc] + np.maximum(0, position - span[doc] + 1)
    end = first_window[doc] + np.minimum(position, num_doc_windows[doc] - 1) + 1

    # Merge each word's overlapping or touching intervals (both ends grow with position).
    order = np.lexsort((start, word))
    word, start, end = word[order], start[order], end[order]
    opens = np.ones(len(word), bool)
    opens[1:] = (word[1:] != word[:-1]) | (start[1:] > end[:-1])
    closes = np.roll(opens, -1)   # an interval closes where the next opens; opens[0] is True
    word, start, end = word[opens], start[opens], end[closes]

    word_windows = np.bincount(word, weights=end - start, minlength=num_words)
    pair_windows = _interval_overlaps(word, start, end, num_words)
    pair_windows = pair_windows + pair_windows.T
    pair_windows[np.diag_indices(num_words)] = word_windows
    return CooccurrenceCounts(words=vocab,
                              word_windows=np.rint(word_windows).astype(np.int64),
                              pair_windows=np.rint(pair_windows).astype(np.int64),
                              num_windows=num_windows)


def _interval_overlaps(word: np.ndarray, start: np.ndarray, end: np.ndarray,
                       num_words: int) -> np.ndarray:
    """[W, W] summed overlap lengths of intervals i, j with start_i <= start_j, i != j.

    Each unordered pair of intervals is counted once, at (word_i, word_j) for the one that
    starts first, so the symmetric total is the result plus its transpose. Intervals of the same
    word are disjoint and contribute nothing.
    """
    total = np.zeros(num_words * num_words)
    if len(start) == 0:
        return total.reshape(num_words, num_words)
    order = np.argsort(start, kind="stable")
    word, start, end = word[order], start[order], end[order]
    first = np.arange(len(start))
    # Intervals first+1 .. stop-1 start before interval `first` ends, so they overlap it.
    partners = np.searchsorted(start, end, side="left") - first - 1
    cumulative = np.cumsum(partners)
    bounds = np.unique(np.searchsorted(
        cumulative, np.arange(_PAIR_CHUNK, cumulative[-1], _PAIR_CHUNK), side="right"))
    for lo, hi in itertools.pairwise([0, *bounds.tolist(), len(start)]):
        count = partners[lo:hi]
        i = np.repeat(first[lo:hi], count)
        j = i + 1 + np.arange(len(i)) - np.repeat(np.cumsum(count) - count, count)
        overlap = np.minimum(end[i], end[j]) - start[j]
        total += np.bincount(word[i] * num_words + word[j], weights=overlap,
                             minlength=num_words * num_words)
    return total.reshape(num_words, num_words)


def npmi_matrix(counts: CooccurrenceCounts) -> np.ndarray:
    """[W, W] NPMI between every pair of counted words (module conventions at the edges).

    Symmetric; the diagonal is 1 for words that occur and -1 for words that never do.
    """
    n = float(counts.num_windows)
    log_joint = np.log(np.maximum(counts.pair_windows, 1) / n)
    log_word = np.log(np.maximum(counts.word_windows, 1) / n)
    pmi = log_joint - log_word[:, None] - log_word[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        npmi = pmi / -log_joint
    npmi[counts.pair_windows == counts.num_windows] = 1.0
    npmi[counts.pair_windows == 0] = -1.0
    return npmi


def _validate_topics(top_words: Sequence[Sequence[str]], ns: Sequence[int]) -> None:
    if not ns or min(ns) < 2:
        raise UserError(f"topic coherence needs N >= 2 top words per topic, got N = {list(ns)}; "
                        f"pass --top-n/ns values >= 2")
    if not top_words:
        raise UserError("topic coherence got no topics; pass at least one topic's top words")
    for k, topic in enumerate(top_words):
        if len(topic) < max(ns):
            raise UserError(f"topic {k} has {len(topic)} top words but coherence at "
                            f"N = {max(ns)} needs {max(ns)}; lower --top-n/ns or extract more "
                            f"top words per topic")


def _scores(top_words: Sequence[Sequence[str]], counts: CooccurrenceCounts,
            npmi: np.ndarray, n: int) -> list[float]:
    index = {w: i for i, w in enumerate(counts.words)}
    upper = np.triu_indices(n, k=1)
    scores = []
    for topic in top_words:
        missing = [w for w in topic[:n] if w not in index]
        if missing:
            raise ValueError(f"words {missing[:5]} were not counted; build the counts with "
                             f"count_cooccurrences(..., words=<all topics' top words>)")
        ids = [index[w] for w in topic[:n]]
        scores.append(float(npmi[np.ix_(ids, ids)][upper].mean()))
    return scores


def topic_coherence(top_words: Sequence[Sequence[str]], counts: CooccurrenceCounts,
                    n: int) -> list[float]:
    """Per topic, the mean NPMI over unordered pairs of its first ``n`` words.

    ``top_words[k]`` lists topic k's words, most probable first; every one of the first ``n``
    must be among ``counts.words`` (ValueError otherwise). Words counted but absent from the
    reference corpus score -1 with every other word.
    """
    _validate_topics(top_words, [n])
    return _scores(top_words, counts, npmi_matrix(counts), n)


def coherence_summary(top_words: Sequence[Sequence[str]], counts: CooccurrenceCounts,
                      ns: Sequence[int] = DEFAULT_NS) -> dict:
    """Coherence of a topic set at each N in ``ns`` and averaged over them, as the papers report.

    Returns ``{"per_n": {n: mean over topics}, "mean": mean of per_n over ns,
    "per_topic": [per topic, mean over ns]}``.
    """
    _validate_topics(top_words, ns)
    npmi = npmi_matrix(counts)
    table = np.array([_scores(top_words, counts, npmi, n) for n in ns])   # [len(ns), topics]
    return {"per_n": {int(n): float(row.mean()) for n, row in zip(ns, table)},
            "mean": float(table.mean()),
            "per_topic": table.mean(axis=0).tolist()}
