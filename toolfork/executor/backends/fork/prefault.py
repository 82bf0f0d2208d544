"""Copy ahead the pages a session's process will likely write in its next call, while it waits for it.

Why: a checkpoint is a fork, and after a fork every page the session's process writes is first copied
(copy-on-write): a trivial Python cell writes hundreds of pages (reference counts, the allocator, the
frame stack), so it paid as many faults, in its own time. The pages the last call wrote are those the
next is likely to write. They are found right before the checkpoint is forked: in /proc/self/pagemap
a page the process alone maps (bit 56) and holds (bit 63) was written since the last fork, or is new.
Once the checkpoint is forked, ``MADV_POPULATE_WRITE`` takes those faults at once (it copies the page
without touching its bytes, so a thread of the call that runs meanwhile loses nothing), in the time
between a result and the next call (a model's turn). At most ``MAX_PAGES`` are copied ahead, so a call
that wrote a large state does not double its memory; where the kernel lacks the advice (Linux < 5.14)
or /proc/self/pagemap cannot be read, nothing is done.

    result out ─> written = hot_runs() ─> fork the checkpoint ─> copy_ahead(written) ─> read the next call
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import re
from collections.abc import Callable

MADV_POPULATE_WRITE = 23  # Linux 5.14
MAX_PAGES = 2048  # 8 MiB of 4 KiB pages: the most a session's process copies ahead after a checkpoint
PAGE = mmap.PAGESIZE
CHUNK = 64 * PAGE  # copied between two looks at whether the next call came
# pagemap's top byte: bit 63 (present) and bit 56 (exclusively mapped) both set -> b"1"
_HOT = bytes.maketrans(bytes(range(256)), bytes(0x31 if b & 0x81 == 0x81 else 0x30 for b in range(256)))
_RUN = re.compile(b"1+")
_libc: ctypes.CDLL | None = None
_usable = True  # False once the kernel refused the advice (it stays so for this process)


def hot_runs(most: int = MAX_PAGES) -> list[tuple[int, int]]:
    """(address, bytes) of the runs of pages this process alone holds, in its private writable mappings
    (at most ``most`` pages); [] where the pagemap cannot be read."""
    if not _usable or not most:
        return []
    runs: list[tuple[int, int]] = []
    left = most
    try:
        with open("/proc/self/maps", "rb") as f:
            maps = f.read().splitlines()
        fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    except OSError:
        return []
    try:
        for line in maps:
            fields = line.split(None, 5)
            perms = fields[1]
            if perms[1:2] != b"w" or perms[3:4] != b"p" or (len(fields) > 5 and fields[5].startswith(b"[v")):
                continue
            start, end = (int(x, 16) for x in fields[0].split(b"-"))
            first = start // PAGE
            data = os.pread(fd, (end - start) // PAGE * 8, first * 8)
            for m in _RUN.finditer(data[7::8].translate(_HOT)):
                pages = min(m.end() - m.start(), left)
                runs.append(((first + m.start()) * PAGE, pages * PAGE))
                left -= pages
                if not left:
                    return runs
    except OSError:
        return runs
    finally:
        os.close(fd)
    return runs


def copy_ahead(runs: list[tuple[int, int]], stop: Callable[[], bool]) -> bool:
    """Take the copy-on-write faults of ``runs`` now (see the module docstring), ``CHUNK`` bytes at a
    time, until ``stop()`` says the next call is here (it then takes the rest itself, as it writes).
    False when it stopped so (calls come back to back: looking for the pages is not worth it then)."""
    global _libc, _usable
    if not runs or not _usable:
        return True
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    for address, size in runs:
        for at in range(address, address + size, CHUNK):
            if stop():
                return False
            if _libc.madvise(at, min(CHUNK, address + size - at), MADV_POPULATE_WRITE) != 0 \
                    and ctypes.get_errno() == errno.EINVAL:
                _usable = False  # no such advice here (or a mapping it does not take): not again
                return True
    return True


__all__ = ["MAX_PAGES", "copy_ahead", "hot_runs"]
