"""Soft rlimits for the length of one call in a warm worker, and naming the limit a call hit.

Why soft limits around each call rather than a process per limited tool: a warm worker then serves
limited and unlimited tools alike, and lowering then restoring a soft limit costs a few system calls.
The hard limits are left alone (an unprivileged process could never raise them again), except the CPU
backstop below.

Each budget is on top of what the worker holds when the call starts, because a forked worker inherits
the host's heap, descriptors and CPU time, which the tool's author neither sees nor controls; an
absolute cap would make the same tool pass or fail with the size of the host:
- memory_mb: RLIMIT_DATA = the worker's data segment and stack now (/proc/self/statm) + the budget.
  RLIMIT_DATA (Linux 4.7+) counts the heap and private writable mappings, which is what allocating
  memory grows; RLIMIT_AS would also count shared libraries, file mappings and address space reserved
  but never touched (malloc arenas, thread stacks), so a small cap would fail in a worker that merely
  imported something large, and a cap loose enough for that would not stop anything. Allocating past it
  gives the tool MemoryError.
- cpu_s: on the main thread, a profiling timer (ITIMER_PROF: the process's CPU time, to the millisecond)
  sends SIGPROF after cpu_s of CPU; its handler raises `LimitExceededError` in the tool once. Behind it,
  RLIMIT_CPU = the worker's CPU time so far + the budget, rounded up to a whole second (the kernel
  counts whole seconds) and at least a second past the timer: the kernel sends SIGXCPU there, which
  raises the same error if the timer could not (another thread, the tool reset the timer), and if the
  call goes on after being told, the next SIGXCPU (a second later) kills the worker with it. Code that
  never returns to the interpreter cannot see a Python handler: where the process may raise its hard
  limit again (CAP_SYS_RESOURCE) the hard limit is set 2 s above the soft one for the call, so the
  kernel kills the worker; elsewhere the call's timeout is the backstop.
- file_size_mb: RLIMIT_FSIZE, the largest file the call may write (not a budget: it is per file).
  SIGXFSZ is caught for the call, so the write fails with OSError(EFBIG) instead of killing the worker.
- open_files: RLIMIT_NOFILE = the descriptors the worker has open + the budget (it limits descriptor
  numbers and a new one takes the lowest free number, so the call gets at least the budget, and a few
  more where the worker's descriptors sit above that limit: its channels are kept high).
- processes: RLIMIT_NPROC = the tasks (threads count) the user runs now + the budget. The kernel
  counts every process of the real user, so other workers of the same user share the headroom, and it
  does not apply to a privileged process (see `probe`).

A signal handler can only be installed from the main thread; from another thread SIGXCPU keeps its
default action (the worker dies of it, which `classify` names just the same), and SIGXFSZ keeps what
the process had: Python ignores it from startup, so the write fails with EFBIG; a host that restored
the default action loses the worker to it, which `classify` names too.
"""

from __future__ import annotations

import _signal
import errno
import math
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from .limits import Limits
from .verdict import (
    CAP_SYS_ADMIN,
    CAP_SYS_RESOURCE,
    STATM_DATA,
    Probe,
    has_capability,
    proc_status,
    statm_bytes,
    status_field,
)

try:
    import resource
except ImportError:  # not a Unix: nothing here can be enforced, `probe` says so
    resource = None  # type: ignore[assignment]

MIB = 1024 * 1024
CPU_BACKSTOP_S = 2

# Which rlimit each field sets (by name: a platform may lack one, and `probe` says which).
RLIMIT_OF = {
    "memory_mb": "RLIMIT_DATA",
    "cpu_s": "RLIMIT_CPU",
    "file_size_mb": "RLIMIT_FSIZE",
    "open_files": "RLIMIT_NOFILE",
    "processes": "RLIMIT_NPROC",
}


class LimitExceededError(Exception):
    """Raised inside a call that ran past a limit the kernel signals (CPU time)."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True)
class LimitExceeded:
    """Which limit a call hit: `limit` is the Limits field, `message` the text for the user."""

    limit: str
    value: float
    message: str
    type: str = "LimitExceeded"


def describe(limit: str, value: float) -> str:
    """The user-facing sentence for a limit that was hit ("memory limit of 256 MB exceeded")."""
    shown = f"{value:g}"
    return {
        "memory_mb": f"memory limit of {shown} MB exceeded",
        "cpu_s": f"CPU time limit of {shown} s exceeded",
        "file_size_mb": f"file size limit of {shown} MB exceeded",
        "open_files": f"open files limit of {shown} exceeded",
        "processes": f"process limit of {shown} exceeded",
    }[limit]


def _exceeded(limits: Limits, limit: str) -> LimitExceeded:
    value = getattr(limits, limit)
    return LimitExceeded(limit, value, describe(limit, value))


def _open_fds() -> int:
    """How many descriptors are open (RLIMIT_NOFILE bounds descriptor numbers, and a new descriptor
    takes the lowest free number: a limit of open + budget leaves at least budget numbers free, however
    the open ones are spread; the worker's channels sit high, where the highest number would say
    nothing of how many a call may open)."""
    for where in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(where))
        except OSError:
            continue
    return 3


# The C setter: ``signal.signal`` wraps it in enum conversions that cost more than the call itself, and
# a worker's own watch on the ``signal`` module's setters is for what a tool changes, not for this.
_set_handler = _signal.signal
SIGXCPU, SIGPROF, SIGXFSZ = (int(getattr(signal, n, 0)) for n in ("SIGXCPU", "SIGPROF", "SIGXFSZ"))

_CAPS: dict[int, bool] = {}


def _may_raise_hard_limits() -> bool:
    """CAP_SYS_RESOURCE, looked at once per process (a worker's capabilities only ever shrink, and the
    backstop it allows is only a backstop)."""
    pid = os.getpid()
    held = _CAPS.get(pid)
    if held is None:
        held = _CAPS[pid] = has_capability(CAP_SYS_RESOURCE)
    return held


def _user_tasks(uid: int) -> int:
    """Tasks (threads) whose real uid is `uid`: what RLIMIT_NPROC counts."""
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        status = proc_status(name)
        real = status_field(status, b"Uid")
        if real is not None and int(real) == uid:
            count += int(status_field(status, b"Threads") or 1)
    return count


def _cpu_used_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass(repr=False)  # signal.signal repr()s the handler it returns: keep that cheap
class Applied:
    """The limits in force for one call, what they replaced, and the limit signals the call got."""

    limits: Limits
    cpu_start_s: float = 0.0
    tripped: set[str] = field(default_factory=set)
    _saved: dict[int, tuple[int, int]] = field(default_factory=dict)
    _handlers: dict[int, Any] = field(default_factory=dict)
    _in_call: bool = True

    def __repr__(self) -> str:
        return f"Applied(tripped={sorted(self.tripped)})"

    def classify(self, outcome: BaseException | int | None, cpu_used_s: float | None = None) -> LimitExceeded | None:
        """`classify` with the signals this call received (a tool that swallowed the error still hit it)."""
        return classify(outcome, self.limits, tripped=frozenset(self.tripped), cpu_used_s=cpu_used_s)

    # Signal handlers, installed for the call from the main thread.
    def _on_prof(self, signum: int, frame: FrameType | None) -> None:
        if not self._in_call or "cpu_s" in self.tripped:
            return
        self.tripped.add("cpu_s")
        raise LimitExceededError("cpu_s", describe("cpu_s", self.limits.cpu_s or 0))

    def _on_xcpu(self, signum: int, frame: FrameType | None) -> None:
        if not self._in_call:
            return
        if "cpu_s" in self.tripped:  # told once and still running: die of the signal
            signal.signal(signal.SIGXCPU, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGXCPU)
            return
        self.tripped.add("cpu_s")
        raise LimitExceededError("cpu_s", describe("cpu_s", self.limits.cpu_s or 0))

    def _on_xfsz(self, signum: int, frame: FrameType | None) -> None:
        if self._in_call:
            self.tripped.add("file_size_mb")  # the write itself fails with EFBIG


def _set_soft(applied: Applied, which: int, soft: int, hard: int | None = None) -> None:
    old_soft, old_hard = resource.getrlimit(which)
    applied._saved.setdefault(which, (old_soft, old_hard))
    new_hard = old_hard if hard is None else hard
    if new_hard != resource.RLIM_INFINITY and old_hard != resource.RLIM_INFINITY:
        new_hard = min(new_hard, old_hard)
    if new_hard != resource.RLIM_INFINITY:
        soft = min(soft, new_hard)
    if old_soft != resource.RLIM_INFINITY:
        soft = min(soft, old_soft)  # never loosen what the worker already had
    resource.setrlimit(which, (soft, new_hard))


def _apply(applied: Applied) -> None:
    limits = applied.limits
    if limits.memory_mb is not None:
        _set_soft(applied, resource.RLIMIT_DATA, statm_bytes(STATM_DATA) + limits.memory_mb * MIB)
    if limits.cpu_s is not None:
        applied.cpu_start_s = _cpu_used_s()
        soft = math.ceil(applied.cpu_start_s + limits.cpu_s + (1 if SIGPROF in applied._handlers else 0))
        backstop = soft + CPU_BACKSTOP_S if _may_raise_hard_limits() else None
        _set_soft(applied, resource.RLIMIT_CPU, soft, backstop)
    if limits.file_size_mb is not None:
        _set_soft(applied, resource.RLIMIT_FSIZE, limits.file_size_mb * MIB)
    if limits.open_files is not None:
        _set_soft(applied, resource.RLIMIT_NOFILE, _open_fds() + limits.open_files)
    if limits.processes is not None:
        _set_soft(applied, resource.RLIMIT_NPROC, _user_tasks(os.getuid()) + limits.processes)


def _restore(applied: Applied) -> None:
    failures = []
    for which, old in reversed(list(applied._saved.items())):
        try:
            resource.setrlimit(which, old)
        except (OSError, ValueError) as exc:
            failures.append(f"rlimit {which}: {exc}")
    applied._saved.clear()
    if failures:  # the worker cannot serve the next call as promised: its owner must replace it
        raise RuntimeError("could not restore the worker's limits after the call: " + "; ".join(failures))


@contextmanager
def applied(limits: Limits) -> Iterator[Applied]:
    """Run the body under `limits`' rlimits and restore the worker's own limits after it.

    Fields that are not rlimits (network, paths) are ignored here. The yielded `Applied` says which
    limit signals arrived (`tripped`) and classifies the call's outcome.
    """
    state = Applied(limits)
    wanted = [f for f in RLIMIT_OF if getattr(limits, f) is not None]
    if not wanted:
        yield state
        return
    if resource is None:
        raise OSError("rlimits are not available on this platform")
    main = threading.get_ident() == threading.main_thread().ident
    if main and limits.cpu_s is not None:
        state._handlers[SIGXCPU] = _set_handler(SIGXCPU, state._on_xcpu)
        state._handlers[SIGPROF] = _set_handler(SIGPROF, state._on_prof)
    if main and limits.file_size_mb is not None:
        state._handlers[SIGXFSZ] = _set_handler(SIGXFSZ, state._on_xfsz)
    timer = SIGPROF in state._handlers
    try:
        _apply(state)
        if timer:
            signal.setitimer(signal.ITIMER_PROF, limits.cpu_s or 0)
        yield state
    finally:
        state._in_call = False  # a late SIGXCPU from here on only counts, it does not raise
        if timer:
            signal.setitimer(signal.ITIMER_PROF, 0)
        try:
            _restore(state)
        finally:
            for signum, old in state._handlers.items():
                _set_handler(signum, old)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack = [exc]
    while stack and len(seen) < 32:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack.extend(x for x in (e.__cause__, e.__context__) if x is not None)


def classify(outcome: BaseException | int | None, limits: Limits, *, tripped: frozenset[str] = frozenset(),
             cpu_used_s: float | None = None) -> LimitExceeded | None:
    """The limit a call hit, or None when its outcome is not a limit of `limits`.

    `outcome`: the exception the call raised (its causes and contexts are looked at too), or the wait
    status of a worker that died (as from os.waitpid), or None (the call returned). `tripped`: limit
    signals the call received. `cpu_used_s`: the CPU time the call used, when known (for a worker killed
    by SIGKILL: only a CPU time at or past the budget makes that kill the CPU limit's). EAGAIN is read
    as the process limit only when `processes` is set: it is what fork gives past RLIMIT_NPROC, and
    also what a non-blocking socket gives, which a tool under a process limit could let escape.
    """
    for name in ("cpu_s", "file_size_mb"):
        if name in tripped and getattr(limits, name) is not None:
            return _exceeded(limits, name)
    if isinstance(outcome, BaseException):
        for exc in _chain(outcome):
            if isinstance(exc, LimitExceededError) and getattr(limits, exc.limit, None) is not None:
                return _exceeded(limits, exc.limit)
            if isinstance(exc, MemoryError) and limits.memory_mb is not None:
                return _exceeded(limits, "memory_mb")
            if isinstance(exc, OSError):
                by_errno = {errno.EFBIG: "file_size_mb", errno.EMFILE: "open_files", errno.EAGAIN: "processes"}
                hit = by_errno.get(exc.errno or 0)
                if hit is not None and getattr(limits, hit) is not None:
                    return _exceeded(limits, hit)
        return None
    if isinstance(outcome, int) and os.WIFSIGNALED(outcome):
        sig = os.WTERMSIG(outcome)
        if sig == signal.SIGXCPU and limits.cpu_s is not None:
            return _exceeded(limits, "cpu_s")
        if sig == signal.SIGXFSZ and limits.file_size_mb is not None:
            return _exceeded(limits, "file_size_mb")
        if (sig == signal.SIGKILL and limits.cpu_s is not None and cpu_used_s is not None
                and cpu_used_s >= limits.cpu_s):
            return _exceeded(limits, "cpu_s")
    return None


def probe(limit: str) -> Probe:
    """Whether the rlimit behind Limits field `limit` is enforced on this OS, for this process."""
    if resource is None:
        return Probe(False, f"{sys.platform} has no rlimits")
    name = RLIMIT_OF[limit]
    if not hasattr(resource, name):
        return Probe(False, f"{sys.platform} has no {name}")
    if not sys.platform.startswith("linux"):
        return Probe(False, f"{name} is only known to be enforced on Linux, not {sys.platform}")
    if limit == "memory_mb":
        release = tuple(int(p) for p in os.uname().release.split(".")[:2] if p.isdigit())
        if release < (4, 7):
            return Probe(False, f"RLIMIT_DATA counts anonymous memory only from Linux 4.7 (this is {release})")
    if limit == "processes" and (has_capability(CAP_SYS_RESOURCE) or has_capability(CAP_SYS_ADMIN)):
        return Probe(False, "RLIMIT_NPROC does not bind a process holding CAP_SYS_RESOURCE or CAP_SYS_ADMIN "
                            "(root): run the workers as an unprivileged user")
    return Probe(True)
