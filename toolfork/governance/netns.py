"""No network for a worker process: a network namespace of its own, with the loopback left down.

Why a namespace and not a seccomp filter or a proxy setting: in a new network namespace there is no
interface but a loopback that is down, so every connect fails in the kernel (even to 127.0.0.1, even
from a C extension or a subprocess), and nothing a tool does can bring the host's interfaces back. The
same permanence means a worker that entered one serves only calls whose limits say `network=False`
(`Limits.restriction_key`): it is done once when the worker starts, not per call.

How: unshare(CLONE_NEWNET) (os.unshare on Python 3.12+, libc's unshare through ctypes on 3.10/3.11).
That needs CAP_SYS_ADMIN; without it, a user namespace is unshared along with it (CLONE_NEWUSER, where
the kernel allows unprivileged user namespaces), mapping the process's own uid and gid onto themselves
so files keep their owners. unshare changes only the calling thread, so `enter_no_network` refuses in a
process that already runs more than one thread (the other threads would keep the network).

`empty_beside` serves the sandbox's spare maker: one empty namespace, made once, that it clones every
network=False spare into (``Beside``), where making one per spare and the kernel's teardown of it cost
about 0.45 ms of CPU a call. It needs CAP_SYS_ADMIN in the maker's user namespace (to come back with
setns), so as root; the namespace then belongs to the host's user namespace, and a spare, in a user
namespace of its own, holds no capability over it (it cannot bring the loopback up). Spares share it, so
the sandbox's seccomp filter leaves them no socket to make or name (``seccomp``).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import sys

from .verdict import CAP_SYS_ADMIN, Probe, has_capability, libc, thread_count, try_in_child

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000


class NetworkIsolationError(OSError):
    """The process could not be put into a network namespace of its own; the message says why."""


def _unshare(flags: int) -> None:
    native = getattr(os, "unshare", None)  # Python 3.12+
    if native is not None:
        native(flags)
        return
    if libc().unshare(ctypes.c_int(flags)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"unshare: {os.strerror(code)}")


def _map_self(uid: int, gid: int) -> None:
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


def enter_no_network() -> None:
    """Take this process off every network for good. Raises NetworkIsolationError naming why not."""
    if not sys.platform.startswith("linux"):
        raise NetworkIsolationError(errno.ENOSYS, f"network namespaces are Linux only, not {sys.platform}")
    if thread_count() > 1:
        raise NetworkIsolationError(errno.EINVAL, f"this process runs {thread_count()} threads; a network namespace "
                                    "applies to one thread, so enter it before starting any")
    try:
        if has_capability(CAP_SYS_ADMIN):
            _unshare(CLONE_NEWNET)
        else:
            uid, gid = os.getuid(), os.getgid()
            _unshare(CLONE_NEWUSER | CLONE_NEWNET)
            _map_self(uid, gid)
    except OSError as exc:
        raise NetworkIsolationError(exc.errno or errno.EPERM,
                                    f"cannot unshare a network namespace: {exc.strerror or exc}") from None


@functools.lru_cache(maxsize=1)
def probe() -> Probe:
    """Whether `enter_no_network` works here (tried in a forked child, once per process)."""
    if not sys.platform.startswith("linux"):
        return Probe(False, f"network namespaces are Linux only, not {sys.platform}")
    if getattr(os, "unshare", None) is None:
        libc()  # loaded here, not first in a child forked from a process that may run threads
    result = try_in_child(enter_no_network)
    if result.ok:
        return result
    return Probe(False, result.reason.removeprefix("NetworkIsolationError: "))


class Beside:
    """An empty network namespace beside this process's own, both held by descriptor (close-on-exec; a
    child forked below the template closes them: ``forking.fork``), so that this process can clone
    children into the empty one (``into_empty``, clone, ``home``) without making one per child."""

    def __init__(self, home: int, empty: int) -> None:
        self.home_fd, self.empty_fd = home, empty

    def into_empty(self) -> None:
        _setns(self.empty_fd)

    def home(self) -> None:
        _setns(self.home_fd)


def _setns(fd: int) -> None:
    native = getattr(os, "setns", None)  # Python 3.12+
    if native is not None:
        native(fd, CLONE_NEWNET)
        return
    if libc().setns(ctypes.c_int(fd), ctypes.c_int(CLONE_NEWNET)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"setns: {os.strerror(code)}")


def can_share() -> bool:
    """Whether this process may make an empty namespace beside its own and come back from it (it holds
    CAP_SYS_ADMIN in its user namespace): what the spare maker, forked from it, does."""
    return sys.platform.startswith("linux") and has_capability(CAP_SYS_ADMIN)


def empty_beside() -> Beside | None:
    """An empty network namespace made beside this process's own (see ``Beside``); None where it cannot
    be made or left again (``can_share`` says no, or this process runs more than one thread)."""
    if not can_share() or thread_count() > 1:
        return None
    home = empty = -1
    try:
        home = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        _unshare(CLONE_NEWNET)
        empty = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        _setns(home)
        return Beside(home, empty)
    except OSError:
        for fd in (home, empty):
            if fd >= 0:
                os.close(fd)
        return None
