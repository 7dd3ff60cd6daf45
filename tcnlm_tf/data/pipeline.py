"""Per-sentence and per-document training examples, and the ``tf.data`` pipelines over them.

Every batch is a dict of tensors (B = batch size, L = sequence length, M = ``max_bow``):

``inputs``  int32 [B, L]    LM input ids; each sentence starts with ``<eos>``
``targets`` int32 [B, L]    the next word at each position (``<eos>`` ends each sentence)
``weights`` float32 [B, L]  1 for a real target, 0 for padding
``bow``     int32 [B, M]    (sentence mode, for models whose ``context_inputs`` name it)
                            topic-vocabulary ids of the sentence's document *minus that
                            sentence*, in document order, first M kept (Wang et al. 2018 §5:
                            "all the sentences in a paragraph, excluding the one being
                            predicted"; Lau et al. 2017 §3.2 and their m3), 0-padded
``preceding`` int32 [B, N, W] (sentence mode, as ``bow``; N and W from the model's
                            ``context_options`` ``sentences`` and ``words``) the topic-vocabulary
                            ids of the N sentences before the example's sentence in its
                            document, one row each (row N-1: the sentence just before; rows
                            before the document's first sentence all 0), first W ids of each,
                            0-padded (Wang and Cho 2016's bags of preceding sentences)
``context_weight`` float32 [B] (sentence mode, as ``bow``) the share of the example's unit
                            that it stands for, by which a model weights its per-example
                            document-context terms (e.g. a topic model's ELBO): with the
                            model's ``context_options`` ``weighting`` = ``sentence``,
                            1 / (the sequences its sentence was cut into), so a long sentence
                            counts its term once; ``document``: 1 / (the sequences of its
                            document), so each document counts once per epoch; 1 for whole
                            documents (evaluation, serving)
``reset``   float32 [B]     (document mode; sentence mode with ``long_sentences`` carry) 1
                            where a lane starts a new document (sentence), so the carried
                            LSTM state is zeroed there
``document`` int32 [B, L]   (only where asked for: ``with_documents``) the index in the split
                            of the document each target belongs to, -1 at padding, so that
                            an evaluation can sum the NLL of each document

The context protocol (``--context``, :data:`CONTEXTS`) says what a sentence-mode example's
``bow`` holds: ``rest``, the document minus the sentence, later sentences included (both
papers' protocol, Wang et al. 2018 §5, Lau et al. 2017 §3.2), or ``preceding``, only the
document's sentences before it, the text a document-level LSTM has read at that point
(Zheng, Vafa and Blei 2023's evaluation). ``preceding`` is causal in either protocol. An
ablation at evaluation, ``shuffled`` (:data:`SHUFFLED`), gives each example the whole of
another document of the split instead.

Sentence mode (both papers' protocol): each sentence ``w1..wn`` becomes the token string
``<eos> w1 .. wn <eos>``; sentences longer than L targets are cut into several sequences
(Lau et al. 2017 §3), each target predicted exactly once. With ``long_sentences`` ``reset``
(:data:`LONG_SENTENCES`; the TDLM authors' code) every sequence is an example of its own,
read from a zero state, and batches are B examples in a shuffled order. With ``carry``
(:func:`sentence_lanes`) the sentences are laid out in B lanes, the pieces of a sentence in
consecutive batches of one lane, with ``reset`` 1 where a sentence starts: the model carries
its state from one piece to the next, as if the sentence were one sequence.

Document mode: each document becomes ``<eos> s1 <eos> s2 <eos> ..``, cut into windows of L
targets (the last one padded), and documents are laid end to end in B lanes; batch k holds
window k of every lane, and the model carries its state from one batch to the next.
Stream mode (the PyTorch word-language-model example, the SDLM paper's protocol): the whole
split, documents in corpus order, is one token string ``<eos> s1 <eos> s2 <eos> ..``, cut into
B contiguous lanes of equal length (``batchify``) and each lane into windows of L targets (BPTT
length); the state is carried through a lane and zeroed only at its start. With ``line_end``
``none`` (:data:`LINE_ENDS`; the SDLM authors' ``data.py``, whose lines end in their own
"。") no ``<eos>`` follows a line: the string is ``<eos> s1 s2 ..``, the leading ``<eos>``
only an input, so the targets are exactly the split's words.

All modes predict exactly the same tokens (stream mode with ``line_end`` ``eos``, the
default), so their perplexities compare directly.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from tcnlm_tf.config import CONTEXTS, LINE_ENDS, LONG_SENTENCES
from tcnlm_tf.data.loading import SplitArrays
from tcnlm_tf.models.registry import WEIGHTINGS

#: the evaluation-only context protocol of the ablation: another document's whole text
SHUFFLED = "shuffled"

EOS_ID = 2   # tcnlm_tf.data.vocab.LM_SPECIALS = (<pad>, <unk>, <eos>)
UNK_ID = 1
PAD_ID = 0


@dataclasses.dataclass
class SentenceExamples:
    """Sentence-mode sequences. ``inputs``/``targets`` [N, L]; ``context`` [N, 4] int64 holds,
    in ``topic_ids`` coordinates, (document start, sentence start, sentence end, document end);
    ``documents`` [N]: the index of each sequence's document; ``sentences`` [N]: the index of
    each sequence's sentence in the split."""

    inputs: np.ndarray
    targets: np.ndarray
    context: np.ndarray
    documents: np.ndarray
    sentences: np.ndarray

    def __len__(self) -> int:
        return len(self.inputs)


def sentence_examples(split: SplitArrays, seq_len: int) -> SentenceExamples:
    """Cut every sentence of ``split`` into sequences of at most ``seq_len`` targets."""
    lengths = np.diff(split.sent_offsets)                      # words per sentence
    chunks = -(-(lengths + 1) // seq_len)                      # ceil(targets / L)
    total = int(chunks.sum())
    inputs = np.zeros((total, seq_len), np.int32)
    targets = np.zeros((total, seq_len), np.int32)
    doc_of_sentence = np.repeat(np.arange(split.num_documents), np.diff(split.doc_offsets))
    sent_index = np.repeat(np.arange(split.num_sentences), chunks)
    row = 0
    for s in range(split.num_sentences):
        start, end = split.sent_offsets[s], split.sent_offsets[s + 1]
        tokens = np.concatenate([[EOS_ID], split.lm_ids[start:end], [EOS_ID]])
        for k in range(chunks[s]):
            piece = tokens[k * seq_len: (k + 1) * seq_len + 1]
            inputs[row, :len(piece) - 1] = piece[:-1]
            targets[row, :len(piece) - 1] = piece[1:]
            row += 1
    docs = doc_of_sentence[sent_index]
    topic = split.topic_offsets
    context = np.stack([topic[split.doc_offsets[docs]], topic[sent_index],
                        topic[sent_index + 1], topic[split.doc_offsets[docs + 1]]], axis=1)
    return SentenceExamples(inputs, targets, context.astype(np.int64), docs, sent_index)


def sentence_lanes(examples: SentenceExamples, lanes: int,
                   shuffle_seed: int | None = None) -> dict[str, np.ndarray]:
    """Sentence mode with ``long_sentences`` carry: the sentences (in the order they come,
    or shuffled with ``shuffle_seed``) each go whole to the currently shortest of ``lanes``
    lanes, their pieces one after the other. Returns ``index`` [K, lanes] int64, the example
    in each slot (``len(examples)``: none, a padding row), and ``reset`` [K, lanes] float32,
    1 where a slot starts a sentence or is empty."""
    first = np.flatnonzero(np.r_[True, examples.sentences[1:] != examples.sentences[:-1]])
    first = first[first < len(examples)]
    last = np.r_[first[1:], len(examples)]
    order = (np.arange(len(first)) if shuffle_seed is None
             else np.random.default_rng(shuffle_seed).permutation(len(first)))
    rows: list[list[int]] = [[] for _ in range(lanes)]
    for unit in order:
        lane = min(range(lanes), key=lambda k: len(rows[k]))
        rows[lane].extend(range(first[unit], last[unit]))
    num_batches = max(1, max(len(row) for row in rows))
    index = np.full((num_batches, lanes), len(examples), np.int64)
    for lane, row in enumerate(rows):
        index[:len(row), lane] = row
    starts = np.zeros(len(examples) + 1, bool)
    starts[first] = True
    starts[-1] = True
    return {"index": index, "reset": starts[index].astype(np.float32)}


def protocol_context(split: SplitArrays, examples: SentenceExamples, protocol: str,
                     seed: int = 0) -> np.ndarray:
    """The examples' context rows [N, 4] under the context ``protocol`` (:data:`CONTEXTS` or
    :data:`SHUFFLED`): ``rest`` as built (document minus sentence); ``preceding`` ends the
    kept text at the sentence: (document start, sentence start, document end, document end);
    ``shuffled`` is the whole of another document, the documents permuted with ``seed`` so
    that none keeps its own (when there are two or more)."""
    if protocol not in CONTEXTS + (SHUFFLED,):
        raise ValueError(f"unknown context protocol {protocol!r}; choose one of "
                         f"{CONTEXTS + (SHUFFLED,)}")
    context = examples.context
    if protocol == "preceding":
        context = context.copy()
        context[:, 2] = context[:, 3]
    elif protocol == SHUFFLED:
        order = np.random.default_rng(seed).permutation(split.num_documents)
        other = np.empty_like(order)
        other[order] = np.roll(order, 1)          # a single cycle: no document keeps its own
        documents = other[examples.documents]
        topic = split.topic_offsets
        start, end = topic[split.doc_offsets[documents]], topic[split.doc_offsets[documents + 1]]
        context = np.stack([start, start, start, end], axis=1).astype(np.int64)
    return context


def context_weights(examples: SentenceExamples, weighting: str) -> np.ndarray:
    """``context_weight`` of every example [N] float32 (see the module docstring):
    1 / (examples of its sentence) or 1 / (examples of its document)."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"unknown weighting {weighting!r}; choose one of {WEIGHTINGS}")
    unit = examples.sentences if weighting == "sentence" else examples.documents
    return (1.0 / np.bincount(unit)[unit]).astype(np.float32)


def document_lanes(split: SplitArrays, seq_len: int, lanes: int,
                   order: np.ndarray | None = None, balanced: bool = False
                   ) -> dict[str, np.ndarray]:
    """Lay documents (in ``order``) end to end in ``lanes`` lanes of windows.

    Exact layout (``balanced=False``, for evaluation): each document goes whole to the
    currently shortest lane, so every window is read with its document's full history and
    the perplexity does not depend on the number of lanes. One long document can keep one
    lane running long after the others have ended, though.

    Balanced layout (``balanced=True``, for training): the windows of all documents, in
    order, are cut into ``lanes`` contiguous runs of equal length. Without it, one 7,000-word
    APNEWS document fills the last ~200 batches of every epoch as a batch of one lane, and
    those ~200 updates on a single document ruin the model. The price: a document split
    between two lanes continues from a zero state in the second one (at most ``lanes - 1``
    windows per epoch).

    Returns ``inputs``/``targets`` [K, lanes, L], ``reset`` [K, lanes] and ``document``
    [K, lanes, L] (each target's document, -1 at padding) for K batches.
    """
    order = np.arange(split.num_documents) if order is None else order
    documents: list[list[tuple[np.ndarray, np.ndarray, float, int]]] = []
    for d in order:
        first, last = split.doc_offsets[d], split.doc_offsets[d + 1]
        pieces = [[EOS_ID]]
        for s in range(first, last):
            pieces.append(split.lm_ids[split.sent_offsets[s]:split.sent_offsets[s + 1]])
            pieces.append([EOS_ID])
        stream = np.concatenate(pieces).astype(np.int32)
        windows = []
        for k in range(-(-(len(stream) - 1) // seq_len)):
            piece = stream[k * seq_len: (k + 1) * seq_len + 1]
            x = np.zeros(seq_len, np.int32)
            y = np.zeros(seq_len, np.int32)
            x[:len(piece) - 1] = piece[:-1]
            y[:len(piece) - 1] = piece[1:]
            windows.append((x, y, 1.0 if k == 0 else 0.0, d))
        documents.append(windows)
    if balanced:
        stream_of_windows = [w for windows in documents for w in windows]
        per_lane = max(1, -(-len(stream_of_windows) // lanes))
        lane_windows = []
        for i in range(lanes):
            windows = stream_of_windows[i * per_lane:(i + 1) * per_lane]
            if windows:   # a lane that starts inside a document has no state to carry in
                x, y, _, d = windows[0]
                windows[0] = (x, y, 1.0, d)
            lane_windows.append(windows)
    else:
        lane_windows = [[] for _ in range(lanes)]
        for windows in documents:
            min(lane_windows, key=len).extend(windows)
    num_batches = max(len(w) for w in lane_windows)
    inputs = np.zeros((num_batches, lanes, seq_len), np.int32)
    targets = np.zeros((num_batches, lanes, seq_len), np.int32)
    reset = np.ones((num_batches, lanes), np.float32)
    document = np.full((num_batches, lanes), -1, np.int32)
    for lane, windows in enumerate(lane_windows):
        for k, (x, y, r, d) in enumerate(windows):
            inputs[k, lane], targets[k, lane], reset[k, lane], document[k, lane] = x, y, r, d
    document = np.where(targets != PAD_ID, document[:, :, None], -1).astype(np.int32)
    return {"inputs": inputs, "targets": targets, "reset": reset, "document": document}


def stream_lanes(split: SplitArrays, seq_len: int, lanes: int,
                 line_end: str = LINE_ENDS[0]) -> dict[str, np.ndarray]:
    """The split as one stream (see the module docstring; ``line_end``: one of
    :data:`LINE_ENDS`) in ``lanes`` contiguous lanes: ``inputs``/``targets`` [K, lanes, L]
    (0-padded at the end of the last lanes), ``reset`` [K, lanes] (1 in the first batch
    only) and ``document`` [K, lanes, L] (each target's document, -1 at padding),
    K = ceil(stream / lanes / L)."""
    stream = split.lm_ids.astype(np.int32)
    # the document of every word, then of every target of the stream
    owner = np.repeat(np.repeat(np.arange(split.num_documents), np.diff(split.doc_offsets)),
                      np.diff(split.sent_offsets))
    if line_end == "eos":
        ends = np.full(split.num_sentences, EOS_ID, np.int32)
        stream = np.insert(stream, split.sent_offsets[1:], ends)
        sentence_owner = np.repeat(np.arange(split.num_documents), np.diff(split.doc_offsets))
        owner = np.insert(owner, split.sent_offsets[1:], sentence_owner)
    stream = np.concatenate([[EOS_ID], stream]).astype(np.int32)
    targets = len(stream) - 1
    per_lane = max(1, -(-targets // lanes))
    num_batches = -(-per_lane // seq_len)
    width = num_batches * seq_len
    inputs = np.zeros((lanes, width), np.int32)
    outputs = np.zeros((lanes, width), np.int32)
    document = np.full((lanes, width), -1, np.int32)
    for lane in range(lanes):
        start, end = lane * per_lane, min((lane + 1) * per_lane, targets)
        if start < end:
            inputs[lane, :end - start] = stream[start:end]
            outputs[lane, :end - start] = stream[start + 1:end + 1]
            document[lane, :end - start] = owner[start:end]
    reset = np.zeros((num_batches, lanes), np.float32)
    reset[0] = 1.0

    def as_batches(a):
        return a.reshape(lanes, num_batches, seq_len).transpose(1, 0, 2)

    return {"inputs": as_batches(inputs), "targets": as_batches(outputs), "reset": reset,
            "document": as_batches(document)}


def bag_of_words(context: tf.Tensor, topic_ids: tf.Tensor, max_bow: int) -> tf.Tensor:
    """The builder of ``bow``: ``context`` [B, 4] int64 rows (document start,
    left-out start, left-out end, document end) in ``topic_ids`` coordinates -> the ids of
    the document minus the left-out span, in order, first ``max_bow`` kept, 0-padded:
    [B, max_bow]. ``topic_ids`` must end with one extra 0 (see :func:`padded_ids`)."""
    doc_start, sent_start, sent_end, doc_end = tf.unstack(context, axis=1)
    len_before = (sent_start - doc_start)[:, None]
    len_after = (doc_end - sent_end)[:, None]
    j = tf.range(max_bow, dtype=tf.int64)[None, :]
    position = tf.where(j < len_before, doc_start[:, None] + j, sent_end[:, None] + j - len_before)
    valid = j < len_before + len_after
    ids = tf.gather(topic_ids, tf.where(valid, position, 0))
    return tf.where(valid, ids, tf.zeros_like(ids))


def preceding_sentences(sentences: tf.Tensor, sentence_starts: tf.Tensor, topic_ids: tf.Tensor,
                        num_sentences: int, num_words: int) -> tf.Tensor:
    """The builder of ``preceding``: ``sentences`` [B, 2] int64 rows (the document's first
    sentence, the example's sentence) as indices into ``sentence_starts`` [S+1] int64 (where
    each sentence starts in ``topic_ids``, then where the last one ends; at least one entry)
    -> [B, N, W] int32, N = ``num_sentences``, W = ``num_words``: row l holds sentence
    ``s - N + l`` (s the example's sentence), its first W ids, 0-padded; all 0 where that
    sentence comes before the document's first. ``topic_ids`` must end with one extra 0
    (see :func:`padded_ids`)."""
    first, current = tf.unstack(sentences, axis=1)
    index = current[:, None] + tf.range(-num_sentences, 0, dtype=tf.int64)[None, :]  # [B, N]
    in_document = index >= first[:, None]
    index = tf.where(in_document, index, 0)
    last = tf.size(sentence_starts, out_type=tf.int64) - 1
    start = tf.gather(sentence_starts, index)
    end = tf.gather(sentence_starts, tf.minimum(index + 1, last))
    length = tf.where(in_document, end - start, 0)[:, :, None]                   # [B, N, 1]
    j = tf.range(num_words, dtype=tf.int64)[None, None, :]
    valid = j < length
    ids = tf.gather(topic_ids, tf.where(valid, start[:, :, None] + j, 0))
    return tf.where(valid, ids, tf.zeros_like(ids))


def padded_ids(ids: np.ndarray | tf.Tensor) -> tf.Tensor:
    """Flat topic ids with one trailing 0, so masked positions can gather index 0 even when
    there is no topic-vocabulary word at all."""
    return tf.concat([tf.cast(ids, tf.int32), tf.zeros([1], tf.int32)], axis=0)


@dataclasses.dataclass(frozen=True)
class ContextSpec:
    """The document context a model's batches carry, built once per model
    (:attr:`tcnlm_tf.models.base.LanguageModel.context_spec`) and given to
    :func:`make_dataset` and :func:`document_context`.

    ``fields``: the names of the fields (each one of :data:`CONTEXT_FIELDS`); ``max_bow``:
    the words of ``bow``; ``options``: the sizes and choices of the model's fields
    (``preceding``: ``sentences`` N and ``words`` W; ``context_weight``: ``weighting``);
    ``protocol``: what a sentence's document context holds (:data:`CONTEXTS`, or
    :data:`SHUFFLED` in the ablation)."""

    fields: tuple[str, ...] = ()
    max_bow: int = 300
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    protocol: str = CONTEXTS[0]

    def reads(self, kind: str) -> bool:
        """Whether any of the fields is of ``kind`` (:data:`FIELD_KINDS`)."""
        return any(CONTEXT_FIELDS[name].kind == kind for name in self.fields)


@dataclasses.dataclass
class ContextSource:
    """What the fields of B examples are made from: ``rows`` [B, 4] int64 context rows
    (document start, left-out start, left-out end, document end; :func:`bag_of_words`) and
    ``sentences`` [B, 2] int64 (the document's first sentence, the example's sentence;
    :func:`preceding_sentences`) in the coordinates of ``topic_ids`` (flat, padded:
    :func:`padded_ids`) and ``sentence_starts`` [S+1] int64; ``weights`` [B] float32: the
    examples' ``context_weight`` (None: whole documents, weight 1)."""

    rows: tf.Tensor
    topic_ids: tf.Tensor
    sentences: tf.Tensor
    sentence_starts: tf.Tensor
    weights: tf.Tensor | None = None


#: what a context field is made of: ``document``, the document's text as the context rows
#: and the protocol say (so the shuffled ablation replaces it and a served ``documents``
#: input is read as a bag of words); ``sentences``, the preceding sentences one by one;
#: ``weight``, no text (a per-example number)
FIELD_KINDS = ("document", "sentences", "weight")


@dataclasses.dataclass(frozen=True)
class ContextField:
    """How one context field is made: ``build(source, spec)`` -> a tensor with one row per
    example of the :class:`ContextSource`; ``kind``: one of :data:`FIELD_KINDS`."""

    build: Callable[[ContextSource, ContextSpec], tf.Tensor]
    kind: str

    def __post_init__(self):
        if self.kind not in FIELD_KINDS:
            raise ValueError(f"unknown context field kind {self.kind!r}; choose one of "
                             f"{FIELD_KINDS}")


def _unit_weights(source: ContextSource, spec: ContextSpec) -> tf.Tensor:
    if source.weights is None:
        return tf.ones(tf.shape(source.rows)[:1], tf.float32)
    return source.weights


#: every context field by name (see the module docstring); a new field is one entry here
#: (:func:`register_context_field`) and a model whose ``context_inputs`` name it
CONTEXT_FIELDS: dict[str, ContextField] = {
    "bow": ContextField(lambda source, spec: bag_of_words(source.rows, source.topic_ids,
                                                          spec.max_bow), "document"),
    "preceding": ContextField(lambda source, spec: preceding_sentences(
        source.sentences, source.sentence_starts, source.topic_ids,
        spec.options["sentences"], spec.options["words"]), "sentences"),
    "context_weight": ContextField(_unit_weights, "weight"),
}


def register_context_field(name: str, field: ContextField) -> None:
    """Add the context field ``name`` (an error if the name is taken)."""
    if name in CONTEXT_FIELDS:
        raise ValueError(f"a context field named {name!r} exists already")
    CONTEXT_FIELDS[name] = field


def context_fields(spec: ContextSpec, source: ContextSource) -> dict[str, tf.Tensor]:
    """The context fields of ``spec`` for the examples of ``source``: {name: [B, ...]}; the
    one place that makes them."""
    unknown = set(spec.fields) - set(CONTEXT_FIELDS)
    if unknown:
        raise ValueError(f"no builder for the context fields {sorted(unknown)}")
    return {name: CONTEXT_FIELDS[name].build(source, spec) for name in spec.fields}


def document_context(spec: ContextSpec, topic_ids: tf.Tensor,
                     sentence_starts: np.ndarray | tf.Tensor,
                     documents: np.ndarray | tf.Tensor) -> dict[str, tf.Tensor]:
    """The context fields of whole documents (nothing left out; ``preceding``: each
    document's last sentences, the context of a sentence that would follow it), the one
    builder of document context for evaluation, serving and a model's own reading of
    documents. ``topic_ids``: flat topic-vocabulary ids, padded (:func:`padded_ids`);
    ``sentence_starts``
    [S+1]: where each sentence starts in them, then where the last one ends; ``documents``
    [D, 2]: each document's first sentence and one past its last."""
    documents = tf.cast(documents, tf.int64)
    sentence_starts = tf.cast(sentence_starts, tf.int64)
    first, end = tf.unstack(documents, axis=1)
    start, stop = tf.gather(sentence_starts, first), tf.gather(sentence_starts, end)
    rows = tf.stack([start, start, start, stop], axis=1)
    return context_fields(spec, ContextSource(rows, topic_ids, documents, sentence_starts))


def split_context(spec: ContextSpec, split: SplitArrays) -> dict[str, tf.Tensor]:
    """:func:`document_context` of every document of ``split``."""
    return document_context(spec, padded_ids(split.topic_ids), split.topic_offsets,
                            np.stack([split.doc_offsets[:-1], split.doc_offsets[1:]], axis=1))


def _with_weights(batch: dict) -> dict:
    batch["weights"] = tf.cast(tf.not_equal(batch["targets"], PAD_ID), tf.float32)
    return batch


def _lane_dataset(lanes: dict[str, np.ndarray], with_documents: bool) -> tf.data.Dataset:
    """The batches of document or stream lanes (``document`` kept where asked for)."""
    if not with_documents:
        lanes = {name: value for name, value in lanes.items() if name != "document"}
    return tf.data.Dataset.from_tensor_slices(lanes).map(_with_weights).prefetch(
        tf.data.AUTOTUNE)


def _with_padding_row(values: np.ndarray, padding: Any) -> np.ndarray:
    """``values`` [N, ...] with one more row, ``padding`` (the empty slot of a lane)."""
    extra = np.full((1,) + values.shape[1:], padding, values.dtype)
    return np.concatenate([values, extra])


def sentence_dataset(split: SplitArrays, examples: SentenceExamples, batch_size: int,
                     context: ContextSpec = ContextSpec(), shuffle_seed: int | None = None,
                     features: dict[str, np.ndarray] | None = None,
                     with_documents: bool = False,
                     long_sentences: str = LONG_SENTENCES[0]) -> tf.data.Dataset:
    """Batches of sentence-mode examples; shuffled with ``shuffle_seed`` (one fixed order per
    seed, so a resumed epoch sees the same order), with the ``context`` fields, each
    example's row of the per-document ``features`` ({name: [D, ...]}) and, with
    ``with_documents``, each target's ``document``. ``long_sentences`` carry lays the
    sentences out in lanes (:func:`sentence_lanes`; the sentences shuffled, not their
    pieces), each batch with its ``reset``; an empty slot is a padding row (no targets,
    ``context_weight`` 0)."""
    carry = long_sentences == LONG_SENTENCES[1]
    if carry:
        slices = sentence_lanes(examples, batch_size, shuffle_seed)
    else:
        order = np.arange(len(examples))
        if shuffle_seed is not None:
            order = np.random.default_rng(shuffle_seed).permutation(len(examples))
        slices = order
    padded = _with_padding_row if carry else (lambda values, padding: values)
    inputs = tf.constant(padded(examples.inputs, PAD_ID))
    targets = tf.constant(padded(examples.targets, PAD_ID))
    rows = tf.constant(padded(protocol_context(split, examples, context.protocol), 0))
    weights = tf.constant(padded(context_weights(
        examples, context.options.get("weighting", WEIGHTINGS[0])), 0.0))
    documents = tf.constant(padded(examples.documents, 0))
    sentences = tf.constant(padded(np.stack([split.doc_offsets[examples.documents],
                                             examples.sentences], axis=1), 0))
    sentence_starts = tf.constant(split.topic_offsets)
    topic_ids = padded_ids(split.topic_ids)
    features = {name: tf.constant(value) for name, value in (features or {}).items()}

    def gather(index):
        batch = {"inputs": tf.gather(inputs, index), "targets": tf.gather(targets, index)}
        batch.update(context_fields(context, ContextSource(
            tf.gather(rows, index), topic_ids, tf.gather(sentences, index), sentence_starts,
            tf.gather(weights, index))))
        batch.update({name: tf.gather(value, tf.gather(documents, index))
                      for name, value in features.items()})
        if with_documents:
            owner = tf.cast(tf.gather(documents, index), tf.int32)[:, None]
            batch["document"] = tf.where(batch["targets"] != PAD_ID, owner, -1)
        return _with_weights(batch)

    if carry:
        dataset = tf.data.Dataset.from_tensor_slices(slices).map(
            lambda slot: {**gather(slot["index"]), "reset": slot["reset"]},
            num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)
    dataset = tf.data.Dataset.from_tensor_slices(slices).batch(batch_size)
    return dataset.map(gather, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def document_dataset(split: SplitArrays, seq_len: int, batch_size: int,
                     shuffle_seed: int | None = None,
                     with_documents: bool = False) -> tf.data.Dataset:
    """Document-mode batches (``batch_size`` lanes). With ``shuffle_seed`` (training), the
    documents are shuffled and laid out balanced; without it (evaluation), exactly (see
    :func:`document_lanes`)."""
    order = None
    if shuffle_seed is not None:
        order = np.random.default_rng(shuffle_seed).permutation(split.num_documents)
    lanes = document_lanes(split, seq_len, batch_size, order, balanced=shuffle_seed is not None)
    return _lane_dataset(lanes, with_documents)


def stream_dataset(split: SplitArrays, seq_len: int, batch_size: int,
                   line_end: str = LINE_ENDS[0], with_documents: bool = False
                   ) -> tf.data.Dataset:
    """Stream-mode batches (``batch_size`` lanes, the same for training and evaluation: the
    PyTorch example does not shuffle a stream either)."""
    return _lane_dataset(stream_lanes(split, seq_len, batch_size, line_end), with_documents)


def make_dataset(split: SplitArrays, seq_len: int, batch_size: int, mode: str,
                 context: ContextSpec = ContextSpec(), shuffle_seed: int | None = None,
                 examples: SentenceExamples | None = None,
                 features: dict[str, np.ndarray] | None = None,
                 line_end: str = LINE_ENDS[0], with_documents: bool = False,
                 long_sentences: str = LONG_SENTENCES[0]) -> tf.data.Dataset:
    """The batches of ``split`` for ``mode`` ('sentence', 'document' or 'stream');
    ``context``: the model's :class:`ContextSpec` (sentence mode; the fields to add and how),
    ``features``: per-document side inputs (sentence mode), ``examples``: precomputed
    sequences; ``line_end`` (stream mode): whether ``<eos>`` follows each line;
    ``with_documents``: each batch also says which document each target belongs to
    (``document``); ``long_sentences`` (sentence mode): :data:`LONG_SENTENCES`."""
    if mode == "document":
        return document_dataset(split, seq_len, batch_size, shuffle_seed, with_documents)
    if mode == "stream":
        return stream_dataset(split, seq_len, batch_size, line_end, with_documents)
    if examples is None:
        examples = sentence_examples(split, seq_len)
    return sentence_dataset(split, examples, batch_size, context, shuffle_seed, features,
                            with_documents, long_sentences)


def model_dataset(model: Any, config: Any, split: SplitArrays, split_name: str | None,
                  batch_size: int | None = None, shuffle_seed: int | None = None,
                  examples: SentenceExamples | None = None,
                  protocol: str | None = None, with_documents: bool = False
                  ) -> tf.data.Dataset:
    """The batches a ``model`` (:class:`~tcnlm_tf.models.base.LanguageModel`) of a run
    configured by ``config`` (:class:`~tcnlm_tf.config.RunConfig`) reads from ``split``,
    the corpus split named ``split_name`` (None: a text that is no split of the run's
    corpus): its mode, sequence length, context and per-document features; ``batch_size``
    (default: the run's), ``protocol``: another context protocol (the ablation),
    ``with_documents``: as :func:`make_dataset`."""
    context = model.context_spec
    if protocol is not None:
        context = dataclasses.replace(context, protocol=protocol)
    return make_dataset(split, config.data.seq_len, batch_size or config.train.batch_size,
                        config.model.mode, context, shuffle_seed, examples,
                        model.document_features(split_name, split), config.data.line_end,
                        with_documents, config.data.long_sentences)
