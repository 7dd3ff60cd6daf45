"""An epoch's shuffled order of examples, in memory for small splits and computed per batch
for large ones.

A split of at most :data:`EXPLICIT_LIMIT` examples is shuffled as it always has been: the
permutation ``np.random.default_rng(seed).permutation(n)``, an array of 4 bytes an example.
A larger split gets a :class:`KeyedPermutation`: a pseudo-random permutation of the same
range that holds no array at all and computes the examples of any slice of the epoch when a
batch asks for them, so that memory does not grow with the corpus. Both are uniform
shuffles for training purposes; they are different permutations, so the limit is where a
corpus's example order (not its statistics) changes.
"""
from __future__ import annotations

import numpy as np

#: at most this many examples (16 MB of int32 order) are shuffled with numpy's generator
EXPLICIT_LIMIT = 1 << 22
#: rounds of the Feistel network (four give a pseudo-random permutation: Luby and Rackoff
#: 1988; two more for margin)
ROUNDS = 6
_MUL1, _MUL2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijective scramble of 64-bit words (uint64 arithmetic
    wraps)."""
    values = (values ^ (values >> np.uint64(30))) * _MUL1
    values = (values ^ (values >> np.uint64(27))) * _MUL2
    return values ^ (values >> np.uint64(31))


class KeyedPermutation:
    """A permutation of ``range(n)`` fixed by ``seed`` whose slices are computed on demand:
    ``order[a:b]`` is the examples at positions ``a`` to ``b - 1`` of the epoch, int64.

    Position ``p`` goes through a balanced Feistel network (:data:`ROUNDS` rounds keyed from
    ``seed``, round function :func:`_mix`) over ``[0, 4^h)``, the smallest such range that
    holds ``n``; a result of ``n`` or more goes through the network again until it falls
    below ``n`` ("cycle walking", Black and Rogaway 2002), which keeps the map a bijection of
    ``range(n)``: at most 4 passes on average. Memory: the batch's positions, nothing more.
    """

    def __init__(self, n: int, seed: int):
        self.n = int(n)
        self.half = max(1, (max(self.n - 1, 1).bit_length() + 1) // 2)
        self.mask = np.uint64((1 << self.half) - 1)
        self.keys = np.random.default_rng(seed).integers(
            0, np.iinfo(np.uint64).max, size=ROUNDS, dtype=np.uint64, endpoint=True)

    def __len__(self) -> int:
        return self.n

    def _encrypt(self, values: np.ndarray) -> np.ndarray:
        shift = np.uint64(self.half)
        left, right = values >> shift, values & self.mask
        for key in self.keys:
            left, right = right, left ^ (_mix(right ^ key) & self.mask)
        return (left << shift) | right

    def __getitem__(self, key: slice) -> np.ndarray:
        if not isinstance(key, slice):
            raise TypeError("a KeyedPermutation is read in slices: order[a:b]")
        values = np.arange(*key.indices(self.n), dtype=np.uint64)
        values = self._encrypt(values)
        outside = values >= self.n
        while outside.any():
            values[outside] = self._encrypt(values[outside])
            outside = values >= self.n
        return values.astype(np.int64)


def shuffled_order(n: int, seed: int, dtype: np.dtype = np.dtype(np.int64)):
    """The examples ``range(n)`` in the order of seed ``seed``: an array of ``dtype`` (the
    same as ``np.random.default_rng(seed).permutation(n)``) for at most
    :data:`EXPLICIT_LIMIT` examples, a :class:`KeyedPermutation` beyond."""
    if n > EXPLICIT_LIMIT:
        return KeyedPermutation(n, seed)
    order = np.arange(n, dtype=dtype)
    np.random.default_rng(seed).shuffle(order)
    return order
