"""``IdSet``: a set of call ids at 16 bytes an id (a ``run`` job's seen ids, ``--resume``, the journal).

It is the one structure of a job that grows with the input, so it is built for size: 16 bytes an id
instead of ~90 for a str in a set.
"""

from __future__ import annotations

from array import array


def id_hash(key: str) -> int:
    """The 64-bit hash ``IdSet`` keeps for ``key`` (never 0; Python's ``hash``, so valid in one process)."""
    return (hash(key) & 0xFFFF_FFFF_FFFF_FFFF) or 1  # 0 marks an empty slot


class IdSet:
    """The ids a job has seen, at 16 bytes each, so a million-line input does not hold a million str
    objects (~90 bytes each in a set). It keeps 64-bit hashes in an open-addressing table: two distinct
    ids collide with probability ~n²/2⁶⁵ (3e-8 for a million ids), a risk worth the memory."""

    __slots__ = ("_count", "_mask", "_table")

    def __init__(self) -> None:
        self._table = array("Q", bytes(8 * 1024))
        self._mask = 1023
        self._count = 0

    _hash = staticmethod(id_hash)

    def __contains__(self, key: str) -> bool:
        h, table, mask = self._hash(key), self._table, self._mask
        i = h & mask
        while True:
            v = table[i]
            if v == h:
                return True
            if v == 0:
                return False
            i = (i + 1) & mask

    def add(self, key: str) -> bool:
        """Add ``key``; False when it was already there."""
        h = self._hash(key)
        if not self._put(h):
            return False
        self._count += 1
        if self._count * 2 > self._mask:
            old = self._table
            self._table = array("Q", bytes(16 * len(old)))
            self._mask = 2 * len(old) - 1
            for v in old:
                if v:
                    self._put(v)
        return True

    def _put(self, h: int) -> bool:
        table, mask = self._table, self._mask
        i = h & mask
        while True:
            v = table[i]
            if v == h:
                return False
            if v == 0:
                table[i] = h
                return True
            i = (i + 1) & mask

    def __len__(self) -> int:
        return self._count


__all__ = ["IdSet", "id_hash"]
