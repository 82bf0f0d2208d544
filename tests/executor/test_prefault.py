"""``fork.prefault``: after a fork, the pages a process wrote since are found in its pagemap, and copying
them ahead (``MADV_POPULATE_WRITE``) keeps every byte and leaves the copy the forked child holds as it
was. Real fork, real pagemap; skipped only where the kernel lacks the advice (Linux < 5.14)."""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator

import pytest

from toolfork.executor.backends.fork import prefault

PAGES = 2 * prefault.CHUNK // prefault.PAGE + 2


@contextlib.contextmanager
def _copy_held() -> Iterator[None]:
    """A forked child that holds every page as it was at the fork until the block ends (then it goes)."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(write)
        os.read(read, 1)  # EOF when the parent closes its end
        os._exit(0)
    os.close(read)
    try:
        yield
    finally:
        os.close(write)
        os.waitpid(child, 0)


def _address(buffer: bytearray) -> int:
    return ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))


def _covered(runs: list[tuple[int, int]], start: int, size: int) -> int:
    """How many bytes of [start, start + size) the runs cover."""
    return sum(max(0, min(a + n, start + size) - max(a, start)) for a, n in runs)


def _whole_pages(buffer: bytearray) -> tuple[int, int]:
    start = -(-_address(buffer) // prefault.PAGE) * prefault.PAGE
    return start, (PAGES - 2) * prefault.PAGE


def test_pages_written_after_a_fork_are_found_and_copied_ahead_with_their_bytes_kept() -> None:
    data = bytearray(os.urandom(PAGES * prefault.PAGE))
    start, size = _whole_pages(data)
    with _copy_held():
        assert _covered(prefault.hot_runs(1 << 20), start, size) == 0  # shared with the child since the fork
        data[start - _address(data)] ^= 0xFF  # one write: its page is copied, and ours alone
        assert _covered(prefault.hot_runs(1 << 20), start, size) == prefault.PAGE
        before = bytes(data)
        assert prefault.copy_ahead([(start, size)], lambda: False) is True  # all of it
        if not prefault._usable:
            pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux < 5.14)")
        assert bytes(data) == before  # copied, not changed
        assert _covered(prefault.hot_runs(1 << 20), start, size) == size  # every page ours now
        assert sum(n for _, n in prefault.hot_runs(3)) == 3 * prefault.PAGE  # bounded


def test_copying_ahead_stops_when_told() -> None:
    data = bytearray(os.urandom(PAGES * prefault.PAGE))
    start, size = _whole_pages(data)
    with _copy_held():
        asked: list[int] = []
        assert prefault.copy_ahead([(start, size)], lambda: bool(asked.append(1)) or len(asked) > 1) is False
        assert len(asked) == 2  # one chunk copied, then it stopped (and says so)
        assert _covered(prefault.hot_runs(1 << 20), start, size) == prefault.CHUNK
