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
from tcnlm_tf.data.examples import EOS_ID as EOS_ID   # the specials' ids, used from here
from tcnlm_tf.data.examples import (PAD_ID, DocumentLanes, LocalSource,
                                    SentenceExamples, StreamLanes, document_rows,
                                    document_source, local_source, sentence_examples,
                                    sentence_lanes, shuffled_documents)
from tcnlm_tf.data.loading import SplitArrays
from tcnlm_tf.models.registry import WEIGHTINGS

#: the evaluation-only context protocol of the ablation: another document's whole text
SHUFFLED = "shuffled"

UNK_ID = 1


def check_protocol(protocol: str) -> None:
    """A ValueError unless ``protocol`` is a context protocol (:data:`CONTEXTS`) or
    :data:`SHUFFLED`."""
    if protocol not in CONTEXTS + (SHUFFLED,):
        raise ValueError(f"unknown context protocol {protocol!r}; choose one of "
                         f"{CONTEXTS + (SHUFFLED,)}")


def protocol_rows(split: SplitArrays, rows: np.ndarray, documents: np.ndarray, protocol: str,
                  other: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Examples' context rows [B, 4] (as :meth:`SentenceExamples.take` builds them) under the
    context ``protocol`` (:data:`CONTEXTS` or :data:`SHUFFLED`), and the document each row
    lies in: ``rest`` as built (document minus sentence); ``preceding`` ends the kept text at
    the sentence: (document start, sentence start, document end, document end);
    ``shuffled`` is the whole of another document, ``other[document]``
    (:func:`~tcnlm_tf.data.examples.shuffled_documents`)."""
    check_protocol(protocol)
    if protocol == "preceding":
        rows = rows.copy()
        rows[:, 2] = rows[:, 3]
    elif protocol == SHUFFLED:
        documents = other[documents]
        rows = document_rows(split, documents)
    return rows, documents


def protocol_context(split: SplitArrays, examples: SentenceExamples, protocol: str,
                     seed: int = 0) -> np.ndarray:
    """:func:`protocol_rows` of every example of a (small) split [N, 4]; ``shuffled``
    permutes the documents with ``seed``."""
    taken = examples.take(np.arange(len(examples)))
    other = shuffled_documents(split.num_documents, seed) if protocol == SHUFFLED else None
    return protocol_rows(split, taken["context"], taken["documents"], protocol, other)[0]


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
    """:func:`document_context` of every document of a (small) ``split``."""
    return local_context(spec, document_source(split, np.arange(split.num_documents)))


def local_context(spec: ContextSpec, source: LocalSource | dict,
                  weights: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
    """The context fields of ``spec`` from a :class:`~tcnlm_tf.data.examples.LocalSource`
    (or a batch dict holding its fields as tensors)."""
    get = source.get if isinstance(source, dict) else lambda name: getattr(source, name)
    return context_fields(spec, ContextSource(
        tf.convert_to_tensor(get("rows")), tf.convert_to_tensor(get("topic_ids")),
        tf.convert_to_tensor(get("sentences")), tf.convert_to_tensor(get("sentence_starts")),
        weights))


#: the dtype and shape of each field of a :class:`~tcnlm_tf.data.examples.LocalSource`
#: in a batch (B rows)
LOCAL_SOURCE = {"rows": (tf.int64, [None, 4]), "topic_ids": (tf.int32, [None]),
                "sentences": (tf.int64, [None, 2]), "sentence_starts": (tf.int64, [None])}


@dataclasses.dataclass(frozen=True)
class Share:
    """What one input pipeline builds of the epoch's global batches: those from batch
    ``start`` on (a resumed epoch begins at its checkpointed batch, building none of the
    ones before it) and, of each, the rows of its replicas, ``first`` to ``first + local - 1``
    of all ``total`` (the rows each replica takes, as :func:`train.distribution.replica_slice`
    cuts a global batch of n rows: ceil(n / total) each, fewer or none for the last). A
    dataset built with a share yields, per global batch, a tuple of its replicas' batches
    (:meth:`rows`); without one, every global batch itself."""

    first: int = 0
    local: int = 1
    total: int = 1
    start: int = 0

    def rows(self, n: int) -> list[slice]:
        """Each of this pipeline's replicas' rows of a global batch of ``n`` rows."""
        each = -(-n // self.total)
        return [slice(min(r * each, n), min((r + 1) * each, n))
                for r in range(self.first, self.first + self.local)]


def plain_function(function: Callable) -> Callable:
    """``function`` for ``Dataset.map`` without AutoGraph's conversion: the pipeline's
    functions have no Python control flow on tensors, and converting them would cost
    about a second of CPU in every process that builds a dataset."""
    return tf.autograph.experimental.do_not_convert(function)


def numpy_batches(num_batches: int, select: Callable[[int], dict[str, np.ndarray]],
                  build: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
                  signature: Mapping[str, tuple[tf.DType, list]],
                  share: Share | None = None,
                  release: Callable[[], None] | None = None) -> tf.data.Dataset:
    """``num_batches`` batches made in numpy from the split's arrays (which may be memory
    maps: nothing of the split becomes a tensor): ``select(k)`` says what global batch k
    holds ({name: [n, ...]}, a row each), ``build`` makes a batch from (some of) its rows,
    reading only their text; ``signature``: the dtype and shape of each field ``build``
    returns. With a ``share``, each element is a tuple of its replicas' batches, each built
    from only that replica's rows, from the share's ``start`` on. ``release`` (the split's
    :meth:`~tcnlm_tf.data.loading.SplitArrays.release`) is called after each batch, so
    that the pages of the memory maps it read leave the resident set again."""
    names = list(signature)
    dtypes = [signature[name][0] for name in names]
    parts = 1 if share is None else share.local

    def call(k):
        selection = select(int(k))
        n = len(next(iter(selection.values())))
        out = []
        for rows in ([slice(None)] if share is None else share.rows(n)):
            batch = build({name: value[rows] for name, value in selection.items()})
            out += [np.asarray(batch[name], dtype.as_numpy_dtype)
                    for name, dtype in zip(names, dtypes)]
        if release is not None:
            release()
        return tuple(out)

    def read(k):
        values = tf.numpy_function(call, [k], dtypes * parts, stateful=False)
        batches = tuple({name: tf.ensure_shape(value, signature[name][1] if share is None
                                               else [None, *signature[name][1][1:]])
                         for name, value in zip(names, values[i * len(names):])}
                        for i in range(parts))
        return batches[0] if share is None else batches

    first = 0 if share is None else min(share.start, num_batches)
    return tf.data.Dataset.range(first, num_batches).map(plain_function(read),
                                                         num_parallel_calls=tf.data.AUTOTUNE)


def each_part(dataset: tf.data.Dataset, finish: Callable[[dict], dict],
              share: Share | None) -> tf.data.Dataset:
    """``dataset`` (of :func:`numpy_batches`) with ``finish`` applied to every batch (to
    each replica's, with a ``share``)."""
    if share is None:
        return dataset.map(plain_function(finish), num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.map(plain_function(lambda *parts: tuple(finish(part) for part in parts)),
                       num_parallel_calls=tf.data.AUTOTUNE)


def document_batches(split: SplitArrays, spec: ContextSpec, num_batches: int,
                     select: Callable[[int], dict[str, np.ndarray]],
                     extra: Mapping[str, tuple[tf.DType, list]],
                     features: dict[str, np.ndarray] | None = None) -> tf.data.Dataset:
    """Batches of whole documents of ``split`` (a topic model's own training examples):
    ``select(k)`` -> batch k's ``documents`` [B] and its fields of ``extra`` ([B, ...]);
    each batch holds the context fields of ``spec`` for those documents
    (:func:`document_context`), their rows of the per-document ``features`` and the extra
    fields."""
    features = {name: tf.constant(value) for name, value in (features or {}).items()}

    def build(selection):
        return {**vars(document_source(split, selection["documents"])), **selection}

    def finish(parts):
        batch = local_context(spec, parts)
        batch.update({name: tf.gather(value, parts["documents"])
                      for name, value in features.items()})
        batch.update({name: parts[name] for name in extra})
        return batch

    signature = {**LOCAL_SOURCE, "documents": (tf.int64, [None]), **extra}
    return each_part(numpy_batches(num_batches, select, build, signature,
                                   release=split.release), finish,
                     None).prefetch(2)


def _with_weights(batch: dict) -> dict:
    batch["weights"] = tf.cast(tf.not_equal(batch["targets"], PAD_ID), tf.float32)
    return batch


def _lane_dataset(layout: DocumentLanes | StreamLanes, with_documents: bool,
                  share: Share | None) -> tf.data.Dataset:
    """The batches of document or stream lanes (``document`` kept where asked for; with a
    ``share``, each replica's lanes)."""
    lanes, length = layout.lanes, layout.seq_len
    signature = {"inputs": (tf.int32, [lanes, length]), "targets": (tf.int32, [lanes, length]),
                 "reset": (tf.float32, [lanes])}
    if with_documents:
        signature["document"] = (tf.int32, [lanes, length])

    def select(k):
        return {"batch": np.full(lanes, k), "lane": np.arange(lanes)}

    def build(selection):
        return layout.batch(int(selection["batch"][0]) if len(selection["batch"]) else 0,
                            selection["lane"])

    dataset = numpy_batches(layout.num_batches, select, build, signature, share,
                            layout.split.release)
    return each_part(dataset, _with_weights, share).prefetch(tf.data.AUTOTUNE)


def sentence_dataset(split: SplitArrays, examples: SentenceExamples, batch_size: int,
                     context: ContextSpec = ContextSpec(), shuffle_seed: int | None = None,
                     features: dict[str, np.ndarray] | None = None,
                     with_documents: bool = False,
                     long_sentences: str = LONG_SENTENCES[0],
                     share: Share | None = None) -> tf.data.Dataset:
    """Batches of sentence-mode examples; shuffled with ``shuffle_seed`` (one permutation
    of all the split's examples per seed, so a resumed epoch sees the same order), with the
    ``context`` fields, each example's row of the per-document ``features`` ({name:
    [D, ...]}) and, with ``with_documents``, each target's ``document``. ``long_sentences``
    carry lays the sentences out in lanes (:func:`sentence_lanes`; the sentences shuffled,
    not their pieces), each batch with its ``reset``; an empty slot is a padding row (no
    targets, ``context_weight`` 0). Memory: the permutation (4 bytes an example) and the
    examples' index (:class:`SentenceExamples`); each batch reads only its own text."""
    check_protocol(context.protocol)
    carry = long_sentences == LONG_SENTENCES[1]
    if carry:
        layout = sentence_lanes(examples, batch_size, shuffle_seed)
        num_batches = len(layout["index"])
    else:
        order = examples.order(shuffle_seed)
        num_batches = -(-len(examples) // batch_size)
    other = (shuffled_documents(split.num_documents, 0) if context.protocol == SHUFFLED
             else None)
    weighting = context.options.get("weighting", WEIGHTINGS[0])
    features = {name: tf.constant(value) for name, value in (features or {}).items()}

    def select(k):
        if carry:
            return {"index": layout["index"][k], "reset": layout["reset"][k]}
        return {"index": order[k * batch_size:(k + 1) * batch_size]}

    def build(selection):
        index = selection["index"]
        real = index < len(examples)
        taken = examples.take(np.where(real, index, 0))
        documents = taken["documents"]
        rows, context_documents = protocol_rows(split, taken["context"], documents,
                                                context.protocol, other)
        sentences = np.stack([split.doc_offsets[documents], taken["sentences"]], axis=1)
        source = local_source(split, rows, context_documents, sentences, documents, real)
        return {"inputs": np.where(real[:, None], taken["inputs"], PAD_ID),
                "targets": np.where(real[:, None], taken["targets"], PAD_ID),
                "context_weights": np.where(real, examples.weights(
                    taken["sentences"], documents, weighting), 0.0),
                "documents": np.where(real, documents, 0), **vars(source),
                **({"reset": selection["reset"]} if carry else {})}

    def finish(parts):
        batch = {"inputs": parts["inputs"], "targets": parts["targets"]}
        batch.update(local_context(context, parts, parts["context_weights"]))
        batch.update({name: tf.gather(value, parts["documents"])
                      for name, value in features.items()})
        if with_documents:
            owner = tf.cast(parts["documents"], tf.int32)[:, None]
            batch["document"] = tf.where(batch["targets"] != PAD_ID, owner, -1)
        if carry:
            batch["reset"] = parts["reset"]
        return _with_weights(batch)

    length = examples.seq_len
    signature = {"inputs": (tf.int32, [None, length]), "targets": (tf.int32, [None, length]),
                 "context_weights": (tf.float32, [None]), "documents": (tf.int64, [None]),
                 **LOCAL_SOURCE}
    if carry:
        signature["reset"] = (tf.float32, [batch_size])
    dataset = numpy_batches(num_batches, select, build, signature, share, split.release)
    return each_part(dataset, finish, share).prefetch(tf.data.AUTOTUNE)


def document_dataset(split: SplitArrays, seq_len: int, batch_size: int,
                     shuffle_seed: int | None = None, with_documents: bool = False,
                     share: Share | None = None) -> tf.data.Dataset:
    """Document-mode batches (``batch_size`` lanes). With ``shuffle_seed`` (training), the
    documents are shuffled and laid out balanced; without it (evaluation), exactly (see
    :class:`DocumentLanes`)."""
    order = None
    if shuffle_seed is not None:
        order = np.random.default_rng(shuffle_seed).permutation(split.num_documents)
    layout = DocumentLanes(split, seq_len, batch_size, order, balanced=shuffle_seed is not None)
    return _lane_dataset(layout, with_documents, share)


def stream_dataset(split: SplitArrays, seq_len: int, batch_size: int,
                   line_end: str = LINE_ENDS[0], with_documents: bool = False,
                   share: Share | None = None) -> tf.data.Dataset:
    """Stream-mode batches (``batch_size`` lanes, the same for training and evaluation: the
    PyTorch example does not shuffle a stream either)."""
    return _lane_dataset(StreamLanes(split, seq_len, batch_size, line_end), with_documents,
                         share)


def make_dataset(split: SplitArrays, seq_len: int, batch_size: int, mode: str,
                 context: ContextSpec = ContextSpec(), shuffle_seed: int | None = None,
                 examples: SentenceExamples | None = None,
                 features: dict[str, np.ndarray] | None = None,
                 line_end: str = LINE_ENDS[0], with_documents: bool = False,
                 long_sentences: str = LONG_SENTENCES[0],
                 share: Share | None = None) -> tf.data.Dataset:
    """The batches of ``split`` for ``mode`` ('sentence', 'document' or 'stream');
    ``context``: the model's :class:`ContextSpec` (sentence mode; the fields to add and how),
    ``features``: per-document side inputs (sentence mode), ``examples``: precomputed
    sequences; ``line_end`` (stream mode): whether ``<eos>`` follows each line;
    ``with_documents``: each batch also says which document each target belongs to
    (``document``); ``long_sentences`` (sentence mode): :data:`LONG_SENTENCES`; ``share``:
    build only one input pipeline's replicas' rows (:class:`Share`)."""
    if mode == "document":
        return document_dataset(split, seq_len, batch_size, shuffle_seed, with_documents,
                                share)
    if mode == "stream":
        return stream_dataset(split, seq_len, batch_size, line_end, with_documents, share)
    if examples is None:
        examples = sentence_examples(split, seq_len)
    return sentence_dataset(split, examples, batch_size, context, shuffle_seed, features,
                            with_documents, long_sentences, share)


def model_dataset(model: Any, config: Any, split: SplitArrays, split_name: str | None,
                  batch_size: int | None = None, shuffle_seed: int | None = None,
                  examples: SentenceExamples | None = None,
                  protocol: str | None = None, with_documents: bool = False,
                  share: Share | None = None) -> tf.data.Dataset:
    """The batches a ``model`` (:class:`~tcnlm_tf.models.base.LanguageModel`) of a run
    configured by ``config`` (:class:`~tcnlm_tf.config.RunConfig`) reads from ``split``,
    the corpus split named ``split_name`` (None: a text that is no split of the run's
    corpus): its mode, sequence length, context and per-document features; ``batch_size``
    (default: the run's), ``protocol``: another context protocol (the ablation),
    ``with_documents``, ``share``: as :func:`make_dataset`."""
    context = model.context_spec
    if protocol is not None:
        context = dataclasses.replace(context, protocol=protocol)
    return make_dataset(split, config.data.seq_len, batch_size or config.train.batch_size,
                        config.model.mode, context, shuffle_seed, examples,
                        model.document_features(split_name, split), config.data.line_end,
                        with_documents, config.data.long_sentences, share)
