"""One array of a prepared corpus's split, stored in pieces (one per shard, each a memory
map of its file), read as one: :class:`ShardedArray`.

Scattered elements (a batch's sentences, their offsets) of an array over
:data:`PREAD_ABOVE` bytes are read with ``pread``, not through the memory maps. A page
touched through a map is mapped into the process together with the pages the kernel maps
around it, a whole large folio of the page cache where the filesystem keeps them (up to 2
MB on ext4 under Linux 6: measured 0.2 to 2.3 MB a random touch), so that one batch of 64
random sentences of a large corpus maps over 100 MB of its ids and offsets, and the
batches in flight several times that, all counted in the process's resident set. ``pread``
copies the bytes asked for into a small buffer and maps nothing (:class:`_FileArray`).
"""
from __future__ import annotations

import collections
import mmap
import os
import threading
from typing import Iterable

import numpy as np

#: elements closer than this many bytes are read with one call (a system call costs
#: about what copying a page does)
GAP_BYTES = 4096
#: arrays of at most this many bytes are read through their memory maps, which is faster
#: (no system call a run of elements) and maps no more than the array: all of a small
#: corpus's arrays, a large one's document offsets
PREAD_ABOVE = 64 << 20


class _Descriptors:
    """Read-only descriptors of the shard files, shared by their arrays: at most
    :attr:`LIMIT` open at once (the least recently used closed first, and opened again
    when needed), so that a corpus of thousands of shards stays within the process's
    limit of open files. Each is checked to be the file that was mapped (its device and
    inode): a file replaced since is an ``OSError``, never another corpus's bytes."""

    LIMIT = 128

    def __init__(self):
        self._open: collections.OrderedDict[tuple[int, int], int] = collections.OrderedDict()
        self._lock = threading.Lock()

    def pread(self, path: str, identity: tuple[int, int], size: int, offset: int) -> bytes:
        """``size`` bytes at ``offset`` of the file ``identity`` (device, inode) at ``path``."""
        with self._lock:         # held while reading: no other thread closes the descriptor
            fd = self._open.pop(identity, None)
            if fd is None:
                fd = os.open(path, os.O_RDONLY)
                stat = os.fstat(fd)
                if (stat.st_dev, stat.st_ino) != identity:
                    os.close(fd)
                    raise OSError(f"{path} was replaced while it was in use: start again")
                while len(self._open) >= self.LIMIT:
                    os.close(self._open.popitem(last=False)[1])
            self._open[identity] = fd
            return os.pread(fd, size, offset)


_DESCRIPTORS = _Descriptors()


class _FileArray:
    """A 1-D array stored at byte ``base`` of a file, read with ``pread`` (:meth:`gather`)."""

    def __init__(self, path: str, base: int, dtype: np.dtype, length: int):
        self.path, self.base, self.dtype, self.length = path, base, np.dtype(dtype), length
        stat = os.stat(path)
        self.identity = (stat.st_dev, stat.st_ino)

    @classmethod
    def of(cls, piece: np.ndarray) -> "_FileArray | None":
        """The file array behind a contiguous 1-D memory map of a file, or a slice of one
        (None for any other array). Where it starts in the file: the map's start (numpy maps
        from ``offset`` rounded down to the allocation granularity; a slice keeps its
        parent's ``offset``) plus how far into the map its data begin."""
        mapping = getattr(piece, "_mmap", None)
        if (not isinstance(piece, np.memmap) or mapping is None or piece.filename is None
                or piece.ndim != 1 or piece.strides[0] != piece.itemsize):
            return None
        mapped_from = piece.offset - piece.offset % mmap.ALLOCATIONGRANULARITY
        into = piece.ctypes.data - np.frombuffer(mapping, np.uint8).ctypes.data
        return cls(piece.filename, mapped_from + into, piece.dtype, len(piece))

    def gather(self, index: np.ndarray) -> np.ndarray:
        """Elements ``index`` (int64, any shape, each in ``[0, length)``): each run of
        nearby ones with one ``pread``. ``OSError`` if the file has become shorter."""
        flat = np.asarray(index, np.int64).ravel()
        if not flat.size:
            return np.zeros(np.shape(index), self.dtype)
        wanted, where = np.unique(flat, return_inverse=True)
        values = np.empty(wanted.shape, self.dtype)
        size = self.dtype.itemsize
        breaks = np.flatnonzero(np.diff(wanted) > max(1, GAP_BYTES // size)) + 1
        for first, end in zip(np.concatenate([[0], breaks]),
                              np.concatenate([breaks, [len(wanted)]])):
            lo, hi = int(wanted[first]), int(wanted[end - 1]) + 1
            data = _DESCRIPTORS.pread(self.path, self.identity, (hi - lo) * size,
                                      self.base + lo * size)
            if len(data) != (hi - lo) * size:
                raise OSError(f"{self.path} became shorter while it was read (element "
                              f"{hi - 1} of {self.length} is past its end)")
            values[first:end] = np.frombuffer(data, self.dtype)[wanted[first:end] - lo]
        return values[where].reshape(np.shape(index))


class ShardedArray(np.lib.mixins.NDArrayOperatorsMixin):
    """The concatenation of one array's pieces (one per shard), read without copying them
    together: ``len``, integer, slice (step 1) and integer-array indexing, each touching
    only the pieces it needs (integer arrays of memory-mapped pieces read with ``pread``:
    :class:`_FileArray`); ``tail`` is one more element after the last piece (the split's
    total, which ends an offset array). ``np.asarray``, numpy functions and arithmetic
    read the whole array into memory (for small corpora and tests)."""

    def __init__(self, pieces: Iterable[np.ndarray], tail: int | None = None,
                 dtype: np.dtype | None = None):
        pieces = list(pieces)
        #: the memory maps the pieces read (see :meth:`release`)
        self.maps = [piece._mmap for piece in pieces
                     if isinstance(piece, np.memmap) and piece._mmap is not None]
        #: each memory-mapped piece's file and byte offset, where integer arrays index it
        #: with ``pread`` (arrays larger than :data:`PREAD_ABOVE`); None: through the map
        large = sum(piece.nbytes for piece in pieces) > PREAD_ABOVE
        self.files = [_FileArray.of(piece) if large else None for piece in pieces]
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
        has read through a map (slices, searches), and the pages the kernel maps around
        each, stay in the process's resident set, up to the whole split by the end of an
        epoch. (Integer-array indexing, a batch's reads, maps nothing: :func:`gather`.)"""
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
            local = index[mask] - self.starts[piece]
            file = self.files[piece] if piece < len(self.files) else None
            out[mask] = self.pieces[piece][local] if file is None else file.gather(local)
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
