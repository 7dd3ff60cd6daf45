"""What a prepared corpus's shards must hold, and the checks that a shard, a manifest entry
or a vocabulary holds it (:mod:`tcnlm_tf.data.shards` runs them when it opens a prepared
corpus). Each check reads a memory-mapped array :data:`CHECK_CHUNK` entries at a time and
unmaps what it read, so that its memory does not grow with the shard; each refusal is a
one-line :class:`CorruptShard` naming the file and what is wrong.
"""
from __future__ import annotations

import mmap
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from tcnlm_tf.errors import UserError

#: what a split's manifest entry, and each of its shards', counts
TOTALS = ("documents", "sentences", "words", "topic_words")
#: the vocabularies as messages name them (each id field is of the one its name begins with)
VOCABULARY_NAMES = {"lm": "LM vocabulary", "topic": "topic vocabulary"}
#: how many entries of an array the content checks read at once (8 MB of int64 offsets,
#: 2 MB of uint16 ids): what a check holds of a memory-mapped shard
CHECK_CHUNK = 1 << 20


class CorruptShard(UserError):
    """A shard or manifest that is damaged, truncated, or from another preparation."""


def id_dtype(vocab_size: int) -> np.dtype:
    """uint16 where every id fits (at most 65,536 words), else int32."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.int32)


def redo_advice(directory: Path) -> str:
    """The advice every refusal of the prepared corpus in ``directory`` ends with."""
    return f"delete {directory} to prepare the corpus again"


def is_count(value) -> bool:
    """A non-negative integer (as JSON gives one: not a float, not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def manifest_entry(manifest: Path, value, where: str, file: str | None,
                   counts: Sequence[str]) -> dict:
    """``value``, the entry of the ``manifest`` file for ``where``, checked: a dict with the
    non-negative integer ``counts`` and, for a file, that file's name as the preparation
    gives it (``file``) and a SHA-256; a :class:`CorruptShard` naming the manifest
    otherwise (the entries name the files opened, and size the arrays read)."""
    if not (isinstance(value, dict) and all(is_count(value.get(key)) for key in counts)
            and (file is None or (value.get("file") == file
                                  and isinstance(value.get("sha256"), str)))):
        raise CorruptShard(f"{manifest} has no valid entry for {where}; "
                           f"{redo_advice(manifest.parent)}")
    return value


def _chunks(array: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(position, piece) of a 1-D ``array``, :data:`CHECK_CHUNK` entries at a time. The
    pages of a memory map that a piece read are unmapped once the piece is checked (see
    :meth:`~tcnlm_tf.data.sharded_array.ShardedArray.release`: they stay in the page
    cache), so a check holds one piece of a shard, whatever the shard's size."""
    mapping = getattr(array, "_mmap", None)
    for begin in range(0, len(array), CHECK_CHUNK):
        yield begin, np.asarray(array[begin:begin + CHECK_CHUNK])
        if mapping is not None:
            mapping.madvise(mmap.MADV_DONTNEED)


def check_ids(path: Path, field: str, ids: np.ndarray, vocab_size: int) -> tuple[int, int]:
    """A shard's ids (``field``) checked against their vocabulary of ``vocab_size`` words:
    the dtype the preparation writes for it (:func:`id_dtype`; an id that is not an integer
    would be truncated, or fail, only when a batch reads it) and every id in
    [0, ``vocab_size``) (one outside fails the embedding lookup in the middle of an epoch,
    or on a GPU silently reads zeros). Returns the largest id (-1 for none) and the ids'
    sum, which :func:`~tcnlm_tf.data.shards.open_counts` compares with the counts file's
    (a sum, not a count of each id, which would take longer than the checksum)."""
    expected, redo = id_dtype(vocab_size), redo_advice(path.parent)
    name = VOCABULARY_NAMES[field.removesuffix("_ids")]
    if ids.dtype != expected:
        raise CorruptShard(f"shard {path}: {field} are {ids.dtype}, not the {expected} ids of "
                           f"a vocabulary of {vocab_size} words; {redo}")
    largest, total = -1, 0
    for _, chunk in _chunks(ids):
        low, high = int(chunk.min()), int(chunk.max())
        if low < 0 or high >= vocab_size:
            raise CorruptShard(f"shard {path}: {field} hold id {low if low < 0 else high}, "
                               f"outside the {name} of {vocab_size} words; {redo}")
        largest, total = max(largest, high), total + int(chunk.sum(dtype=np.int64))
    return largest, total


def _check_ascending(path: Path, field: str, values: np.ndarray, previous: int,
                     strict: bool) -> None:
    """``values`` (int64) never go down from ``previous`` on (with ``strict``, always up),
    compared rather than subtracted, so that no value can overflow into order."""
    out_of_order = np.less_equal if strict else np.less
    for begin, chunk in _chunks(values):
        wrong = np.flatnonzero(out_of_order(chunk[1:], chunk[:-1])) + 1
        at = 0 if out_of_order(chunk[0], previous) else (int(wrong[0]) if len(wrong) else None)
        if at is not None:
            raise CorruptShard(
                f"shard {path}: {field} {'do not increase' if strict else 'decrease'} at "
                f"entry {begin + at} ({previous if at == 0 else chunk[at - 1]} then "
                f"{chunk[at]}); {redo_advice(path.parent)}")
        previous = int(chunk[-1])


def _check_int64(path: Path, field: str, values: np.ndarray) -> None:
    """Offsets and line numbers are int64, as written (float ones fail as indices)."""
    if values.dtype != np.int64:
        raise CorruptShard(f"shard {path}: {field} are {values.dtype}, not int64; "
                           f"{redo_advice(path.parent)}")


def check_offsets(path: Path, field: str, offsets: np.ndarray, first: int, end: int) -> None:
    """A shard's offsets (``field``) checked: int64, beginning at ``first`` (where the shard
    begins in the split), never going down, and never past ``end`` (where it ends): a
    sentence or document of any other offsets would read another's words, or past the
    data."""
    _check_int64(path, field, offsets)
    if not len(offsets):
        return
    if offsets[0] != first:
        raise CorruptShard(f"shard {path}: {field} begin at {offsets[0]}, not at {first} where "
                           f"the shard begins in the split; {redo_advice(path.parent)}")
    _check_ascending(path, field, offsets, first, strict=False)
    if offsets[-1] > end:
        raise CorruptShard(f"shard {path}: {field} reach {offsets[-1]}, past {end} where the "
                           f"shard ends in the split; {redo_advice(path.parent)}")


def check_shard(path: Path, arrays: dict[str, np.ndarray], begins: dict[str, int],
                vocab_sizes: tuple[int, int]) -> tuple[int, int]:
    """The contents of one shard (``arrays``, its memory maps) checked, one pass over it:
    what its checksum cannot vouch for when the manifest was written for wrong contents.
    Its ids of their vocabularies (``vocab_sizes``: the LM's and the topic model's sizes),
    its offsets within its part of the split (``begins``: the split's words, topic words
    and sentences in the shards before it) and its documents' source lines ascending from
    1. Returns its largest LM id and their sum (:func:`check_ids`)."""
    lm_ids = check_ids(path, "lm_ids", arrays["lm_ids"], vocab_sizes[0])
    check_ids(path, "topic_ids", arrays["topic_ids"], vocab_sizes[1])
    for field, total, within in (("sent_offsets", "words", "lm_ids"),
                                 ("topic_offsets", "topic_words", "topic_ids"),
                                 ("doc_offsets", "sentences", "sent_offsets")):
        first = begins[total]
        check_offsets(path, field, arrays[field], first, first + len(arrays[within]))
    _check_int64(path, "doc_lines", arrays["doc_lines"])
    _check_ascending(path, "doc_lines", arrays["doc_lines"], 0, strict=True)
    return lm_ids
