"""Bytes on raw descriptors: writing all of a buffer, and the wake-up pipe.

Every module of the executor that writes a buffer to a blocking descriptor (frames to a worker, a
worker's results, ``toolfork run``'s output) or wakes a ``select()`` from another thread or a signal
handler does it with these, so the rules (a pipe may take less than asked; a full wake-up pipe already
says "wake up"; a drained pipe is empty, not an error) are written once.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from toolfork.executor.backends.host_fds import HOST_FDS

# The longest either end of a worker's pipes looks for what is due before it sleeps on the pipe: waking
# a sleeping process costs tens of microseconds on a virtual machine, more than a quick call itself
# (bench/: a batch of 4 trivial calls). The looks yield the CPU between them.
SPIN_S = 0.00005
_Seen = TypeVar("_Seen")  # what a look returns: poll's events, select's keys


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte to a fd (``os.write`` may write less than asked on a pipe). A descriptor meant
    to block that someone made non-blocking (a tool's library, on a worker's pipe) is waited on. The
    first write is of ``data`` itself: it nearly always takes every byte (a worker writes one result per
    call), and a view is made only for what is left."""
    if not data:
        return
    try:
        n = os.write(fd, data)
    except BlockingIOError:
        n = 0
    if n == len(data):
        return
    view = memoryview(data)[n:]
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            wait_for(fd, write=True)


def read_some(fd: int, n: int) -> bytes:
    """``os.read`` on a fd meant to block, waiting if someone made it non-blocking (see write_all)."""
    while True:
        try:
            return os.read(fd, n)
        except BlockingIOError:
            wait_for(fd, write=False)


def look_briefly(look: Callable[[int], _Seen], spin_s: float) -> _Seen:
    """What ``look(0)`` (a poller's ``poll``, a selector's ``select``) shows, looked at without sleeping,
    yielding the CPU between looks (a process sharing this CPU runs first), until something shows or
    ``spin_s`` passed: the last look's answer. Waking a sleeping process costs tens of microseconds here,
    so an answer due sooner is looked for, not slept for; the bound keeps an idle process asleep."""
    end = time.monotonic() + spin_s
    while True:
        seen = look(0)
        if seen or time.monotonic() >= end:
            return seen
        os.sched_yield()


def wait_for(fd: int, *, write: bool) -> None:
    """Wait until ``fd`` is readable (or writable); ``poll``, as a worker's channels sit above
    ``select``'s limit of 1024."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT if write else select.POLLIN)
    poller.poll()


def readable(fds: list[int], timeout: float | None) -> list[int]:
    """Those of ``fds`` that are readable within ``timeout`` seconds (None: no limit); ``poll``, as
    ``wait_for`` (a host with hundreds of sessions holds descriptors past 1024)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    try:
        events = poller.poll(None if timeout is None else max(0.0, timeout) * 1000)
    except InterruptedError:
        return []
    return [fd for fd, _ in events]


def drain(fd: int) -> None:
    """Read a non-blocking fd until it is empty (a wake-up pipe); a closed or bad fd is left alone."""
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, InterruptedError, OSError):
        pass


class WakePipe:
    """A pipe whose read end (``fd``) a ``select()`` watches and whose write end anyone may poke.

    Both ends are non-blocking: ``wake()`` never blocks (a full pipe is readable already, so a byte
    lost there is not needed) and never raises (an executor closing under a waker is not the waker's
    error); ``drain()`` empties the read end. ``write_fd`` is what ``signal.set_wakeup_fd`` takes. Both
    are this process's own (``backends.host_fds``): no process the fork backend forks from it holds
    them, so no tool can steal a wake-up or fake one."""

    __slots__ = ("fd", "write_fd")

    def __init__(self) -> None:
        self.fd, self.write_fd = os.pipe()
        os.set_blocking(self.fd, False)
        os.set_blocking(self.write_fd, False)
        HOST_FDS.update(self.fds)

    def wake(self) -> None:
        try:
            os.write(self.write_fd, b"!")
        except OSError:  # BlockingIOError included: already woken, or closed
            pass

    def drain(self) -> None:
        drain(self.fd)

    @property
    def fds(self) -> tuple[int, int]:
        return self.fd, self.write_fd

    def close(self) -> None:
        HOST_FDS.difference_update(self.fds)
        close_quietly(self.fds)


def close_quietly(fds: Iterable[int]) -> None:
    """Close each descriptor; one already closed (or never valid) is no error: closing is cleanup."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


__all__ = ["WakePipe", "close_quietly", "drain", "read_some", "readable", "wait_for", "write_all"]
