"""The one way toolfork forks a process of its own: SIGTERM held across the fork, the child's signal
state its own, and every descriptor closed but the ones it is told to keep.

Why here, in the lowest layer: the fork backend forks every process below its template (workers,
spares, the sessions' supervisor, session processes, checkpoints: ``executor.backends.fork.forking``,
which adds the descriptors the template inherited from the host), and the sandbox forks its PID 1
(``governance.sandbox``); both need the same discipline, and the sandbox may not import the executor.

    parent: SIGTERM blocked ── os.fork ── mask restored ──> returns the child's pid
    child:  SIGTERM and SIGCHLD to their defaults, no wake-up descriptor, cleanup(), every descriptor
            above 2 closed but ``keep`` (one close_range call), SIGTERM unblocked ──> returns 0

A parent's SIGTERM handler (the template's, the sessions' supervisor's) must never run in the child,
where it would kill the child's siblings: the child takes the default action before it can see one.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterable

KEEP_ALL: frozenset[int] = frozenset({-1})  # ``fork(keep=KEEP_ALL)``: a copy of this process (a checkpoint)


def fork(keep: Iterable[int], cleanup: Callable[[], None] | None = None) -> int:
    """``os.fork`` as described in the module docstring. With ``keep=KEEP_ALL`` the child is a copy: it
    keeps every descriptor and handler. Returns as ``os.fork`` does (0 in the child)."""
    kept = KEEP_ALL if keep is KEEP_ALL else frozenset(keep)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise
    if pid != 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return pid
    if kept is KEEP_ALL:  # a copy of this process: its handlers too
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return 0
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:  # not the main thread: it has none
        pass
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if cleanup is not None:
        cleanup()
    close_all_but(kept)
    return 0


def close_all_but(keep: Iterable[int]) -> None:
    """Close every descriptor above 2 that is not in ``keep``."""
    low = 3
    for fd in sorted(fd for fd in set(keep) if fd >= low):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 0x7FFF_FFFF)  # close_range(2) on Linux: one system call, whatever the limit


__all__ = ["KEEP_ALL", "close_all_but", "fork"]
