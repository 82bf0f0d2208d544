"""The one way the fork backend forks a process below the template: a worker, a sandbox's spare, the
sessions' supervisor, a session's process, a checkpoint.

Why: a forked process gets a copy of every descriptor its parent holds. The template and the sessions'
supervisor hold other processes' channels (a worker's pipes while it is forked, every session's control
socket), so a child that kept its copies could write frames into a sibling's channel, read a sibling's
results, or keep a channel open after its owner died (so that nobody ever sees EOF on it). Closing what
a child should not have, one descriptor at a time at each fork, is a list that is always one entry
short. Here it is the other way round: the child closes every descriptor above 2 but the ones it is
told to keep (its own channels) and the ones the template inherited from the host (the user's files,
logs and connections, which every worker has as in any fork of the host; the host's own channels are
closed by the template when it starts: ``HOST_FDS`` in ``fork.template_link``). One ``close_range``
system call; nothing is counted.

    host ──fork (multiprocess), host's channels closed──> template: what is left is ``inherited``
    template ──fork(keep)──> worker | spare | supervisor ──fork(keep)──> session process
    session process ──fork(keep=everything: the paused copy of its state)──> checkpoint

SIGTERM is held across every fork, and the child takes the default action before it can see one: a
parent's handler (the template's ``leave``, the supervisor's ``kill_everything``) must never run in
the child, where it would kill the child's siblings. That part is ``governance.forking`` (the sandbox
forks its PID 1 the same way, and governance may not import the executor); this module adds what the
template inherited from the host. Descriptors the processes open themselves are
close-on-exec (Python's default, and ``recv_fds`` below for the ones that arrive over a socket), so a
program a tool starts holds no channel either.
"""

from __future__ import annotations

import array
import os
import socket
from collections.abc import Callable, Iterable

from toolfork.executor.wire.oob import fds_in
from toolfork.governance import forking as generic
from toolfork.governance.forking import KEEP_ALL, close_all_but

#: Descriptors the template inherited from the host that every process below it keeps (set by
#: ``inherit`` in the template, before it forks anything).
_inherited: frozenset[int] = frozenset()



def inherit(own: Iterable[int]) -> None:
    """In the template, when it starts: what it holds now, less its own descriptors ``own``, is the
    host's part that every process forked below it keeps."""
    global _inherited
    mine = set(own)
    _inherited = frozenset(fd for fd in _open_fds() if fd > 2 and fd not in mine)


def inherited() -> frozenset[int]:
    return _inherited


def fork(keep: Iterable[int], cleanup: Callable[[], None] | None = None, namespaces: int = 0) -> int:
    """``os.fork``, the way every process below the template is forked (``governance.forking.fork``:
    SIGTERM held across it, the child's SIGTERM and SIGCHLD at their defaults, no wake-up descriptor,
    ``cleanup()``, every descriptor above 2 closed but ``keep``), keeping the descriptors the template
    inherited from the host too. With ``keep=KEEP_ALL`` the child is a copy (a checkpoint): it keeps
    every descriptor and handler. ``namespaces``: the child is cloned into them (a sandbox's PID 1).
    Returns as ``os.fork`` does (0 in the child)."""
    return generic.fork(KEEP_ALL if keep is KEEP_ALL else frozenset(keep) | _inherited, cleanup, namespaces)


_FD_SPACE_PER = array.array("i").itemsize


def recv_fds(sock: socket.socket, bufsize: int, maxfds: int) -> tuple[bytes, list[int]]:
    """One message and the descriptors that came with it, close-on-exec (``socket.recv_fds`` leaves
    them inheritable: a program a tool runs would hold them). Raises as ``recvmsg`` does."""
    data, ancdata, _flags, _addr = sock.recvmsg(bufsize, socket.CMSG_SPACE(maxfds * _FD_SPACE_PER),
                                                socket.MSG_CMSG_CLOEXEC)
    return data, fds_in(ancdata)


def _open_fds() -> list[int]:
    """This process's descriptors (not the one the listing itself used: it is closed by then)."""
    import fcntl

    try:
        listed = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: nothing is known to be inherited (every fork closes all but its own)
        return []
    open_now = []
    for fd in listed:
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError:
            continue
        open_now.append(fd)
    return open_now


__all__ = ["KEEP_ALL", "close_all_but", "fork", "inherit", "inherited", "recv_fds"]
