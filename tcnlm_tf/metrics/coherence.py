"""Topic coherence by normalised pointwise mutual information (NPMI) over a reference corpus.

Both papers this project reproduces score topics this way: TCNLM (Wang et al. 2018, "Topic
Compositional Neural Language Model", AISTATS, section 5.2) and TDLM (Lau, Baldwin and Cohn
2017, "Topically Driven Neural Language Model", ACL, section 5) follow Lau, Newman and
Baldwin (2014), "Machine Reading Tea Leaves: Automatically Evaluating Topic Coherence and Topic
Model Quality" (EACL), which found NPMI to agree best with human ratings. TDLM's footnote 13
names the toolkit that computed its coherence: github.com/jhlau/topic_interpretability
(``ComputeWordCount.py`` and ``ComputeObservedCoherence.py``). TCNLM's Table 4 takes its LDA,
NTM and TDLM rows from the TDLM paper and does not say which code scored its own rows.

For one topic and its top-N words w_1..w_N (most probable first)::

    NPMI(wi, wj) = log(p(wi, wj) / (p(wi) p(wj))) / -log p(wi, wj)
    coherence    = mean of NPMI(wi, wj) over the N (N - 1) / 2 unordered pairs i < j

Probabilities are window frequencies: ``p(w) = #windows containing w / #windows`` and
``p(wi, wj) = #windows containing both / #windows``. Each document's sentences are concatenated
into one token stream (the toolkit reads a document per line). Two conventions
(:data:`CONVENTIONS`) differ in which windows there are and in the pairs never seen together:

* ``"toolkit"`` (the default), Lau et al.'s toolkit: a window of ``window`` tokens slides over
  the document one token at a time *from before its first token to past its last*, so a
  document of L tokens has L + window - 1 windows (the first and last window - 1 of them are
  its prefixes and suffixes) and every occurrence lies in exactly ``window`` of them. A pair
  that never shares a window, or a word absent from the reference corpus, scores NPMI = 0.
  The window of 20 tokens is the toolkit's.
* ``"limit"``: only whole windows, L - window + 1 of them (a document shorter than the window
  is one window), as gensim's sliding windows; a pair never seen together scores NPMI = -1,
  the limit as the joint probability goes to 0. A ``coherence.json`` without a
  ``"convention"`` was scored this way.

In both, ``window=0`` makes every document one window (document co-occurrence), empty
documents have no window (the corpus readers drop blank lines; the toolkit would count
window - 1 windows for one, or 1 with window 0), and a pair in every window scores NPMI = 1
(the limit of perfect co-occurrence; the toolkit divides by zero there, which its windows
never reach for two different words and window > 0: a document's first window holds one
token). Natural logarithms: NPMI is a ratio of logarithms, so the toolkit's base 10 gives
the same value.

Two more differences from the toolkit. It reads ``_`` in a topic word as joining the words
of a collocation (it counts those words in sequence, never a corpus token holding ``_``),
where here a word is the token itself: this matters only for a top word with ``_`` (APNEWS
has a few such tokens, e.g. ``coach_leach``). And it leaves a pair of equal words out of a
topic's mean, where here every pair counts: never met here, as topic vocabularies hold each
word once.

Zero scores matter on a small reference corpus: many pairs of rare top words never share a
window, so ``"limit"`` pulls a topic of rare words towards -1 where the toolkit leaves it
near 0.

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

#: the window and edge conventions (module docstring); the first is the default
CONVENTIONS = ("toolkit", "limit")


def convention_of(record: dict) -> str:
    """The convention of a ``coherence.json`` (or a record's ``coherence``): one that names
    none was scored under ``"limit"``."""
    return record.get("convention", "limit")


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
    convention: str = CONVENTIONS[0]    # how windows were laid and never-seen pairs score


#: tokens of the reference corpus counted at once (whole documents: a chunk ends after the
#: document that reaches it), so that memory does not grow with the corpus
CHUNK_TOKENS = 1 << 20


def count_cooccurrences(documents: Iterable[Sequence[Sequence[str]]], words: Iterable[str],
                        window: int = 20, convention: str = CONVENTIONS[0],
                        chunk_tokens: int = CHUNK_TOKENS) -> CooccurrenceCounts:
    """Count the windows of ``documents`` containing each of ``words`` and each pair of them.

    ``documents`` is a corpus (a document is a list of sentences, a sentence a list of
    tokens), read once, in chunks of about ``chunk_tokens`` tokens of whole documents (any
    iterable: a corpus larger than memory streams through); ``words`` is typically the
    union of all topics' top words (duplicates are dropped, first occurrence kept).
    ``window`` is the sliding-window length in tokens, 0 for whole documents;
    ``convention`` (one of :data:`CONVENTIONS`) lays the windows as the module docstring says.
    A word that never occurs in the corpus gets zero counts.

    Only occurrences of the counted words matter, so the work is proportional to them, not to
    the number of windows: for one occurrence at position q of a document, the windows
    containing it are an interval of window numbers: under ``"toolkit"`` (window m > 0, window
    k holding the tokens of k - m + 1 .. k that exist) [q, q + m - 1], under ``"limit"`` (n
    whole windows of length m, window k starting at token k) [max(0, q - m + 1), min(q, n - 1)].
    A word's occurrences give a union of such intervals (merged into disjoint ones); the windows
    containing words a and b number the summed overlaps of a's intervals with b's. No window
    spans two documents, so each chunk's counts are added to the others'.
    """
    if window < 0:
        raise UserError(f"coherence window must be >= 0 tokens (0 = whole documents), "
                        f"got {window}; pass a non-negative window")
    if convention not in CONVENTIONS:
        raise UserError(f"unknown coherence convention {convention!r}; pass one of "
                        f"{', '.join(CONVENTIONS)}")
    vocab = list(dict.fromkeys(words))
    index = {w: i for i, w in enumerate(vocab)}
    num_words = len(vocab)
    word_windows = np.zeros(num_words)
    pair_windows = np.zeros((num_words, num_words))
    num_windows = 0
    for token_ids, lengths in _chunks(documents, index, chunk_tokens):
        words_in, pairs_in, windows_in = _count_chunk(token_ids, lengths, num_words, window,
                                                      convention)
        word_windows += words_in
        pair_windows += pairs_in
        num_windows += windows_in
    if num_windows == 0:
        raise UserError("the reference corpus for topic coherence has no tokens; "
                        "pass a corpus with at least one non-empty document")
    pair_windows = pair_windows + pair_windows.T
    pair_windows[np.diag_indices(num_words)] = word_windows
    return CooccurrenceCounts(words=vocab,
                              word_windows=np.rint(word_windows).astype(np.int64),
                              pair_windows=np.rint(pair_windows).astype(np.int64),
                              num_windows=num_windows, convention=convention)


def _chunks(documents: Iterable[Sequence[Sequence[str]]], index: dict[str, int],
            chunk_tokens: int):
    """The corpus in chunks of whole documents: (each token's word id, -1 for the words
    not counted, [T] int64; each document's length [D] int64)."""
    token_ids: list[int] = []
    lengths: list[int] = []
    for document in documents:
        ids = [index.get(token, -1) for token in itertools.chain.from_iterable(document)]
        token_ids.extend(ids)
        lengths.append(len(ids))
        if len(token_ids) >= chunk_tokens:
            yield np.asarray(token_ids, np.int64), np.asarray(lengths, np.int64)
            token_ids, lengths = [], []
    if lengths:
        yield np.asarray(token_ids, np.int64), np.asarray(lengths, np.int64)


def _count_chunk(ids: np.ndarray, length: np.ndarray, num_words: int, window: int,
                 convention: str) -> tuple[np.ndarray, np.ndarray, int]:
    """One chunk's window counts: [W] windows holding each word, [W, W] the summed
    overlaps of pairs (one triangle, :func:`_interval_overlaps`) and the chunk's windows."""
    # Per document: window length m, number of windows n, first window's number.
    partial = convention == "toolkit" and window > 0
    span = np.where((window == 0) | (length < window), length, window)
    num_doc_windows = np.where(length > 0, length + window - 1 if partial else length - span + 1,
                               0)
    first_window = np.cumsum(num_doc_windows) - num_doc_windows

    # One interval of window starts [start, end) per occurrence of a counted word.
    doc = np.repeat(np.arange(len(length)), length)
    position = np.arange(len(ids)) - np.repeat(np.cumsum(length) - length, length)
    hit = ids >= 0
    word, doc, position = ids[hit], doc[hit], position[hit]
    if partial:
        start = first_window[doc] + position
        end = start + window
    else:
        start = first_window[doc] + np.maximum(0, position - span[doc] + 1)
        end = first_window[doc] + np.minimum(position, num_doc_windows[doc] - 1) + 1

    # Merge each word's overlapping or touching intervals (both ends grow with position).
    order = np.lexsort((start, word))
    word, start, end = word[order], start[order], end[order]
    opens = np.ones(len(word), bool)
    opens[1:] = (word[1:] != word[:-1]) | (start[1:] > end[:-1])
    closes = np.roll(opens, -1)   # an interval closes where the next opens; opens[0] is True
    word, start, end = word[opens], start[opens], end[closes]
    return (np.bincount(word, weights=end - start, minlength=num_words),
            _interval_overlaps(word, start, end, num_words), int(num_doc_windows.sum()))


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
    """[W, W] NPMI between every pair of counted words, at the edges as ``counts.convention``
    says (module docstring).

    Symmetric; the diagonal is 1 for words that occur, and for words that never do 0
    (``"toolkit"``) or -1 (``"limit"``).
    """
    n = float(counts.num_windows)
    log_joint = np.log(np.maximum(counts.pair_windows, 1) / n)
    log_word = np.log(np.maximum(counts.word_windows, 1) / n)
    pmi = log_joint - log_word[:, None] - log_word[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        npmi = pmi / -log_joint
    npmi[counts.pair_windows == counts.num_windows] = 1.0
    npmi[counts.pair_windows == 0] = 0.0 if counts.convention == "toolkit" else -1.0
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
    reference corpus score 0 (``"toolkit"``) or -1 (``"limit"``) with every other word.
    """
    _validate_topics(top_words, [n])
    return _scores(top_words, counts, npmi_matrix(counts), n)


#: the top-N sizes of topic diversity: Dieng, Ruiz and Blei's (2020, "Topic Modeling in
#: Embedding Spaces") 25, and the 10 words a topic is usually shown with
DIVERSITY_NS = (10, 25)


def topic_diversity(top_words: Sequence[Sequence[str]], n: int) -> float:
    """The share of distinct words among the top ``n`` words of all topics: 1 when no two
    topics share a top word, 1/K when all K topics list the same ones (Dieng et al. 2020's
    topic diversity at ``n`` = 25)."""
    if not top_words or any(len(topic) < n for topic in top_words):
        raise UserError(f"topic diversity at N = {n} needs {n} top words of every topic; "
                        "extract more top words per topic")
    return len({word for topic in top_words for word in topic[:n]}) / (n * len(top_words))


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
