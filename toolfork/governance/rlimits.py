"""Soft rlimits for the length of one call in a warm worker, and naming the limit a call hit.

Why soft limits around each call rather than a process per limited tool: a warm worker then serves
limited and unlimited tools alike, and lowering then restoring a soft limit costs a few system calls.
The hard limits are left alone (an unprivileged process could never raise them again), except the CPU
backstop below.

These are guard rails for trusted code: soft limits a call could raise back itself with
``resource.setrlimit`` (the hard limits are the worker's own). A call whose code is not trusted belongs
in the sandbox tier (``Limits.sandboxed``).

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
  counts whole seconds) and at least a second past the timer: SIGXCPU keeps its default action for the
  call, so the kernel ends the worker there, whatever the call does: C code that never returns to the
  interpreter (one long ``hashlib.pbkdf2_hmac``) cannot be reached by a Python handler, and a call that
  swallowed the timer's error or reset the timer is ended the same way. The host names that death
  ``LimitExceeded`` (``classify``). Where the process may raise its hard limit again (CAP_SYS_RESOURCE)
  the hard limit is also set 2 s above the soft one for the call (SIGKILL there).
- file_size_mb: RLIMIT_FSIZE, the largest file the call may write (not a budget: it is per file).
  SIGXFSZ is caught for the call, so the write fails with OSError(EFBIG) instead of killing the worker.
- open_files: RLIMIT_NOFILE = the descriptors the worker has open + the budget (it limits descriptor
  numbers and a new one takes the lowest free number, so the call gets at least the budget, and a few
  more where the worker's descriptors sit above that limit: its channels are kept high).
- processes: RLIMIT_NPROC = the tasks (threads count) the user runs now + the budget. The kernel
  counts every process of the real user, so other workers of the same user share the headroom, and it
  does not apply to a privileged process (see `probe`).

A worker keeps a call's rlimits in place after it (``applied(limits, keep=True)``) while the calls that
follow run under the same limits, and puts its own back (``release``) before a call under other limits
or none: so the limits are in force exactly for the calls that have them, and a run of one tool's calls
pays only for the values that moved (the data segment, the CPU time, the descriptors open), each read
cheaply: statm with one pread on a kept descriptor, the descriptors counted again only when the lowest
free number moved (a new descriptor always takes it). A call that used ``resource.setrlimit`` or
``resource.prlimit`` makes the next one start from the worker's own limits again.

A signal handler can only be installed from the main thread; from another thread SIGXCPU keeps its
default action (the worker dies of it, which `classify` names just the same), and SIGXFSZ keeps what
the process had: Python ignores it from startup, so the write fails with EFBIG; a host that restored
the default action loses the worker to it, which `classify` names too.
"""

from __future__ import annotations

import _signal
import contextlib
import errno
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

from .limits import Limits
from .verdict import (
    CAP_SYS_ADMIN,
    CAP_SYS_RESOURCE,
    PAGE,
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
_getsignal = _signal.getsignal
SIGXCPU, SIGPROF, SIGXFSZ = (int(getattr(signal, n, 0)) for n in ("SIGXCPU", "SIGPROF", "SIGXFSZ"))
# Likewise the timer: the worker's watch on ``signal.setitimer`` would take the call for one that changed
# the signal state and look at every disposition after it.
_setitimer: Any = getattr(_signal, "setitimer", None) or getattr(signal, "setitimer", None)
ITIMER_PROF = int(getattr(signal, "ITIMER_PROF", 2))

_CAPS: dict[int, bool] = {}
# This process's pid, kept current by a fork hook: each getpid is a system call, and a call under limits
# would make several.
_pid = [os.getpid()]
_STATM: list[tuple[int, int]] = []  # (pid, descriptor of its /proc/<pid>/statm), kept open


def _after_fork_in_child() -> None:
    """A forked child: its pid, and the parent's statm descriptor closed now, while its number is still
    that descriptor (later, a sandbox's close of what it does not keep frees the number, and a channel
    may take it)."""
    _pid[0] = os.getpid()
    if _STATM:
        with contextlib.suppress(OSError):
            os.close(_STATM[0][1])
        _STATM.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _may_raise_hard_limits() -> bool:
    """CAP_SYS_RESOURCE, looked at once per process (a worker's capabilities only ever shrink, and the
    backstop it allows is only a backstop)."""
    pid = _pid[0]
    known = _CAPS.get(pid)
    if known is None:
        known = _CAPS[pid] = has_capability(CAP_SYS_RESOURCE)
    return known


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


def _statm_fd() -> int | None:
    """This process's /proc/<pid>/statm, opened once per process (None where it cannot be opened)."""
    pid = _pid[0]
    if not _STATM or _STATM[0][0] != pid:
        _STATM.clear()  # (a parent's, where no fork hook ran: its number may name another descriptor now)
        try:
            _STATM.append((pid, os.open(f"/proc/{pid}/statm", os.O_RDONLY | os.O_CLOEXEC)))
        except OSError:
            return None
    return _STATM[0][1]


def _data_bytes() -> int:
    """The data segment and stack of this process now (/proc/self/statm, read again through a descriptor
    kept open per process: a third of the cost of opening it each call)."""
    fd = _statm_fd()
    if fd is None:
        return statm_bytes(STATM_DATA)
    return int(os.pread(fd, 256, 0).split()[STATM_DATA]) * PAGE


def _lowest_free_fd() -> int:
    """The number the next descriptor would take (-1: unknown); two system calls."""
    fd = _statm_fd()
    if fd is None:
        return -1
    try:
        mark = os.dup(fd)
    except OSError:  # no number free below the limit
        return -1
    os.close(mark)
    return mark


class Applied:
    """The limits in force for one call, what they replaced, and the limit signals the call got; the
    context manager ``applied`` returns (entering sets them, leaving restores the worker's own)."""

    __slots__ = ("_handlers", "_in_call", "_saved", "_timer", "cpu_start_s", "keep", "limits", "locked", "plan",
                 "tripped")

    def __init__(self, limits: Limits, keep: bool = False, locked: bool = False) -> None:
        self.limits = limits
        self.keep = keep
        self.locked = locked  # the rlimits are in place for good already: only the signals and the timer
        kept = _kept
        self.plan = kept.plan if kept is not None and kept.limits is limits else _plan(limits)
        self.cpu_start_s = 0.0
        self.tripped: set[str] = set()
        self._saved: list[tuple[int, tuple[int, int]]] = []
        self._handlers: list[tuple[int, Any]] = []
        self._in_call = True
        self._timer = False

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

    def _on_xfsz(self, signum: int, frame: FrameType | None) -> None:
        if self._in_call:
            self.tripped.add("file_size_mb")  # the write itself fails with EFBIG

    def __enter__(self) -> Applied:
        plan = self.plan
        if not plan:
            return self
        if resource is None:
            raise OSError("rlimits are not available on this platform")
        limits = self.limits
        kept = None
        if self.keep:
            kept = _keep(limits)
        else:
            release()  # limits a worker kept from an earlier call are not this call's
        main = threading.get_ident() == threading.main_thread().ident
        self._timer = timer = main and limits.cpu_s is not None
        # SIGXCPU keeps its default action for the call: the kernel ends the worker at the soft limit, even
        # in C code that never returns to the interpreter (see the module docstring).
        wanted = [(SIGXCPU, _signal.SIG_DFL)] if limits.cpu_s is not None else []
        if timer:
            wanted.append((SIGPROF, _on_prof_signal))
        if main and limits.file_size_mb is not None:
            wanted.append((SIGXFSZ, _on_xfsz_signal))
        _current[0] = self
        if kept is None:
            self._handlers = [(signum, _set_handler(signum, handler)) for signum, handler in wanted]
        else:
            kept.install(wanted)
        try:
            if self.locked:
                self.cpu_start_s = time.process_time()
            elif kept is None:
                _apply(self, plan, timer)
            else:
                _apply_kept(self, kept, plan, timer)
            if timer:
                _setitimer(ITIMER_PROF, limits.cpu_s or 0)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._in_call = False  # a late SIGPROF from here on does not raise
        if _current[0] is self:
            _current[0] = None
        if self._timer:
            _setitimer(ITIMER_PROF, 0)
        try:
            if not self.keep:
                _restore(self)
        finally:
            for signum, old in self._handlers:
                _set_handler(signum, old)
            self._handlers.clear()


_current: list[Applied | None] = [None]  # the call the limit signals are for (None between calls)


def _on_prof_signal(signum: int, frame: FrameType | None) -> None:
    applied = _current[0]
    if applied is not None:
        applied._on_prof(signum, frame)


def _on_xfsz_signal(signum: int, frame: FrameType | None) -> None:
    applied = _current[0]
    if applied is not None:
        applied._on_xfsz(signum, frame)


_PLANS: dict[Limits, tuple[tuple[str, int], ...]] = {}


def _plan(limits: Limits) -> tuple[tuple[str, int], ...]:
    """(field, rlimit) of each rlimit ``limits`` sets, worked out once per Limits value."""
    plan = _PLANS.get(limits)
    if plan is None:
        plan = tuple((f, getattr(resource, RLIMIT_OF[f])) for f in RLIMIT_OF
                     if getattr(limits, f) is not None and resource is not None)
        if len(_PLANS) < 1024:
            _PLANS[limits] = plan
    return plan


def _target(old: tuple[int, int], soft: int, hard: int | None) -> tuple[int, int]:
    """The (soft, hard) pair to set over the worker's own `old`: never looser than it."""
    old_soft, old_hard = old
    new_hard = old_hard if hard is None else hard
    if new_hard != resource.RLIM_INFINITY and old_hard != resource.RLIM_INFINITY:
        new_hard = min(new_hard, old_hard)
    if new_hard != resource.RLIM_INFINITY:
        soft = min(soft, new_hard)
    if old_soft != resource.RLIM_INFINITY:
        soft = min(soft, old_soft)  # never loosen what the worker already had
    return soft, new_hard


def _set_soft(applied: Applied, which: int, soft: int, hard: int | None = None) -> None:
    old = _getrlimit(which)
    applied._saved.append((which, old))
    _setrlimit(which, _target(old, soft, hard))


def _values(applied: Applied, plan: tuple[tuple[str, int], ...], timer: bool,
            open_fds: Callable[[], int]) -> Iterator[tuple[int, int, int | None]]:
    """(rlimit, soft, hard or None) of each limit in `plan`, worked out from this process now."""
    limits = applied.limits
    for name, which in plan:
        if name == "memory_mb":
            yield which, _data_bytes() + (limits.memory_mb or 0) * MIB, None
        elif name == "cpu_s":
            applied.cpu_start_s = start = time.process_time()
            soft = math.ceil(start + (limits.cpu_s or 0) + (1 if timer else 0))
            yield which, soft, soft + CPU_BACKSTOP_S if _may_raise_hard_limits() else None
        elif name == "file_size_mb":
            yield which, (limits.file_size_mb or 0) * MIB, None
        elif name == "open_files":
            yield which, open_fds() + (limits.open_files or 0), None
        else:
            yield which, _user_tasks(os.getuid()) + (limits.processes or 0), None


def _apply(applied: Applied, plan: tuple[tuple[str, int], ...], timer: bool) -> None:
    for which, soft, hard in _values(applied, plan, timer, _open_fds):
        _set_soft(applied, which, soft, hard)


def _restore(applied: Applied) -> None:
    _put_back(reversed(applied._saved), "after the call")
    applied._saved.clear()


def _put_back(saved: Iterable[tuple[int, tuple[int, int]]], when: str) -> None:
    failures = []
    for which, old in saved:
        try:
            _setrlimit(which, old)
        except (OSError, ValueError) as exc:
            failures.append(f"rlimit {which}: {exc}")
    if failures:  # the worker cannot serve the next call as promised: its owner must replace it
        raise RuntimeError(f"could not restore the worker's limits {when}: " + "; ".join(failures))


# The setters as they were at import: the module's names are watched in a process that keeps limits.
_getrlimit: Any = getattr(resource, "getrlimit", None)
_setrlimit: Any = getattr(resource, "setrlimit", None)


class _Kept:
    """The rlimits a process kept in place after a call (``applied(limits, keep=True)``): for which
    Limits, what the process had before (`original`), what is set now (`current`), and the open
    descriptors as last counted with the lowest free number then (`fds`, `fd_mark`)."""

    __slots__ = ("current", "fd_mark", "fds", "handlers", "limits", "made_from", "original", "pid", "plan")

    def __init__(self, limits: Limits, plan: tuple[tuple[str, int], ...]) -> None:
        self.limits = limits
        self.plan = plan
        self.made_from: dict[int, int] = {}  # the soft value each kept limit was worked out as
        self.pid = _pid[0]
        self.original: dict[int, tuple[int, int]] = {}
        self.current: dict[int, tuple[int, int]] = {}
        self.fds = 0
        self.fd_mark = -2
        self.handlers: dict[int, Any] = {}  # the handler each limit signal had before the first call

    def install(self, wanted: list[tuple[int, Any]]) -> None:
        """Put in the limit signals' handlers that are not in place (looking costs no system call)."""
        for signum, handler in wanted:
            if _getsignal(signum) != handler:
                old = _set_handler(signum, handler)
                self.handlers.setdefault(signum, old)

    def open_fds(self) -> int:
        mark = _lowest_free_fd()
        if mark < 0 or mark != self.fd_mark:
            self.fds = _open_fds()
            self.fd_mark = mark
        return self.fds


_kept: _Kept | None = None
_touched = [False]  # a call used resource.setrlimit or resource.prlimit since the limits were kept


def release() -> None:
    """Put back the worker's own rlimits and limit-signal handlers where a call's were kept in place
    (nothing otherwise)."""
    global _kept
    kept = _kept
    if kept is None:
        return
    _kept = None
    for signum, old in kept.handlers.items():
        _set_handler(signum, old)
    everything = _touched[0]  # a call set limits itself: what is in place is not what was kept
    _put_back(((w, old) for w, old in kept.original.items() if everything or kept.current.get(w) != old),
              "kept after the calls under them")


def _watch_setters() -> None:
    """Wrap ``resource.setrlimit``/``prlimit`` so a call that changes limits itself is known."""
    for name in ("setrlimit", "prlimit"):
        original = getattr(resource, name, None)
        if original is None or getattr(original, "_toolfork_watched", False):
            continue

        def watched(*args: Any, _original: Any = original) -> Any:
            _touched[0] = True
            return _original(*args)

        watched._toolfork_watched = True  # type: ignore[attr-defined]
        setattr(resource, name, watched)


def _keep(limits: Limits) -> _Kept:
    """The kept state for a call under `limits`: the one in place, or a new one once the worker's own
    limits are back (another Limits value, a call that set limits itself, a forked copy)."""
    global _kept
    kept = _kept
    if kept is not None and (_touched[0] or kept.pid != _pid[0]
                             or (kept.limits is not limits and kept.limits != limits)):
        release()
        kept = None
    if kept is None:
        _watch_setters()
        _touched[0] = False
        kept = _kept = _Kept(limits, _plan(limits))
    return kept


def _apply_kept(applied: Applied, kept: _Kept, plan: tuple[tuple[str, int], ...], timer: bool) -> None:
    """Set `applied`'s limits where they are not in place already, and keep them after the call.

    On the path of every call of a run: each value is worked out as ``_values`` does and compared with
    the one the kept limit was made from before anything is set."""
    limits = applied.limits
    made_from = kept.made_from
    for name, which in plan:
        hard = None
        if name == "memory_mb":
            soft = _data_bytes() + (limits.memory_mb or 0) * MIB
        elif name == "cpu_s":
            applied.cpu_start_s = start = time.process_time()
            soft = math.ceil(start + (limits.cpu_s or 0) + (1 if timer else 0))
            hard = soft + CPU_BACKSTOP_S if _may_raise_hard_limits() else None
        elif name == "file_size_mb":
            soft = (limits.file_size_mb or 0) * MIB
        elif name == "open_files":
            soft = kept.open_fds() + (limits.open_files or 0)
        else:
            soft = _user_tasks(os.getuid()) + (limits.processes or 0)
        if made_from.get(which) == soft:
            continue  # in place since an earlier call
        made_from.pop(which, None)  # unknown until the call below succeeds
        old = kept.original.get(which)
        if old is None:
            old = kept.original[which] = _getrlimit(which)
        target = _target(old, soft, hard)
        if kept.current.get(which, old) != target:
            _setrlimit(which, target)
            kept.current[which] = target
        made_from[which] = soft


def applied(limits: Limits, keep: bool = False, *, locked: bool = False) -> Applied:
    """A context manager: run the body under `limits`' rlimits and restore the worker's own limits after it.

    With `locked`, the rlimits are in place already, hard for good (``sandbox.lock_rlimits``, in a
    one-shot sandbox): only the limit signals' handlers and the CPU timer are set for the body (working
    the same values out again, from /proc, would only meet the hard limits).

    With `keep`, the limits stay in place after the body for the next body under the same limits, and
    ``release()`` (or a body under other limits without `keep`) puts the worker's own back: what a
    worker does between calls. Fields that are not rlimits (network, paths) are ignored here. The
    `Applied` it gives says which limit signals arrived (`tripped`) and classifies the call's outcome.
    """
    return Applied(limits, keep, locked)


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


# What the ways of running out of memory under RLIMIT_DATA say, short of MemoryError: a thread whose stack
# cannot be mapped, a private mapping refused (ENOMEM), a shared library that cannot be mapped on import.
_OUT_OF_MEMORY_TEXT = ("can't start new thread", "cannot allocate memory", "failed to map segment",
                       "out of memory", "memory allocation failed", "unable to allocate")


def _is_out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
        return True
    if isinstance(exc, (RuntimeError, ImportError, OSError)):
        text = str(exc).lower()
        return any(t in text for t in _OUT_OF_MEMORY_TEXT)
    return False


# A worker that died of these signals during a call under memory_mb most likely met the limit in C code
# (an allocation whose failure the library did not check, an abort() on it, OpenBLAS's raise(SIGINT) when
# it cannot start its threads on import): named as the memory limit. A worker ignores SIGINT from a
# terminal (it leads a process group of its own), so a SIGINT death mid-call is the call's own doing.
_MEMORY_DEATHS = frozenset(int(getattr(signal, n)) for n in ("SIGSEGV", "SIGBUS", "SIGABRT", "SIGINT")
                           if hasattr(signal, n))


# The codes a worker exits with of its own accord (done, its own failure, its channels damaged): any other
# exit in the middle of a call under memory_mb is C code that gave up (OpenBLAS exits when it cannot
# allocate its threads' buffers on import).
_WORKER_EXIT_CODES = frozenset({0, 70, 75})
# A sandbox's exit status says it (set by its template, or its outer: see governance.cgroup) when the kernel
# OOM-killed a process of the call's cgroup: the call's processes together reached memory_mb.
CGROUP_OOM_EXIT = 76


def _memory_death(limits: Limits, how: str) -> LimitExceeded:
    hit = _exceeded(limits, "memory_mb")
    return LimitExceeded(hit.limit, hit.value, f"{hit.message} (the worker {how} in the middle of the call: "
                                               "most likely C code that could not allocate)")


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
            if limits.memory_mb is not None and _is_out_of_memory(exc):
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
        if sig in _MEMORY_DEATHS and limits.memory_mb is not None:
            return _memory_death(limits, f"died of {signal.Signals(sig).name}")
    if isinstance(outcome, int) and os.WIFEXITED(outcome) and limits.memory_mb is not None \
            and os.WEXITSTATUS(outcome) == CGROUP_OOM_EXIT:
        over = _exceeded(limits, "memory_mb")
        return LimitExceeded(over.limit, over.value, f"{over.message} (by the call's processes together: the "
                                                     "kernel killed one at its cgroup's limit)")
    if isinstance(outcome, int) and os.WIFEXITED(outcome) and limits.memory_mb is not None \
            and os.WEXITSTATUS(outcome) not in _WORKER_EXIT_CODES:
        return _memory_death(limits, f"exited with code {os.WEXITSTATUS(outcome)}")
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
