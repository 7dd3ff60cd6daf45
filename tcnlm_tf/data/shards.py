"""A prepared corpus on disk: each split in shards of whole documents, memory-mapped when read.

Layout of one prepared corpus (a directory, ``<cache_dir>/prepared/<dataset>-<key>/``)::

    manifest.json        format version, cache key, id dtypes, every shard of every split:
                         its file, documents, sentences, words, topic words and SHA-256
    lm_vocab.txt         the LM vocabulary, one word per line (id = line number from 0)
    topic_vocab.txt      the topic-model vocabulary
    train-00000.h5 ...   the shards of each split, in order
    train-counts.npy ... each split's LM id counts ([largest id + 1] int64: how often
                         each id is a word of the split), so that start-up needs no pass
                         over the text

A shard is an HDF5 file of contiguous, uncompressed datasets (so that each can be
memory-mapped: :func:`open_shard`) holding whole documents. Every offset is **global**
(a position in the whole split), so the shards of a split read as one array each
(:class:`ShardedArray`) and :class:`tcnlm_tf.data.loading.SplitArrays` keeps its meaning:

``lm_ids``        [T_k] uint16 (int32 for an LM vocabulary over 65,536 words) LM ids
``topic_ids``     [U_k] uint16 (or int32) topic-vocabulary ids of the words in it
``sent_offsets``  [S_k] int64 where each sentence starts in the split's ``lm_ids``
``topic_offsets`` [S_k] int64 where each sentence starts in the split's ``topic_ids``
``doc_offsets``   [D_k] int64 each document's first sentence (in the split)
``doc_lines``     [D_k] int64 each document's line in the source file (from 1)

The split's totals (its words, topic words, sentences; the manifest's) end the three
offset arrays, which hold one more entry than there are sentences or documents.

A shard is written under a temporary name and renamed when complete
(:class:`ShardWriter`), and so is the whole directory, after its manifest
(:func:`tcnlm_tf.data.loading.load_corpus`): nothing that looks complete is ever partial.
Opening checks each shard's size, format and checksum against the manifest and refuses a
damaged, truncated or foreign one with a one-line :class:`CorruptShard` naming it.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import mmap
import os
from pathlib import Path
from typing import Iterable, Sequence

import h5py
import numpy as np

from tcnlm_tf.errors import UserError

#: the shard layout's version (the manifest's ``format``)
SHARD_FORMAT = 1
#: a new shard is begun once the current one holds at least this many words (about 10 MB of
#: arrays held while writing, 2 bytes a word and 16 a sentence, and a file of that size)
DEFAULT_SHARD_WORDS = 1 << 22
#: the arrays of a shard, in order, and the dtype of each (ids: :func:`id_dtype`)
ID_FIELDS = ("lm_ids", "topic_ids")
OFFSET_FIELDS = ("sent_offsets", "topic_offsets", "doc_offsets", "doc_lines")
MANIFEST = "manifest.json"


class CorruptShard(UserError):
    """A shard or manifest that is damaged, truncated, or from another preparation."""


def id_dtype(vocab_size: int) -> np.dtype:
    """uint16 where every id fits (at most 65,536 words), else int32."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.int32)


def shard_name(split: str, index: int) -> str:
    return f"{split}-{index:05d}.h5"


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes (hex), read in blocks."""
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            sha.update(block)
    return sha.hexdigest()


class _Buffer:
    """A growing 1-D array (capacity doubled when full): what a shard collects, at its
    dtype's size per item rather than a Python object's."""

    def __init__(self, dtype: np.dtype):
        self.data = np.zeros(1024, dtype)
        self.size = 0

    def extend(self, values) -> None:
        values = np.asarray(values, self.data.dtype)
        end = self.size + len(values)
        if end > len(self.data):
            grown = np.zeros(max(end, 2 * len(self.data)), self.data.dtype)
            grown[:self.size] = self.data[:self.size]
            self.data = grown
        self.data[self.size:end] = values
        self.size = end

    def array(self) -> np.ndarray:
        return self.data[:self.size]


class ShardWriter:
    """Writes one split's documents into shards of about ``shard_words`` words.

    :meth:`add` takes one encoded document at a time; a shard is written (and a new one
    begun) when it reaches ``shard_words`` words, so at most one shard's arrays are held
    (about 2 bytes a word and 16 a sentence). :meth:`close` writes the last one and returns
    the split's manifest entry."""

    def __init__(self, directory: Path, split: str, lm_dtype: np.dtype, topic_dtype: np.dtype,
                 shard_words: int = DEFAULT_SHARD_WORDS):
        if shard_words < 1:
            raise ValueError(f"shard_words must be positive, got {shard_words}")
        self.directory, self.split = Path(directory), split
        self.dtypes = {"lm_ids": lm_dtype, "topic_ids": topic_dtype,
                       **{name: np.dtype(np.int64) for name in OFFSET_FIELDS}}
        self.shard_words = shard_words
        self.shards: list[dict] = []
        self.totals = {"documents": 0, "sentences": 0, "words": 0, "topic_words": 0}
        #: [V] how often each LM id has been written (as long as the largest id + 1)
        self.lm_counts = np.zeros(0, np.int64)
        self._begin()

    def _begin(self) -> None:
        self._buffers = {name: _Buffer(dtype) for name, dtype in self.dtypes.items()}
        self._first = dict(self.totals)

    def add(self, line: int, sentences: Sequence[Sequence[int]],
            topic_sentences: Sequence[Sequence[int]]) -> None:
        """One document (source ``line``): each sentence's LM ids and topic-vocabulary ids."""
        buffers, totals = self._buffers, self.totals
        buffers["doc_offsets"].extend([totals["sentences"]])
        buffers["doc_lines"].extend([line])
        lengths = np.array([len(words) for words in sentences], np.int64)
        topic_lengths = np.array([len(topic) for topic in topic_sentences], np.int64)
        buffers["sent_offsets"].extend(totals["words"] + np.cumsum(lengths) - lengths)
        buffers["topic_offsets"].extend(totals["topic_words"] + np.cumsum(topic_lengths)
                                        - topic_lengths)
        buffers["lm_ids"].extend(list(itertools.chain.from_iterable(sentences)))
        buffers["topic_ids"].extend(list(itertools.chain.from_iterable(topic_sentences)))
        totals["words"] += int(lengths.sum())
        totals["topic_words"] += int(topic_lengths.sum())
        totals["sentences"] += len(sentences)
        totals["documents"] += 1
        if totals["words"] - self._first["words"] >= self.shard_words:
            self._flush()

    def _flush(self) -> None:
        name = shard_name(self.split, len(self.shards))
        path = self.directory / name
        tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
        try:
            with h5py.File(tmp, "w") as h5:
                for field in ID_FIELDS + OFFSET_FIELDS:
                    h5.create_dataset(field, data=self._buffers[field].array())
                h5.attrs["format"] = SHARD_FORMAT
                h5.attrs["split"] = self.split
                h5.attrs["index"] = len(self.shards)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        self.lm_counts = add_counts(self.lm_counts,
                                    np.bincount(self._buffers["lm_ids"].array()))
        counts = {key: self.totals[key] - self._first[key] for key in self.totals}
        self.shards.append({"file": name, **counts, "sha256": file_digest(path)})
        self._begin()

    def close(self) -> dict:
        """Write the last shard and the split's LM id counts; the split's manifest entry
        (its shards, counts file and totals)."""
        if self.totals["documents"] > self._first["documents"] or not self.shards:
            self._flush()
        name = f"{self.split}-counts.npy"
        path = self.directory / name
        tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as handle:
                np.save(handle, self.lm_counts)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return {"shards": self.shards, "lm_counts": {"file": name, "sha256": file_digest(path)},
                **self.totals}


def add_counts(total: np.ndarray, more: np.ndarray) -> np.ndarray:
    """``total + more`` for two count vectors of any lengths (the longer one's)."""
    if len(more) > len(total):
        total, more = more, total
    total = total.astype(np.int64, copy=True)
    total[:len(more)] += more
    return total


def check_file(path: Path, sha256: str | None, what: str, verify: bool) -> str:
    """Check that a file of the prepared corpus is there and (with ``verify``) has the
    manifest's SHA-256: a one-line :class:`CorruptShard` naming ``what`` and ``path``
    otherwise. Returns the advice every such error ends with."""
    redo = f"delete {path.parent} to prepare the corpus again"
    if not path.is_file():
        raise CorruptShard(f"{what} {path} is missing; {redo}")
    if verify and file_digest(path) != sha256:
        raise CorruptShard(f"{what} {path} does not match its checksum (damaged, truncated or "
                           f"from another preparation); {redo}")
    return redo


def open_counts(directory: Path, entry: dict, split: str, verify: bool = True
                ) -> np.ndarray | None:
    """A split's LM id counts ([V'] int64, V' at most the vocabulary), checked against its
    manifest ``entry``; None for a preparation that stored none (one made by an earlier
    version of this format), whose counts are then counted from the ids."""
    counts = entry.get("lm_counts")
    if counts is None:
        return None
    path = Path(directory) / counts["file"]
    redo = check_file(path, counts.get("sha256"), f"{split} counts file", verify)
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise CorruptShard(f"{split} counts {path} are unreadable ({err}); {redo}") from None
    if array.ndim != 1 or array.dtype != np.int64 or int(array.sum()) != entry["words"]:
        raise CorruptShard(f"{split} counts {path} do not add up to the split's "
                           f"{entry['words']} words; {redo}")
    return array


def write_manifest(directory: Path, manifest: dict) -> None:
    """``manifest.json`` in ``directory`` (written last: its presence marks a complete
    preparation)."""
    from tcnlm_tf.data.corpus import write_text
    write_text(Path(directory) / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))


def read_manifest(directory: Path, key: str) -> dict:
    """The manifest of the prepared corpus in ``directory``, checked: its format, and that
    it was prepared for the cache ``key`` (a :class:`CorruptShard` otherwise)."""
    path = Path(directory) / MANIFEST
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as err:
        raise CorruptShard(f"{path} is unreadable ({err}); delete {directory} to prepare the "
                           "corpus again") from None
    if not isinstance(manifest, dict) or manifest.get("format") != SHARD_FORMAT \
            or manifest.get("key") != key:
        raise CorruptShard(f"{path} is of another format or preparation (format "
                           f"{manifest.get('format') if isinstance(manifest, dict) else '?'}, "
                           f"expected {SHARD_FORMAT}, and key {key[:16]}); delete {directory} "
                           "to prepare the corpus again")
    return manifest


def _memmap(h5: h5py.File, name: str, path: Path) -> np.ndarray:
    """Dataset ``name`` of an open shard as a read-only memory map of the file (an empty
    array for an empty dataset, which HDF5 allocates no space for)."""
    dataset = h5[name]
    if dataset.size == 0:
        return np.zeros(dataset.shape, dataset.dtype)
    offset = dataset.id.get_offset()
    if offset is None or dataset.chunks is not None or dataset.compression is not None:
        raise CorruptShard(f"{path}: dataset {name} is not stored contiguously; delete the "
                           "prepared corpus to prepare it again")
    return np.memmap(path, dtype=dataset.dtype, mode="r", offset=offset, shape=dataset.shape)


def open_shard(path: Path, entry: dict, split: str, index: int,
               verify: bool = True) -> dict[str, np.ndarray]:
    """The arrays of one shard ({field: read-only memory map}), checked against its
    manifest ``entry``: checksum (with ``verify``), format, split, position and sizes."""
    path = Path(path)
    redo = check_file(path, entry.get("sha256"), "shard", verify)
    try:
        with h5py.File(path, "r") as h5:
            if (h5.attrs.get("format"), h5.attrs.get("split"), h5.attrs.get("index")) != \
                    (SHARD_FORMAT, split, index):
                raise CorruptShard(f"shard {path} is not shard {index} of split {split} in "
                                   f"format {SHARD_FORMAT}; {redo}")
            arrays = {name: _memmap(h5, name, path) for name in ID_FIELDS + OFFSET_FIELDS}
    except (OSError, KeyError) as err:
        raise CorruptShard(f"shard {path} is unreadable ({err}); {redo}") from None
    sizes = {"lm_ids": entry["words"], "topic_ids": entry["topic_words"],
             "sent_offsets": entry["sentences"], "topic_offsets": entry["sentences"],
             "doc_offsets": entry["documents"], "doc_lines": entry["documents"]}
    wrong = [name for name, size in sizes.items() if len(arrays[name]) != size]
    if wrong:
        raise CorruptShard(f"shard {path}: {', '.join(wrong)} not of the sizes its manifest "
                           f"gives; {redo}")
    return arrays


class ShardedArray(np.lib.mixins.NDArrayOperatorsMixin):
    """The concatenation of one array's pieces (one per shard), read without copying them
    together: ``len``, integer, slice (step 1) and integer-array indexing, each touching
    only the pieces it needs; ``tail`` is one more element after the last piece (the
    split's total, which ends an offset array). ``np.asarray``, numpy functions and
    arithmetic read the whole array into memory (for small corpora and tests)."""

    def __init__(self, pieces: Iterable[np.ndarray], tail: int | None = None,
                 dtype: np.dtype | None = None):
        pieces = list(pieces)
        #: the memory maps the pieces read (see :meth:`release`)
        self.maps = [piece._mmap for piece in pieces
                     if isinstance(piece, np.memmap) and piece._mmap is not None]
        self.pieces = [np.asarray(piece) for piece in pieces]
        self.dtype = np.dtype(dtype) if dtype is not None else (
            self.pieces[0].dtype if self.pieces else np.dtype(np.int64))
        if tail is not None:
            self.pieces.append(np.asarray([tail], self.dtype))
        self.starts = np.cumsum([0] + [len(piece) for piece in self.pieces])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def release(self) -> None:
        """Unmap the pages of the memory maps that reads have mapped into this process
        (``madvise(MADV_DONTNEED)``): they stay in the page cache, and the next read of one
        maps it again (a minor fault), so nothing is lost. Without it, every page a run
        has read, and the pages the kernel maps around each (fault-around: 64 KB), stay
        in the process's resident set, up to the whole split by the end of an epoch."""
        for mapping in self.maps:
            mapping.madvise(mmap.MADV_DONTNEED)

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    @property
    def ndim(self) -> int:
        return 1

    @property
    def size(self) -> int:
        return len(self)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = (np.concatenate(self.pieces).astype(self.dtype, copy=False) if self.pieces
                 else np.zeros(0, self.dtype))
        return whole if dtype is None else whole.astype(dtype, copy=False)

    def astype(self, dtype, copy: bool = True) -> np.ndarray:
        return np.asarray(self).astype(dtype)

    def tolist(self) -> list:
        return np.asarray(self).tolist()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(np.asarray(x) if isinstance(x, ShardedArray) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def searchsorted(self, values, side: str = "left") -> np.ndarray:
        """``np.searchsorted`` of the whole (sorted) array, searching only the pieces that
        hold the values."""
        values = np.asarray(values)
        kept = [i for i, piece in enumerate(self.pieces) if len(piece)]
        firsts = np.array([self.pieces[i][0] for i in kept])
        which = np.searchsorted(firsts, values, side) - 1
        out = np.zeros(values.shape, np.int64)
        for k in np.unique(which[which >= 0]):
            mask = which == k
            piece = kept[k]
            out[mask] = self.starts[piece] + np.searchsorted(self.pieces[piece], values[mask],
                                                             side)
        return out

    def _piece(self, index: int) -> tuple[int, int]:
        piece = int(np.searchsorted(self.starts, index, side="right")) - 1
        return piece, index - int(self.starts[piece])

    def __getitem__(self, key):
        n = len(self)
        if isinstance(key, (int, np.integer)):
            index = int(key) + n if key < 0 else int(key)
            if not 0 <= index < n:
                raise IndexError(f"index {key} is out of bounds for length {n}")
            piece, local = self._piece(index)
            return self.pieces[piece][local]
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                return np.asarray(self)[key]
            if stop <= start:
                return np.zeros(0, self.dtype)
            first, begin = self._piece(start)
            last, end = self._piece(stop - 1)
            if first == last:
                return np.asarray(self.pieces[first][begin:end + 1], self.dtype)
            parts = [self.pieces[first][begin:]] + self.pieces[first + 1:last] + \
                [self.pieces[last][:end + 1]]
            return np.concatenate(parts).astype(self.dtype, copy=False)
        index = np.asarray(key)
        if index.dtype == bool:
            return np.asarray(self)[index]
        index = np.where(index < 0, index + n, index)
        if index.size and (index.min() < 0 or index.max() >= n):
            raise IndexError(f"index out of bounds for length {n}")
        out = np.empty(index.shape, self.dtype)
        which = np.searchsorted(self.starts, index, side="right") - 1
        for piece in np.unique(which):
            mask = which == piece
            out[mask] = self.pieces[piece][index[mask] - self.starts[piece]]
        return out


def searchsorted(array, values, side: str = "left") -> np.ndarray:
    """``np.searchsorted`` of a numpy array or a :class:`ShardedArray`."""
    if isinstance(array, ShardedArray):
        return array.searchsorted(values, side)
    return np.searchsorted(array, values, side)


def chunks(array) -> list[np.ndarray]:
    """The pieces of a :class:`ShardedArray` (its memory maps), or ``[array]``: for passes
    over a whole array that need no more than one piece in memory."""
    return list(array.pieces) if isinstance(array, ShardedArray) else [np.asarray(array)]
