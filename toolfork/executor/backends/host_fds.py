"""The host's descriptors that no process a backend forks may keep.

Why: a process forked later (a fork template replaced after it died) inherits every descriptor the
host has open. It must close the ones that belong to the host alone, the pipes and sockets of every
live pool and any listening socket of a long-running command, or it would hold them open (hiding EOF
from a pool's processes, keeping a port bound). The fork backend lists its own; anything else in the
host registers here (``host_only``) and unregisters when it closes (``release``)::

    pools' pipes and sockets, a command's metrics socket ──> HOST_FDS ──> closed first thing in a
                                                                            newly forked template
"""

from __future__ import annotations

HOST_FDS: set[int] = set()


def host_only(fd: int) -> None:
    """``fd`` stays in the host: a process a backend forks from now on closes it."""
    HOST_FDS.add(fd)


def release(fd: int) -> None:
    """``fd`` is closed (or handed on): forget it."""
    HOST_FDS.discard(fd)


__all__ = ["HOST_FDS", "host_only", "release"]
