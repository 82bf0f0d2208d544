"""The one way toolfork forks a process of its own: SIGTERM held across the fork, the child's signal
state its own, and every descriptor closed but the ones it is told to keep.

Why here, in the lowest layer: the fork backend forks every process below its template (workers,
spares, the sessions' supervisor, session processes, checkpoints: ``executor.backends.fork.forking``,
which adds the descriptors the template inherited from the host), and the sandbox forks its PID 1
(``governance.sandbox``); both need the same discipline, and the sandbox may not import the executor.

    parent: SIGTERM blocked ── os.fork | clone(namespaces) ── mask restored ──> returns the child's pid
    child:  SIGTERM and SIGCHLD to their defaults, no wake-up descriptor, cleanup(), every descriptor
            above 2 closed but ``keep`` (one close_range call), SIGTERM unblocked ──> returns 0

A parent's SIGTERM handler (the template's, the sessions' supervisor's) must never run in the child,
where it would kill the child's siblings: the child takes the default action before it can see one.

``namespaces``: the child is made by one clone(2) that puts it in new namespaces at once (user, PID,
mount, network: it is PID 1 of its own PID namespace), so the template can make a sandbox's PID 1
itself, with no process of ours between them that waits. Python's own fork steps bracket it as they
bracket ``os.fork`` (``PyOS_BeforeFork``, ``PyOS_AfterFork_Child``/``_Parent``), and the kernel writes
the child's thread id where the C library keeps it (``CLONE_CHILD_SETTID``, as glibc's fork does), so
``raise``/``abort`` reach the right thread. ``can_clone()`` says whether this is possible here (a known
system call number, and the C library's thread id found in its thread block); where not, the sandbox
is entered the older way (``sandbox.enter``: unshare, then a fork).
"""

from __future__ import annotations

import _signal
import ctypes
import functools
import os
import signal
import threading
from collections.abc import Callable, Iterable

KEEP_ALL: frozenset[int] = frozenset({-1})  # ``fork(keep=KEEP_ALL)``: a copy of this process (a checkpoint)

# The C functions behind ``signal``'s: its Python wrappers turn every number into an enum member, on
# the path of every fork (twice in the process that forks, three times more in the child), and each
# object touched there is a page copied in a process that forked (the spare maker forks per call).
_sigmask = getattr(_signal, "pthread_sigmask", signal.pthread_sigmask)
set_handler = getattr(_signal, "signal", signal.signal)  # takes and gives plain numbers
_BLOCK, _SETMASK, _TERM = int(signal.SIG_BLOCK), int(signal.SIG_SETMASK), frozenset({int(signal.SIGTERM)})
_DEFAULTS = ((int(signal.SIGTERM), int(signal.SIG_DFL)), (int(signal.SIGCHLD), int(signal.SIG_DFL)))


def fork(keep: Iterable[int], cleanup: Callable[[], None] | None = None, namespaces: int = 0) -> int:
    """``os.fork`` as described in the module docstring. With ``keep=KEEP_ALL`` the child is a copy: it
    keeps every descriptor and handler. ``namespaces`` (CLONE_NEW* flags): the child is cloned into new
    namespaces (only where ``can_clone()``). Returns as ``os.fork`` does (0 in the child)."""
    kept = KEEP_ALL if keep is KEEP_ALL else frozenset(keep)
    mask = _sigmask(_BLOCK, _TERM)
    try:
        pid = _clone(namespaces) if namespaces else os.fork()
    except BaseException:
        _sigmask(_SETMASK, mask)
        raise
    if pid != 0:
        _sigmask(_SETMASK, mask)
        return pid
    if kept is KEEP_ALL:  # a copy of this process: its handlers too
        _sigmask(_SETMASK, mask)
        return 0
    for signum, handler in _DEFAULTS:
        set_handler(signum, handler)
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:  # not the main thread: it has none
        pass
    _sigmask(_SETMASK, mask)
    if cleanup is not None:
        cleanup()
    close_all_but(kept)
    return 0


# clone(2): its number, and where it takes the child's thread id pointer (its 4th argument on x86-64,
# its 5th on arm64; the other is the TLS pointer, unused here).
_CLONE = {"x86_64": (56, 3), "aarch64": (220, 4)}
_GETTID = {"x86_64": 186, "aarch64": 178}
CLONE_CHILD_SETTID = 0x01000000
_THREAD_BLOCK_SCAN = 1024  # bytes of the C library's thread block searched for its thread id


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.pthread_self.restype = ctypes.c_void_p
    libc.syscall.restype = ctypes.c_long
    return libc


_MACHINE = os.uname().machine
_TID_FIELDS: dict[int, int | None] = {}  # thread block (pthread_self) -> where that thread's id is kept


def _tid_field() -> int | None:
    """The address where the C library keeps the calling thread's id: the one place in its thread
    block (``pthread_self()``) that holds ``gettid()``; None when there is not exactly one. Looked up
    once per thread block: a forked child's one thread has its parent's forking thread's block, at the
    same address, where the kernel (``CLONE_CHILD_SETTID``) or the C library's fork writes the child's
    id (a forked template's block is not its host's main thread's; ``threading.get_ident`` is
    ``pthread_self``, so no system call is made per clone)."""
    if _MACHINE not in _CLONE:
        return None
    key = threading.get_ident()
    if key not in _TID_FIELDS:
        libc = _libc()
        tid = int(libc.syscall(ctypes.c_long(_GETTID[_MACHINE])))
        block = libc.pthread_self()
        offsets = range(0, _THREAD_BLOCK_SCAN, 4) if block and tid > 0 else range(0)
        found = [block + off for off in offsets if ctypes.c_int.from_address(block + off).value == tid]
        _TID_FIELDS[key] = found[0] if len(found) == 1 else None
    return _TID_FIELDS[key]


def can_clone() -> bool:
    """Whether ``fork(..., namespaces=...)`` can make its child with one clone(2) here (Linux on x86-64
    or arm64, the C library's thread id found; call it in the process that will clone, before it does)."""
    return os.name == "posix" and os.uname().sysname == "Linux" and _tid_field() is not None


@functools.lru_cache(maxsize=1)
def _syscall() -> Callable[..., int]:
    call = ctypes.PyDLL(None, use_errno=True).syscall  # holds the GIL across the call, as os.fork does
    call.restype = ctypes.c_long
    call.argtypes = [ctypes.c_long, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                     ctypes.c_void_p]
    return call  # type: ignore[no-any-return]


def _clone(namespaces: int) -> int:
    """clone(2) into ``namespaces``, bracketed by Python's fork steps; returns as ``os.fork`` does."""
    tid = _tid_field()
    if tid is None:
        raise OSError(95, "clone into namespaces is not available here (see forking.can_clone)")
    number, tid_arg = _CLONE[_MACHINE]
    args: list[int | None] = [None, None, None, None]  # stack (NULL: the child runs on a copy of ours), ...
    args[tid_arg - 1] = tid
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    pid = _syscall()(number, namespaces | CLONE_CHILD_SETTID | signal.SIGCHLD, *args)
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    code = ctypes.get_errno()
    api.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(code, f"clone into new namespaces: {os.strerror(code)}")
    return int(pid)


def close_all_but(keep: Iterable[int]) -> None:
    """Close every descriptor above 2 that is not in ``keep``."""
    low = 3
    for fd in sorted(fd for fd in set(keep) if fd >= low):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 0x7FFF_FFFF)  # close_range(2) on Linux: one system call, whatever the limit


__all__ = ["KEEP_ALL", "can_clone", "close_all_but", "fork", "set_handler"]
