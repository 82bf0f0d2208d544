"""Threads an ``os.register_at_fork`` hook restarts in every forked child: parked in the template,
stopped in a sandboxed one-shot.

Why: a sandbox is entered by one thread (``unshare(CLONE_NEWUSER)`` refuses a process that runs more,
and a Landlock domain binds only the calling thread), so a one-shot for a sandboxed call must run one
thread. A library that restarts its background thread after every fork puts one in the template and in
each worker it forks. OpenTelemetry's batch processors do (``BatchSpanProcessor``,
``BatchLogRecordProcessor``: an exporter thread per processor), and so does its periodic metric reader
(``PeriodicExportingMetricReader``: a ticker that would export the child's copy of the host's metrics).
Their thread can be stopped cleanly: the processor's own shutdown flag, a wake-up, a join; the queue it
would drain is empty (the SDK's at-fork hook clears the child's copy), so nothing is exported twice.

    host ── fork ──> template: park()   each such thread stopped and joined; the span processors are kept
                       │                (not shut down), so warm workers' hooks restart working threads;
                       │                a metric reader is stopped for good, and so in every worker
                       └── fork ──> sandboxed one-shot: sandbox.enter() calls stop(): the hook's fresh
                                    thread is stopped and joined for good (spans emitted in the sandbox
                                    are dropped), then the sandbox is entered with one thread

A thread of any other kind stays: the sandbox then refuses, naming the threads.
"""

from __future__ import annotations

import threading
from typing import Any

from .verdict import thread_count

JOIN_S = 5.0  # a parked thread only has to wake up and leave its loop: seconds are load margin

def _owner(thread: threading.Thread) -> Any:
    """The stoppable object whose loop ``thread`` runs, or None."""
    owner = getattr(getattr(thread, "_target", None), "__self__", None)
    if owner is None or not type(owner).__module__.startswith("opentelemetry.sdk"):
        return None
    if hasattr(owner, "_worker_awaken") and hasattr(owner, "_shutdown"):  # SDK >= 1.33: BatchProcessor
        return owner
    if hasattr(owner, "condition") and hasattr(owner, "done"):  # older BatchSpanProcessor
        return owner
    if hasattr(owner, "_shutdown_event") and hasattr(owner, "_ticker"):  # PeriodicExportingMetricReader
        return owner
    return None


def _no_collect(*args: Any, **kwargs: Any) -> None:
    pass


def _halt(owner: Any, stopped: bool) -> None:
    """Stop ``owner``'s thread and join it; ``stopped`` is its shutdown flag afterwards."""
    if hasattr(owner, "_ticker"):
        # A periodic metric reader is stopped for good in any child, silently: its copy of the host's
        # meters (the host's Executors' counts, as they were at the fork) is not this process's to
        # export. Its last collection, on the way out of its loop, does nothing; the children forked
        # later inherit the stop (their at-fork hook's thread leaves at once).
        owner.collect = _no_collect
        owner._shutdown_event.set()
        thread = getattr(owner, "_daemon_thread", None)
        if isinstance(thread, threading.Thread) and thread.is_alive() and thread is not threading.current_thread():
            thread.join(JOIN_S)
        return
    thread = getattr(owner, "_worker_thread", None) or getattr(owner, "worker_thread", None)
    if hasattr(owner, "_worker_awaken"):
        owner._shutdown = True
        owner._worker_awaken.set()
    else:
        with owner.condition:
            owner.done = True
            owner.condition.notify_all()
    if isinstance(thread, threading.Thread) and thread.is_alive() and thread is not threading.current_thread():
        thread.join(JOIN_S)
    if hasattr(owner, "_worker_awaken"):
        owner._shutdown = stopped
        owner._worker_awaken.clear()
    else:
        owner.done = stopped


def _each_owner() -> list[Any]:
    current = threading.current_thread()
    return [owner for thread in threading.enumerate()
            if thread is not current and (owner := _owner(thread)) is not None]


def park() -> None:
    """In the template, right after its fork: stop each at-fork-restarted thread this module knows,
    keeping its processor usable (a child's at-fork hook starts it a new thread)."""
    for owner in _each_owner():
        _halt(owner, stopped=False)


def stop() -> None:
    """In a process about to enter a sandbox (a child just forked): stop those threads for good, and
    wait until the kernel has ended them too (a join returns a moment before the thread is gone:
    ``thread_count`` waits that out)."""
    owners = _each_owner()
    for owner in owners:
        _halt(owner, stopped=True)
    if owners:
        thread_count(settle_s=JOIN_S)


__all__ = ["park", "stop"]
