"""Read-only mounts in the sandbox's mount namespace: nothing outside ``write_paths`` changes, metadata
included, and no cgroup file can be written from inside.

Why mounts and not only Landlock: Landlock governs writing a file's content and its directory entries,
not chmod, chown, utime or xattrs; a read-only mount refuses every one of those (EROFS), whatever the
user, and a sandboxed root maps onto the host's root, which owns the cgroup files (it could lift its own
limits or leave its cgroup). As bubblewrap does, but with the new mount API (Linux 5.12+), in a few
system calls whatever the number of mounts:

    each write path ── open_tree(CLONE | RECURSIVE) ──> a detached copy, still writable
    "/"             ── mount_setattr(RECURSIVE, RDONLY) ──> every mount read-only
    each copy       ── move_mount ──> back on its path: writable again, there only

The cgroup file systems are made read-only the same way, for every sandbox. The seccomp filter then
refuses every mount call, so nothing inside can undo it (and mounts copied into a user namespace are
locked together: none can be taken off to show what is under it).
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Iterable

from .verdict import libc

SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442  # the same on every architecture
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
OPEN_TREE_CLONE = 1
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_RDONLY = 0x1


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


class MountError(OSError):
    """A read-only mount could not be made; the message names the path and why."""


def _fail(step: str, path: str) -> MountError:
    code = ctypes.get_errno()
    hint = " (read-only mounts need Linux 5.12+: mount_setattr)" if code == errno.ENOSYS else ""
    return MountError(code, f"{step} {path!r}: {os.strerror(code)}{hint}")


def read_only(path: str) -> None:
    """Make the mount at ``path`` and every mount below it read-only (in this mount namespace)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    if libc().syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), path.encode(),
                      ctypes.c_uint(AT_RECURSIVE), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))) != 0:
        raise _fail("making read-only", path)


def writable_only(write_paths: Iterable[str]) -> None:
    """Every mount read-only but the trees under ``write_paths`` (as they were: writable where they were)."""
    copies: list[tuple[int, str]] = []
    try:
        for path in write_paths:
            fd = libc().syscall(ctypes.c_long(SYS_OPEN_TREE), ctypes.c_int(AT_FDCWD), os.fsencode(path),
                                ctypes.c_uint(OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC))
            if fd < 0:
                raise _fail("copying the mount of write path", path)
            copies.append((fd, path))
        read_only("/")
        for fd, path in copies:
            if libc().syscall(ctypes.c_long(SYS_MOVE_MOUNT), ctypes.c_int(fd), b"", ctypes.c_int(AT_FDCWD),
                              os.fsencode(path), ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH)) != 0:
                raise _fail("mounting write path", path)
    finally:
        for fd, _path in copies:
            os.close(fd)


__all__ = ["MountError", "read_only", "writable_only"]
