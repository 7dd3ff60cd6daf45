"""Training examples read from a split's arrays one batch at a time (numpy).

A split's arrays (:class:`tcnlm_tf.data.loading.SplitArrays`) may be memory maps of a corpus
larger than memory, so nothing here holds a whole split's tokens: each layout keeps an index
of its examples (a few numbers per sentence, window or document) and builds a batch from the
arrays when asked (``take``, ``batch``), reading only the tokens of that batch.
:mod:`tcnlm_tf.data.pipeline` turns the batches into ``tf.data`` datasets; its module
docstring says what each mode's examples are.

The **stream with ends** of a split, E, is every sentence's words followed by ``<eos>``;
sentence ``s`` starts at ``G[s] = sent_offsets[s] + s`` in it. A sentence-mode sequence, a
document's windows and the stream of stream mode are all ``<eos>`` followed by a stretch of
E (:func:`stream_tokens`), or (stream mode, ``line_end`` ``none``) of the words alone.
"""
from __future__ import annotations

import dataclasses
import heapq
from typing import Iterator

import numpy as np

from tcnlm_tf.data.permutation import shuffled_order
from tcnlm_tf.data.sharded_array import chunks, searchsorted

EOS_ID = 2   # tcnlm_tf.data.vocab.LM_SPECIALS = (<pad>, <unk>, <eos>)
PAD_ID = 0


def index_dtype(bound: int) -> np.dtype:
    """int32 for indices below ``bound`` where they fit, else int64."""
    return np.dtype(np.int32 if bound < 2 ** 31 else np.int64)


def _with_zero(counts: np.ndarray) -> np.ndarray:
    """``[0, c0, c0 + c1, ...]``: where each of a run of units begins, then the total."""
    return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])


def sentence_at(split, positions: np.ndarray, lo: np.ndarray | None = None,
                hi: np.ndarray | None = None) -> np.ndarray:
    """The sentence holding each position of the stream with ends: ``s`` with
    ``G[s] <= q < G[s + 1]`` (a bisection over the sentence offsets, within ``[lo, hi)``
    where given: a document's sentences)."""
    offsets = split.sent_offsets
    positions = np.asarray(positions, np.int64)
    lo = np.zeros(positions.shape, np.int64) if lo is None else np.array(lo, np.int64)
    hi = (np.full(positions.shape, split.num_sentences, np.int64) if hi is None
          else np.array(hi, np.int64))
    while True:
        open_ = hi - lo > 1
        if not open_.any():
            return lo
        mid = np.where(open_, (lo + hi) // 2, lo)
        below = offsets[mid] + mid <= positions
        lo = np.where(open_ & below, mid, lo)
        hi = np.where(open_ & ~below, mid, hi)


def stream_tokens(split, positions: np.ndarray, lo: np.ndarray | None = None,
                  hi: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The tokens at ``positions`` (int64, any shape, each in ``[0, len(E))``) of the
    stream with ends, and the sentence of each (``lo``/``hi``: as :func:`sentence_at`)."""
    sentences = sentence_at(split, positions.ravel(), None if lo is None else lo.ravel(),
                            None if hi is None else hi.ravel()).reshape(positions.shape)
    offsets = split.sent_offsets
    start = offsets[sentences.ravel()].reshape(positions.shape)
    length = offsets[sentences.ravel() + 1].reshape(positions.shape) - start
    within = positions - start - sentences
    word = within < length
    ids = split.lm_ids[np.where(word, start + within, 0).ravel()].reshape(positions.shape)
    return np.where(word, ids, EOS_ID).astype(np.int32), sentences


def document_of(split, sentences: np.ndarray) -> np.ndarray:
    """The document of each sentence (index in the split)."""
    return searchsorted(split.doc_offsets, sentences, "right") - 1


class SentenceExamples:
    """Sentence-mode sequences as an index: sentence ``s`` (``<eos> w1 .. wn <eos>``) is cut
    into ``ceil((n + 1) / L)`` sequences of at most L targets, examples ``first[s]`` to
    ``first[s + 1] - 1``. :meth:`take` builds any of them from the split's arrays; the
    whole-split properties (``inputs``, ``targets``, ``context``, ``documents``,
    ``sentences``) build them all, for small splits."""

    def __init__(self, split, seq_len: int):
        self.split, self.seq_len = split, seq_len
        #: [S+1]: the first example of each sentence, then the number of examples (int32
        #: where they fit, as the epoch's permutation of them where it is an array)
        self.dtype = index_dtype(len(split.lm_ids) + split.num_sentences)
        self.first = np.zeros(split.num_sentences + 1, self.dtype)
        done = 0
        for piece in _offset_pieces(split.sent_offsets):
            lengths = np.diff(piece)
            chunks = -(-(lengths + 1) // seq_len)
            self.first[done + 1:done + 1 + len(chunks)] = np.cumsum(chunks) + self.first[done]
            done += len(chunks)
            split.release()               # the offsets' pages this piece mapped

    def __len__(self) -> int:
        return int(self.first[-1])

    def locate(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each example's sentence and which of its pieces it is (int64)."""
        index = np.asarray(index, np.int64)
        sentences = np.searchsorted(self.first, index, "right") - 1
        return sentences, index - self.first[sentences]

    def order(self, shuffle_seed: int | None):
        """The examples in order, or permuted with ``shuffle_seed``
        (:func:`~tcnlm_tf.data.permutation.shuffled_order`: at :attr:`dtype`, the permutation
        ``np.random.default_rng(shuffle_seed).permutation(len(self))``, up to
        :data:`~tcnlm_tf.data.permutation.EXPLICIT_LIMIT` examples; a permutation computed
        per slice beyond). Read in slices: ``order[a:b]``."""
        if shuffle_seed is None:
            return np.arange(len(self), dtype=self.dtype)
        return shuffled_order(len(self), shuffle_seed, self.dtype)

    def take(self, index: np.ndarray) -> dict[str, np.ndarray]:
        """Examples ``index`` [B]: ``inputs``/``targets`` [B, L] int32, ``context`` [B, 4]
        int64 (in ``topic_ids`` coordinates: document start, sentence start, sentence end,
        document end), ``documents`` and ``sentences`` [B] int64."""
        split, length = self.split, self.seq_len
        index = np.asarray(index, np.int64)
        sentences, piece = self.locate(index)
        documents = document_of(split, sentences)
        offsets = split.sent_offsets
        start, end = offsets[sentences], offsets[sentences + 1]
        # position p of <eos> w1 .. wn <eos>: 0 and n + 1 are <eos>, p the word w_p
        position = piece[:, None] * length + np.arange(length + 1)[None, :]
        words = end - start
        word = (position >= 1) & (position <= words[:, None])
        ids = split.lm_ids[np.where(word, start[:, None] + position - 1, 0).ravel()]
        tokens = np.where(word, ids.reshape(position.shape), EOS_ID).astype(np.int32)
        real = position[:, 1:] <= words[:, None] + 1            # the sequence's targets
        topic = split.topic_offsets
        context = np.stack([topic[split.doc_offsets[documents]], topic[sentences],
                            topic[sentences + 1], topic[split.doc_offsets[documents + 1]]],
                           axis=1).astype(np.int64)
        return {"inputs": np.where(real, tokens[:, :-1], PAD_ID),
                "targets": np.where(real, tokens[:, 1:], PAD_ID),
                "context": context, "documents": documents, "sentences": sentences}

    def weights(self, sentences: np.ndarray, documents: np.ndarray,
                weighting: str) -> np.ndarray:
        """``context_weight`` [B] float32 of examples of ``sentences`` (of ``documents``):
        1 / (the examples of its sentence), or with ``weighting`` ``document``, 1 / (the
        examples of its document)."""
        if weighting == "sentence":
            count = self.first[sentences + 1] - self.first[sentences]
        else:
            doc = self.split.doc_offsets
            count = self.first[doc[documents + 1]] - self.first[doc[documents]]
        return (1.0 / count).astype(np.float32)

    def _whole(self, name: str) -> np.ndarray:
        return self.take(np.arange(len(self)))[name]

    inputs = property(lambda self: self._whole("inputs"))
    targets = property(lambda self: self._whole("targets"))
    context = property(lambda self: self._whole("context"))
    documents = property(lambda self: self._whole("documents"))
    sentences = property(lambda self: self._whole("sentences"))


def _offset_pieces(offsets) -> Iterator[np.ndarray]:
    """An offset array [S+1] in overlapping pieces (each piece's last entry begins the
    next), so that ``np.diff`` of each is a run of lengths: one shard's at a time."""
    carry = None
    for piece in chunks(offsets):
        if carry is not None:
            piece = np.concatenate([[carry], piece])
        if len(piece):
            yield piece
            carry = piece[-1]


def sentence_examples(split, seq_len: int) -> SentenceExamples:
    """Cut every sentence of ``split`` into sequences of at most ``seq_len`` targets."""
    return SentenceExamples(split, seq_len)


def sentence_lanes(examples: SentenceExamples, lanes: int,
                   shuffle_seed: int | None = None) -> dict[str, np.ndarray]:
    """Sentence mode with ``long_sentences`` carry: the sentences (in the order they come,
    or shuffled with ``shuffle_seed``) each go whole to the currently shortest of ``lanes``
    lanes (the first such), their pieces one after the other. Returns ``index`` [K, lanes]
    int64, the example in each slot (``len(examples)``: none, a padding row), and ``reset``
    [K, lanes] float32, 1 where a slot starts a sentence or is empty."""
    first = examples.first
    units = len(first) - 1
    chunks = np.diff(first)
    order = (np.arange(units) if shuffle_seed is None
             else np.random.default_rng(shuffle_seed).permutation(units))
    lane_of = np.zeros(units, np.int64)
    start_of = np.zeros(units, np.int64)
    heap = [(0, lane) for lane in range(lanes)]
    for unit in order:
        length, lane = heapq.heappop(heap)
        lane_of[unit], start_of[unit] = lane, length
        heapq.heappush(heap, (length + int(chunks[unit]), lane))
    num_batches = max(1, max(length for length, _ in heap))
    index = np.full((num_batches, lanes), len(examples), np.int64)
    every = np.arange(len(examples))
    row = np.repeat(start_of, chunks) + every - np.repeat(first[:-1], chunks)
    index[row, np.repeat(lane_of, chunks)] = every
    starts = np.zeros(len(examples) + 1, bool)
    starts[first[:-1]] = True
    starts[-1] = True
    return {"index": index, "reset": starts[index].astype(np.float32)}


def shuffled_documents(num_documents: int, seed: int) -> np.ndarray:
    """For the ``shuffled`` ablation: the other document each document's examples read,
    the documents permuted with ``seed`` in a single cycle (none keeps its own when there
    are two or more)."""
    order = np.random.default_rng(seed).permutation(num_documents)
    other = np.empty_like(order)
    other[order] = np.roll(order, 1)
    return other


def document_rows(split, documents: np.ndarray) -> np.ndarray:
    """The context rows [B, 4] of whole ``documents``: (start, start, start, end) in
    ``topic_ids`` coordinates."""
    topic = split.topic_offsets
    start = topic[split.doc_offsets[documents]]
    end = topic[split.doc_offsets[documents + 1]]
    return np.stack([start, start, start, end], axis=1).astype(np.int64)


@dataclasses.dataclass
class LocalSource:
    """What the context fields of B examples are made from, with the text of only their
    documents: ``topic_ids`` [U+1] int32 (those documents' topic ids, one after the other,
    then a 0), ``rows`` [B, 4] and ``sentences`` [B, 2] int64 and ``sentence_starts`` [S']
    int64 in its coordinates (see :class:`tcnlm_tf.data.pipeline.ContextSource`)."""

    rows: np.ndarray
    topic_ids: np.ndarray
    sentences: np.ndarray
    sentence_starts: np.ndarray


def local_source(split, rows: np.ndarray, context_documents: np.ndarray,
                 sentences: np.ndarray, own_documents: np.ndarray,
                 real: np.ndarray | None = None) -> LocalSource:
    """:class:`LocalSource` of B examples whose ``rows`` [B, 4] (split coordinates) lie in
    ``context_documents`` [B] and whose ``sentences`` [B, 2] (the document's first
    sentence, the example's) are of ``own_documents`` [B]; ``real`` [B] bool: False for
    padding rows, which get empty rows."""
    documents, inverse = np.unique(np.concatenate([context_documents, own_documents]),
                                   return_inverse=True)
    first = split.doc_offsets[documents]
    end = split.doc_offsets[documents + 1]
    topic = split.topic_offsets
    start, stop = topic[first], topic[end]
    base = _with_zero(stop - start)
    sentence_base = _with_zero(end - first + 1)
    ids = [split.topic_ids[a:b] for a, b in zip(start, stop)]
    starts = [topic[a:b + 1] - s + t for a, b, s, t in zip(first, end, start, base)]
    own = inverse[len(context_documents):]
    context = inverse[:len(context_documents)]
    local_rows = rows - start[context, None] + base[context, None]
    local_sentences = sentences - first[own, None] + sentence_base[own, None]
    if real is not None:
        local_rows = np.where(real[:, None], local_rows, 0)
        local_sentences = np.where(real[:, None], local_sentences, 0)
    return LocalSource(
        rows=local_rows.astype(np.int64),
        topic_ids=np.concatenate(ids + [np.zeros(1)]).astype(np.int32),
        sentences=local_sentences.astype(np.int64),
        sentence_starts=np.concatenate(starts + [np.zeros(0)]).astype(np.int64))


def document_source(split, documents: np.ndarray) -> LocalSource:
    """:class:`LocalSource` of whole ``documents`` [B] (nothing left out; the sentences
    ``(first, end)``: the context of a sentence that would follow each)."""
    documents = np.asarray(documents, np.int64)
    bounds = np.stack([split.doc_offsets[documents], split.doc_offsets[documents + 1]],
                      axis=1).astype(np.int64)
    return local_source(split, document_rows(split, documents), documents, bounds, documents)


class DocumentLanes:
    """Document mode: documents (in ``order``) laid end to end in ``lanes`` lanes of windows
    of L targets; batch k holds window k of every lane (:meth:`batch`).

    Exact layout (``balanced=False``, for evaluation): each document goes whole to the
    currently shortest lane, so every window is read with its document's full history and
    the perplexity does not depend on the number of lanes. One long document can keep one
    lane running long after the others have ended, though.

    Balanced layout (``balanced=True``, for training): the windows of all documents, in
    order, are cut into ``lanes`` contiguous runs of equal length. Without it, one 7,000-word
    APNEWS document fills the last ~200 batches of every epoch as a batch of one lane, and
    those ~200 updates on a single document ruin the model. The price: a document split
    between two lanes continues from a zero state in the second one (at most ``lanes - 1``
    windows per epoch)."""

    def __init__(self, split, seq_len: int, lanes: int, order: np.ndarray | None = None,
                 balanced: bool = False):
        self.split, self.seq_len, self.lanes, self.balanced = split, seq_len, lanes, balanced
        self.order = np.arange(split.num_documents) if order is None else np.asarray(order)
        first = split.doc_offsets[self.order]
        end = split.doc_offsets[self.order + 1]
        offsets = split.sent_offsets
        targets = offsets[end] - offsets[first] + (end - first)    # words and <eos>s
        windows = -(-targets // seq_len)
        if balanced:
            #: where each document's windows begin among all, in order
            self.begins = _with_zero(windows)
            total = int(self.begins[-1])
            self.per_lane = max(1, -(-total // lanes))
            self.num_batches = max(1, min(self.per_lane, total))
            return
        lane_of = np.zeros(len(windows), np.int64)
        start_of = np.zeros(len(windows), np.int64)
        heap = [(0, lane) for lane in range(lanes)]
        for position, count in enumerate(windows):
            length, lane = heapq.heappop(heap)
            lane_of[position], start_of[position] = lane, length
            heapq.heappush(heap, (length + int(count), lane))
        self.num_batches = max(length for length, _ in heap)
        #: per lane, its documents (positions in ``order``) and where their windows begin
        self.lane_documents = [np.flatnonzero(lane_of == lane) for lane in range(lanes)]
        self.lane_begins = [np.append(start_of[docs], start_of[docs[-1]] + windows[docs[-1]])
                            if len(docs) else np.zeros(1, np.int64)
                            for docs in self.lane_documents]

    def _slots(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Batch k's slot of each lane: the position in ``order`` of its document (-1: an
        empty slot), which of the document's windows it is, and whether the lane starts
        there without a state to carry in."""
        position = np.full(self.lanes, -1, np.int64)
        window = np.zeros(self.lanes, np.int64)
        if self.balanced:
            total = int(self.begins[-1])
            g = np.arange(self.lanes) * self.per_lane + k
            inside = (k < self.per_lane) & (g < total)
            found = np.searchsorted(self.begins, g[inside], "right") - 1
            position[inside] = found
            window[inside] = g[inside] - self.begins[found]
            return position, window, np.full(self.lanes, k == 0)
        for lane, (docs, begins) in enumerate(zip(self.lane_documents, self.lane_begins)):
            if k < begins[-1]:
                found = int(np.searchsorted(begins, k, "right")) - 1
                position[lane], window[lane] = docs[found], k - begins[found]
        return position, window, np.zeros(self.lanes, bool)

    def batch(self, k: int, lanes: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Batch ``k`` (its ``lanes`` only, where given): ``inputs``/``targets`` [lanes, L]
        int32, ``reset`` [lanes] float32 (1 where a document starts, the lane starts inside
        one, or the slot is empty) and ``document`` [lanes, L] int32 (each target's
        document, -1 at padding)."""
        split, length = self.split, self.seq_len
        position, window, lane_start = self._slots(k)
        if lanes is not None:
            position, window, lane_start = position[lanes], window[lanes], lane_start[lanes]
        used = position >= 0
        documents = np.where(used, self.order[np.maximum(position, 0)], 0)
        first = split.doc_offsets[documents]
        end = split.doc_offsets[documents + 1]
        begin = split.sent_offsets[first] + first                  # G[first]
        size = split.sent_offsets[end] + end - begin               # the document's targets
        # position p of the document's <eos> E[begin:begin + size]: 0 is <eos>, p is E[p - 1]
        p = window[:, None] * length + np.arange(length + 1)[None, :]
        inside = used[:, None] & (p >= 1) & (p <= size[:, None])
        q = np.where(inside, begin[:, None] + p - 1, 0)
        lo = np.broadcast_to(first[:, None], p.shape)
        hi = np.broadcast_to(end[:, None], p.shape)
        tokens, _ = stream_tokens(split, q, lo, hi)
        tokens = np.where(p == 0, EOS_ID, tokens)
        real = used[:, None] & (p[:, 1:] <= size[:, None])
        targets = np.where(real, tokens[:, 1:], PAD_ID)
        reset = ((window == 0) | lane_start | ~used).astype(np.float32)
        return {"inputs": np.where(real, tokens[:, :-1], PAD_ID).astype(np.int32),
                "targets": targets.astype(np.int32), "reset": reset,
                "document": np.where(real, documents[:, None], -1).astype(np.int32)}


class StreamLanes:
    """Stream mode: the split as one stream (``<eos>`` then E, or with ``line_end``
    ``none`` the words alone) in ``lanes`` contiguous lanes of equal length, each cut into
    windows of L targets; batch k holds window k of every lane (:meth:`batch`)."""

    def __init__(self, split, seq_len: int, lanes: int, line_end: str = "eos"):
        self.split, self.seq_len, self.lanes = split, seq_len, lanes
        self.ends = line_end == "eos"
        self.targets = len(split.lm_ids) + (split.num_sentences if self.ends else 0)
        self.per_lane = max(1, -(-self.targets // lanes))
        self.num_batches = -(-self.per_lane // seq_len)

    def batch(self, k: int, lanes: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Batch ``k`` (its ``lanes`` only, where given): ``inputs``/``targets`` [lanes, L]
        int32 (0-padded at the end of the last lanes), ``reset`` [lanes] (1 in the first
        batch only) and ``document`` [lanes, L] int32 (each target's document, -1 at
        padding)."""
        split, length = self.split, self.seq_len
        lane = (np.arange(self.lanes) if lanes is None else np.asarray(lanes))[:, None]
        start = lane * self.per_lane
        end = np.minimum(start + self.per_lane, self.targets)
        a = start + k * length + np.arange(length)[None, :]       # the target's stream index
        real = a < end
        # stream index i: 0 is the leading <eos>, i >= 1 is position i - 1 of the text
        positions = np.where(real, a, 0)
        if self.ends:
            targets, sentences = stream_tokens(split, positions)
            inputs, _ = stream_tokens(split, np.maximum(positions - 1, 0))
        else:
            targets = split.lm_ids[positions.ravel()].reshape(positions.shape)
            inputs = split.lm_ids[np.maximum(positions - 1, 0).ravel()].reshape(a.shape)
            sentences = searchsorted(split.sent_offsets, positions.ravel(),
                                     "right").reshape(a.shape) - 1
        inputs = np.where(a == 0, EOS_ID, inputs)
        documents = document_of(split, sentences.ravel()).reshape(a.shape)
        return {"inputs": np.where(real, inputs, PAD_ID).astype(np.int32),
                "targets": np.where(real, targets, PAD_ID).astype(np.int32),
                "reset": np.full(len(lane), 1.0 if k == 0 else 0.0, np.float32),
                "document": np.where(real, documents, -1).astype(np.int32)}
