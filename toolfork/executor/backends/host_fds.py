"""The host's descriptors that no process a backend forks may keep.

Why: a process forked later (a fork template replaced after it died) inherits every descriptor the
host has open. It must close the ones that belong to the host alone, the pipes and sockets of every
live pool, every wake-up pipe and epoll, and any listening socket of a long-running command, or it
would hold them open (hiding EOF from a pool's processes, keeping a port bound) and a tool could read,
write or watch through them. The fork backend lists its own; anything else in the host registers here
(``host_only``) and unregisters when it closes (``release``)::

    pools' pipes and sockets, wake-up pipes, epolls, a command's metrics socket
        ──> HOST_FDS ──> ``still_ours()`` closed first thing in a newly forked template

Each number is kept with what it named when it was listed (device and inode): one whose owner closed
it without unregistering, and whose number now names something else (the new template's own control
socket, a user's file), is not closed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def file_id(fd: int) -> tuple[int, int] | None:
    """What ``fd`` names (device, inode); None when it is not open."""
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def naming(fds: Iterable[int], named: tuple[int, int]) -> list[int]:
    """Those of ``fds`` that name ``named`` (device, inode)."""
    return [fd for fd in fds if file_id(fd) == named]


class _HostFds(set[int]):
    """A set of descriptor numbers that remembers what each one named when it was added."""

    def __init__(self) -> None:
        super().__init__()
        self._named: dict[int, tuple[int, int]] = {}

    def add(self, fd: int) -> None:
        named = file_id(fd)
        if named is not None:
            self._named[fd] = named
            super().add(fd)

    def update(self, *fds: Iterable[int]) -> None:
        for group in fds:
            for fd in group:
                self.add(fd)

    def discard(self, fd: object) -> None:
        self._named.pop(fd, None)  # type: ignore[call-overload]
        super().discard(fd)

    def difference_update(self, *fds: Iterable[object]) -> None:
        for group in fds:
            for fd in group:
                self.discard(fd)

    def clear(self) -> None:
        self._named.clear()
        super().clear()

    def still_ours(self) -> list[int]:
        """The listed descriptors that still name what they named when listed."""
        return [fd for fd, named in list(self._named.items()) if file_id(fd) == named]


HOST_FDS = _HostFds()


def host_only(fd: int) -> None:
    """``fd`` stays in the host: a process a backend forks from now on closes it."""
    HOST_FDS.add(fd)


def release(fd: int) -> None:
    """``fd`` is closed (or handed on): forget it."""
    HOST_FDS.discard(fd)


__all__ = ["HOST_FDS", "host_only", "release"]
