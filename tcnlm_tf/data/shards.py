"""A prepared corpus on disk: each split in shards of whole documents, memory-mapped when read.

Layout of one prepared corpus (a directory, ``<cache_dir>/prepared/<dataset>-<key>/``)::

    manifest.json        format version, cache key, each vocabulary's file, size and
                         SHA-256, every shard of every split: its file, documents,
                         sentences, words, topic words and SHA-256, and each split's totals
                         and counts file
    lm_vocab.txt         the LM vocabulary, one word per line (id = line number from 0)
    topic_vocab.txt      the topic-model vocabulary
    train-00000.h5 ...   the shards of each split, in order
    train-counts.npy ... each split's LM id counts ([largest id + 1] int64: how often
                         each id is a word of the split), so that start-up needs no pass
                         over the text

A shard is an HDF5 file of contiguous, uncompressed datasets (so that each can be
memory-mapped: :func:`open_shard`) holding whole documents. Every offset is **global**
(a position in the whole split), so the shards of a split read as one array each
(:class:`~tcnlm_tf.data.sharded_array.ShardedArray`) and
:class:`tcnlm_tf.data.loading.SplitArrays` keeps its meaning:

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
Opening checks the manifest's entries, each file's checksum, each shard's sizes and format,
and, in the pass that follows each checksum's, the contents, which a checksum cannot vouch
for when the manifest was written for wrong contents (by a faulty or older writer): ids of
the preparation's dtype inside their vocabulary, offsets that ascend within their shard's
part of the split (:func:`check_shard`), counts files that agree with the ids. It
refuses a damaged, truncated, foreign or inconsistent file with a one-line
:class:`CorruptShard` naming it and what is wrong.
"""
from __future__ import annotations

import hashlib
import io
import itertools
import json
from pathlib import Path
from typing import Sequence

import h5py
import numpy as np

from tcnlm_tf.data.corpus import atomic_write, write_bytes
from tcnlm_tf.data.shard_checks import (TOTALS, VOCABULARY_NAMES, CorruptShard, check_shard,
                                        manifest_entry, redo_advice)
from tcnlm_tf.data.vocab import Vocabulary

#: the prepared corpus's layout version (the manifest's ``format`` and each shard's): 2
#: gave the manifest the vocabularies' sizes and checksums
SHARD_FORMAT = 2
#: a new shard is begun once the current one holds at least this many words (about 10 MB of
#: arrays held while writing, 2 bytes a word and 16 a sentence, and a file of that size)
DEFAULT_SHARD_WORDS = 1 << 22
#: the arrays of a shard, in order (the ids of the dtype
#: :func:`~tcnlm_tf.data.shard_checks.id_dtype`, the offsets int64)
ID_FIELDS = ("lm_ids", "topic_ids")
OFFSET_FIELDS = ("sent_offsets", "topic_offsets", "doc_offsets", "doc_lines")
MANIFEST = "manifest.json"
#: the vocabularies of a prepared corpus: their names in the manifest, and their files
VOCABULARIES = {"lm": "lm_vocab.txt", "topic": "topic_vocab.txt"}


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
        """Write the shard begun last. The HDF5 file is made in memory and written with
        :func:`~tcnlm_tf.data.corpus.atomic_write`: a full disk is then one ``OSError``
        naming the shard, where h5py writing the file itself raises multi-line errors
        and may crash the process at exit."""
        name = shard_name(self.split, len(self.shards))
        path = self.directory / name
        image = io.BytesIO()
        with h5py.File(image, "w") as h5:
            for field in ID_FIELDS + OFFSET_FIELDS:
                h5.create_dataset(field, data=self._buffers[field].array())
            h5.attrs["format"] = SHARD_FORMAT
            h5.attrs["split"] = self.split
            h5.attrs["index"] = len(self.shards)
        write_bytes(path, image.getvalue())
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
        atomic_write(path, lambda handle: np.save(handle, self.lm_counts))
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
    redo = redo_advice(path.parent)
    if not path.is_file():
        raise CorruptShard(f"{what} {path} is missing; {redo}")
    if verify and file_digest(path) != sha256:
        raise CorruptShard(f"{what} {path} does not match its checksum (damaged, truncated or "
                           f"from another preparation); {redo}")
    return redo


def open_counts(directory: Path, entry: dict, split: str, vocab_size: int,
                verify: bool = True, ids: tuple[int, int] | None = None) -> np.ndarray:
    """A split's LM id counts ([V'] int64, V' at most the LM vocabulary's ``vocab_size``),
    checked against its manifest ``entry`` (their total is the split's words) and, where
    :func:`check_shard` read the split's ids (``ids``: the largest and their sum), against
    those: as long as the largest id + 1, as written, and giving the ids' sum."""
    counts = entry["lm_counts"]
    path = Path(directory) / counts["file"]
    redo = check_file(path, counts.get("sha256"), f"{split} counts file", verify)
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise CorruptShard(f"{split} counts {path} are unreadable ({err}); {redo}") from None
    if array.ndim != 1 or array.dtype != np.int64:
        raise CorruptShard(f"{split} counts {path} are of shape {array.shape} and dtype "
                           f"{array.dtype}, not one int64 count per id; {redo}")
    if len(array) > vocab_size:
        raise CorruptShard(f"{split} counts {path} count {len(array)} ids, more than the "
                           f"LM vocabulary's {vocab_size} words; {redo}")
    if array.min(initial=0) < 0 or int(array.sum()) != entry["words"]:
        raise CorruptShard(f"{split} counts {path} hold a negative count or do not add up to "
                           f"the split's {entry['words']} words; {redo}")
    if ids is not None:
        largest, total = ids[0], ids[1] % (1 << 64)     # the sum as uint64 arithmetic gives it
        counted = int(array.astype(np.uint64) @ np.arange(len(array), dtype=np.uint64))
        if (len(array) - 1, counted) != (largest, total):
            raise CorruptShard(f"{split} counts {path} are not the counts of the split's ids "
                               f"(ids up to {len(array) - 1} adding up to {counted}, where the "
                               f"shards hold ids up to {largest} adding up to {total}); {redo}")
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
    wrong = [name for name, size in sizes.items() if arrays[name].shape != (size,)]
    if wrong:
        raise CorruptShard(f"shard {path}: {', '.join(wrong)} not of the sizes its manifest "
                           f"gives; {redo}")
    return arrays


def vocabulary_entries(directory: Path, vocabularies: dict[str, Vocabulary]) -> dict:
    """The manifest's ``vocabularies``: for each one saved in ``directory`` (by its name in
    :data:`VOCABULARIES`), its file, its size in words and its SHA-256."""
    return {what: {"file": VOCABULARIES[what], "words": len(vocabulary),
                   "sha256": file_digest(Path(directory) / VOCABULARIES[what])}
            for what, vocabulary in vocabularies.items()}


def open_vocabulary(directory: Path, manifest: dict, what: str, verify: bool = True,
                    unk: str | None = None) -> Vocabulary:
    """The ``what`` vocabulary (``lm`` or ``topic``) of the prepared corpus in ``directory``
    (``unk``: its unknown word), checked against the ``manifest``: checksum (with
    ``verify``), that it reads as a vocabulary, and its size."""
    directory = Path(directory)
    entries = manifest.get("vocabularies")
    entry = manifest_entry(directory / MANIFEST,
                           entries.get(what) if isinstance(entries, dict) else None,
                           f"the {VOCABULARY_NAMES[what]}", VOCABULARIES[what], ("words",))
    path, name = directory / entry["file"], VOCABULARY_NAMES[what]
    redo = check_file(path, entry["sha256"], name, verify)
    try:
        vocabulary = Vocabulary.load(path, unk=unk)
    except KeyError:
        raise CorruptShard(f"{name} {path} is unreadable (it has no {unk}); {redo}") from None
    except (OSError, ValueError) as err:
        raise CorruptShard(f"{name} {path} is unreadable ({err}); {redo}") from None
    if len(vocabulary) != entry["words"]:
        raise CorruptShard(f"{name} {path} holds {len(vocabulary)} words, where its manifest "
                           f"gives {entry['words']}; {redo}")
    return vocabulary


def split_entry(directory: Path, manifest: dict, split: str) -> dict:
    """The ``manifest``'s entry for ``split``, checked: its totals, its shards (named as the
    preparation names them, each with its checksum and counts) adding up to them, and its
    counts file's entry."""
    path = Path(directory) / MANIFEST
    splits = manifest.get("splits")
    entry = manifest_entry(path, splits.get(split) if isinstance(splits, dict) else None,
                           f"split {split}", None, TOTALS)
    pieces = entry.get("shards")
    if not isinstance(pieces, list) or not pieces:
        raise CorruptShard(f"{path} lists no shard of split {split}; {redo_advice(path.parent)}")
    for index, piece in enumerate(pieces):
        manifest_entry(path, piece, f"shard {index} of split {split}",
                       shard_name(split, index), TOTALS)
    manifest_entry(path, entry.get("lm_counts"), f"the counts of split {split}",
                   f"{split}-counts.npy", ())
    wrong = [total for total in TOTALS if sum(piece[total] for piece in pieces) != entry[total]]
    if wrong:
        raise CorruptShard(f"{path}: the shards of split {split} do not add up to its "
                           f"{', '.join(wrong)}; {redo_advice(path.parent)}")
    return entry


def open_split(directory: Path, entry: dict, split: str, vocab_sizes: tuple[int, int],
               verify: bool = True) -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
    """The arrays of each shard of ``split`` (:func:`open_shard`) and its LM id counts
    (:func:`open_counts`), by its manifest ``entry`` (:func:`split_entry`). With ``verify``,
    each shard's contents are checked as well (:func:`check_shard`), in the pass that
    follows its checksum's, and the counts file against the LM ids seen there."""
    directory = Path(directory)
    begins = dict.fromkeys(("words", "topic_words", "sentences"), 0)
    largest, total = -1, 0
    opened = []
    for index, piece in enumerate(entry["shards"]):
        path = directory / piece["file"]
        arrays = open_shard(path, piece, split, index, verify)
        if verify:
            high, added = check_shard(path, arrays, begins, vocab_sizes)
            largest, total = max(largest, high), total + added
        begins = {key: begins[key] + piece[key] for key in begins}
        opened.append(arrays)
    return opened, open_counts(directory, entry, split, vocab_sizes[0], verify,
                               (largest, total) if verify else None)
