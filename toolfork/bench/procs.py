"""Process accounting: what a pool leaves behind, and cleaning it up so the next cell starts clean.

The runner makes itself a child subreaper (Linux), so a worker orphaned by a closed pool is
re-parented to the runner instead of init and still shows up among its descendants. The harness
additionally tags every runner with an environment marker, which all descendants inherit, so that
processes which escaped even that (the runner was killed) can be found and counted afterwards.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Iterable

import psutil

MARK_ENV = "TOOLFORK_BENCH_MARK"
# Per-host helpers that live as long as the host process by design, not per pool: not counted.
_HOST_HELPERS = ("resource_tracker", "semaphore_tracker")
_PR_SET_CHILD_SUBREAPER = 36


def exit_text(code: int | None) -> str:
    """A process's exit as a reader wants it: the signal's name rather than a negative code."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux prctl); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _is_host_helper(p: psutil.Process) -> bool:
    try:
        cmd = " ".join(p.cmdline())
    except psutil.Error:
        return False
    return any(h in cmd for h in _HOST_HELPERS)


def descendants(pid: int | None = None) -> list[psutil.Process]:
    """Live (non-zombie) descendants of ``pid`` (default: this process)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    return [p for p in children if _alive(p)]


def descendant_pids(pid: int | None = None) -> set[int]:
    return {p.pid for p in descendants(pid)}


def leftovers(baseline: Iterable[int], grace_s: float = 0.5) -> list[psutil.Process]:
    """Descendants that appeared since ``baseline`` and are still alive after ``grace_s``."""
    base = set(baseline)
    deadline = time.monotonic() + grace_s
    while True:
        extra = [p for p in descendants() if p.pid not in base and not _is_host_helper(p)]
        if not extra or time.monotonic() >= deadline:
            return extra
        time.sleep(0.02)


def kill_all(procs: Iterable[psutil.Process], wait_s: float = 2.0) -> None:
    procs = list(procs)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(procs, timeout=wait_s)


def marked(marker: str) -> list[psutil.Process]:
    """Live processes (any parent) whose environment carries ``MARK_ENV=marker``."""
    found = []
    for p in psutil.process_iter():
        if p.pid == os.getpid():
            continue
        try:
            if p.environ().get(MARK_ENV) == marker and _alive(p):
                found.append(p)
        except psutil.Error:
            continue
    return found


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def rss_total(procs: Iterable[psutil.Process]) -> int:
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total
