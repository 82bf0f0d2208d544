"""Read and write only under given paths: a Landlock domain for the worker process.

Why Landlock: it is the kernel's unprivileged file-access sandbox (Linux 5.13+), needs no root, no
mount namespace and no helper binary, and costs three system calls at worker start. Like a network
namespace it cannot be lifted, so a worker that restricted itself serves only calls with the same
`read_paths` / `write_paths` (`Limits.restriction_key`).

What the paths mean: with `read_paths` set, reading files, listing directories and executing files are
allowed only beneath them; with `write_paths` set, writing, truncating, creating, removing, renaming
and linking are allowed only beneath them. A kind of access whose list is not given stays
unrestricted. The lists are separate: a path in `write_paths` alone is not readable when `read_paths`
is set (list it in both). Modules the worker has not imported yet are files too: a tool restricted to
`read_paths=["/data"]` cannot import a module from elsewhere after the restriction (add sys.prefix, or
import first). Ioctl on devices is never restricted here.

How: landlock_create_ruleset / landlock_add_rule / landlock_restrict_self through ctypes' syscall (the
numbers 444-446 are the same on every architecture), with the access rights the running kernel's ABI
version knows, after PR_SET_NO_NEW_PRIVS (required without CAP_SYS_ADMIN). restrict_self applies to
the calling thread, so `restrict` refuses in a process that already runs more than one thread.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import sys
from collections.abc import Iterable

from . import seccomp
from .verdict import Probe, libc, thread_count, try_in_child

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3

READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR
WRITE_RIGHTS_V1 = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK
                   | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM)
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # the rights a rule on a non-directory may carry


class LandlockError(OSError):
    """The process could not be restricted to the given paths; the message says why."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _syscall(number: int, *args: object) -> int:
    result = int(libc().syscall(ctypes.c_long(number), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def abi_version() -> int:
    """The Landlock ABI version of the running kernel; 0 where there is none (or not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except OSError:
        return 0


def _write_rights(abi: int) -> int:
    rights = WRITE_RIGHTS_V1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def _add_rule(ruleset_fd: int, path: str, rights: int, setting: str) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        raise LandlockError(exc.errno or errno.ENOENT, f"{setting}: cannot open {path!r}: {exc.strerror}") from None
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        attr = _PathBeneathAttr(rights, fd)
        _syscall(SYS_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(attr),
                 ctypes.c_uint32(0))
    except OSError as exc:
        raise LandlockError(exc.errno or errno.EINVAL, f"{setting}: cannot add {path!r}: {exc.strerror}") from None
    finally:
        os.close(fd)


def restrict(read_paths: Iterable[str] | None, write_paths: Iterable[str] | None) -> None:
    """Restrict this process for good: read only under `read_paths`, write only under `write_paths`.

    None for a list leaves that kind of access unrestricted; an empty list forbids it everywhere.
    Raises LandlockError naming why (no Landlock, a path that does not exist, more than one thread).
    """
    if read_paths is None and write_paths is None:
        return
    abi = abi_version()
    if abi < 1:
        raise LandlockError(errno.ENOSYS, "this kernel has no Landlock (Linux 5.13+ with landlock in the LSM list)")
    if thread_count() > 1:
        raise LandlockError(errno.EINVAL, f"this process runs {thread_count()} threads; Landlock applies to one "
                            "thread, so restrict before starting any")
    write_rights = _write_rights(abi)
    handled = (READ_RIGHTS if read_paths is not None else 0) | (write_rights if write_paths is not None else 0)
    try:
        ruleset_fd = _syscall(SYS_CREATE_RULESET, ctypes.byref(_RulesetAttr(handled)),
                              ctypes.c_size_t(ctypes.sizeof(_RulesetAttr)), ctypes.c_uint32(0))
    except OSError as exc:
        raise LandlockError(exc.errno or errno.EINVAL, f"cannot create a Landlock ruleset: {exc.strerror}") from None
    try:
        for path in read_paths or ():
            _add_rule(ruleset_fd, path, READ_RIGHTS, "read_paths")
        for path in write_paths or ():
            _add_rule(ruleset_fd, path, write_rights, "write_paths")
        try:
            seccomp.no_new_privs()
        except OSError as exc:
            raise LandlockError(exc.errno or errno.EPERM, str(exc)) from None
        try:
            _syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0))
        except OSError as exc:
            raise LandlockError(exc.errno or errno.EPERM, f"cannot enforce the Landlock ruleset: {exc.strerror}") \
                from None
    finally:
        os.close(ruleset_fd)


@functools.lru_cache(maxsize=1)
def probe() -> Probe:
    """Whether `restrict` works here: the ABI version, then a real restriction in a forked child."""
    if not sys.platform.startswith("linux"):
        return Probe(False, f"Landlock is Linux only, not {sys.platform}")
    abi = abi_version()
    if abi < 1:
        return Probe(False, "this kernel has no Landlock (Linux 5.13+ with landlock in the LSM list)")
    result = try_in_child(lambda: restrict(["/"], ["/"]))
    if result.ok:
        return result
    return Probe(False, result.reason.removeprefix("LandlockError: "))
