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
