"""One writer per file: an exclusive OS lock on a job's journal and output, taken before either changes.

Two ``toolfork run`` on one OUT (a cron job that fires twice), a ``--resume`` started while the first
run lives, two programs on one ``Journal``: each would run every call again and interleave its lines
with the other's. The lock makes the second one fail at once, naming the process that holds the file.

    Journal / toolfork run ── take(fd, path) ── flock(LOCK_EX | LOCK_NB) ──> held, or FileBusy(pid)
                                   │
                                   └── the fd joins ``_held``: a forked child closes it at once

Why ``flock``: it belongs to the open file, so it conflicts between two opens in one process too (two
executors on one journal), closing another descriptor of the file does not drop it (POSIX ``lockf``
does both wrong), and the kernel drops it when the last descriptor of that open file goes, so a
SIGKILLed writer never blocks its resume. A forked child (the pool's template, and the workers it
forks) would share the open file and keep the lock alive after the host died, and a tool could write
into the file: an at-fork hook closes every held descriptor in the child.

Who holds it: ``/proc/locks`` names the pid of every flock by device and inode; where it cannot be
read, the caller's own record (a journal keeps ``{"writer": PID}``) names it.
"""

from __future__ import annotations

import errno
import fcntl
import os

from toolfork.executor.wire.pipes import close_quietly

_held: set[int] = set()  # descriptors this process holds a lock on (closed in a forked child)


class FileBusy(OSError):
    """Another open of the file holds its lock; ``pid`` is that process when it can be known."""

    def __init__(self, path: str, pid: int | None) -> None:
        self.path = path
        self.pid = pid
        who = "another process" if pid is None else \
            f"process {pid} (this one: another open of the file)" if pid == os.getpid() else f"process {pid}"
        super().__init__(errno.EWOULDBLOCK, f"{path!r} is locked by {who}")


def take(fd: int, path: str) -> None:
    """Lock the open file ``fd`` (of ``path``) for this process alone, without waiting; raises
    ``FileBusy`` when another open of it holds the lock."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise FileBusy(path, holder(fd)) from None
    _held.add(fd)


def release(fd: int) -> None:
    """Forget ``fd`` before it is closed (closing it drops the lock)."""
    _held.discard(fd)


def holder(fd: int) -> int | None:
    """The pid that holds a flock on the file of ``fd`` (from ``/proc/locks``), or None."""
    try:
        st = os.fstat(fd)
        wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        with open("/proc/locks") as f:
            for line in f:
                fields = line.split()
                # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a blocked waiter has "->" first)
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted and fields[4].isdigit():
                    pid = int(fields[4])
                    if pid > 0:
                        return pid
    except (OSError, ValueError):
        pass
    return None


def _close_in_child() -> None:
    close_quietly(list(_held))
    _held.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


__all__ = ["FileBusy", "holder", "release", "take"]
