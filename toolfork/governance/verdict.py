"""`Probe`: whether one mechanism can be enforced here, and why not; and trying one in a child.

Why its own module: every mechanism (rlimits, network namespace, Landlock) answers the same question
in the same shape, and the honest way to know whether a kernel lets this process do something
irreversible is to do it in a throw-away forked child, which is written once here.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass

CAP_SYS_ADMIN = 21
CAP_SYS_RESOURCE = 24


@functools.lru_cache(maxsize=1)
def libc() -> ctypes.CDLL:
    """The C library (the process's own symbols: dlopen(NULL), no search for a file)."""
    return ctypes.CDLL(None, use_errno=True)


def proc_status(pid: int | str = "self") -> bytes:
    """/proc/PID/status in one read (b"" where there is none, or the process is gone)."""
    try:
        fd = os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
STATM_RESIDENT, STATM_DATA = 1, 5  # fields of /proc/PID/statm: resident set; data segment and stack


def statm_bytes(field: int, pid: int | str = "self") -> int:
    """One field of /proc/PID/statm, in bytes (one small read: statm is made in half the time of
    status). Raises OSError where there is none (not Linux, the process is gone, /proc is hidden)."""
    fd = os.open(f"/proc/{pid}/statm", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return int(os.read(fd, 256).split()[field]) * PAGE
    finally:
        os.close(fd)


def status_field(status: bytes, name: bytes) -> bytes | None:
    """The first word of field `name` (e.g. b"VmData") of a /proc/self/status text, or None."""
    start = status.find(b"\n" + name + b":")
    if start < 0:
        return None
    words = status[start + len(name) + 2 : status.find(b"\n", start + 1)].split()
    return words[0] if words else None


def has_capability(bit: int, status: bytes | None = None) -> bool:
    """Whether this process holds capability `bit` in its effective set (Linux; False elsewhere)."""
    value = status_field(proc_status() if status is None else status, b"CapEff")
    return value is not None and bool(int(value, 16) >> bit & 1)


def thread_count(settle_s: float = 1.0) -> int:
    """The threads this process runs (a namespace or Landlock domain entered now binds only one). A thread
    on its way out is waited out, for up to ``settle_s``: one whose ``run`` returned (``Thread.run``
    deletes its ``_target``) that ``threading`` still lists (a stopped metric reader's at-fork thread
    leaves at once), and one Python has already seen end (one a library's at-fork hook ran briefly in a
    child: OpenTelemetry's SDK detects its resource in a thread pool after each fork), which the kernel
    lists a moment longer."""
    import threading
    import time

    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not hasattr(thread, "_target"):
            thread.join(settle_s)
    deadline = None
    while True:
        try:
            count = len(os.listdir("/proc/self/task"))
        except OSError:
            return 1
        if count <= threading.active_count():
            return count
        now = time.monotonic()
        if deadline is None:
            deadline = now + settle_s
        elif now >= deadline:
            return count
        time.sleep(0.0005)


@dataclass(frozen=True)
class Probe:
    """`ok`: the mechanism can be enforced here; else `reason` says why not (OS, permission, kernel)."""

    ok: bool
    reason: str = ""


def try_in_child(attempt: Callable[[], None], keep: Callable[[int], Callable[[], None]] | None = None) -> Probe:
    """Run `attempt` in a forked child; ok if it returned, else the error it raised (as the reason).
    `keep`, instead of `attempt`: given the descriptor the child reports on, returns the attempt (for
    one that closes every descriptor but those it is told to keep).

    The child exits with os._exit (no atexit handler, no flush of the parent's buffers); the parent
    waits for it, so no process is left behind.
    """
    if not hasattr(os, "fork"):
        return Probe(False, "this platform cannot fork")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(read_fd)
            try:
                (keep(write_fd) if keep is not None else attempt)()
            except BaseException as exc:
                os.write(write_fd, f"{type(exc).__name__}: {exc}".encode(errors="replace")[:4000])
                code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks = []
    with os.fdopen(read_fd, "rb") as f:
        chunks.append(f.read())
    _, status = os.waitpid(pid, 0)
    message = b"".join(chunks).decode(errors="replace")
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return Probe(True)
    return Probe(False, message or f"the probing child ended with status {status}")
