"""What a warm worker puts back between calls: signal state, timers, and the children that exited.

A worker runs call after call in one process, so what a call changes in the process stays for the
next one unless someone puts it back. Most of it is the tool's own business and is kept on purpose
(module globals, the environment, the working directory: see docs/executor.md). Signal state is not:
the pool stops a call by SIGTERM, so a call that left SIGTERM ignored, blocked or handled by a function
of its own would make the next call's timeout skip its ``finally``; an ``alarm()`` or interval timer a
call armed would go off in the middle of an innocent call after it. And children a call started and
never waited for would stay zombies as long as the worker lives.

What a call changes is known without a system call when it goes through the ``signal`` module's
setters (``signal.signal``, ``alarm``, ``setitimer``, ``pthread_sigmask``, ``set_wakeup_fd``,
``siginterrupt``): they are wrapped in the worker to say so (``touched``). After such a call,
before the next one, the worker:

* disarms every interval timer (``alarm()`` is the real-time one) and the wake-up fd;
* discards the signals that are pending (raised while blocked);
* sets every signal's disposition back to what it was when the worker started (after
  ``on_worker_start``, so what that hook installs is the baseline), and the signal mask.

A setter bound before the fork (``from signal import alarm`` in the host) is not seen by the wrapper,
so whatever the calls did, at the end of each frame of calls (one call, or a chunk of quick calls, see
``fork.pool``), the worker also disarms the real-time timer (before the last result is sent: an alarm
must not go off while the next frame may already be on its way), and after that result is sent puts
back SIGTERM's disposition, the mask and what was left pending (one system call when nothing
changed: the mask). Between the calls of one chunk nothing is looked at for them; other dispositions
and the other timers are put back only after a call that used the wrapped setters.

Exited children are reaped at the end of a frame when ``REAP_EVERY_S`` has passed since the last reap
(a ``waitpid`` that finds no child costs an exception): a zombie waits that long at most, or until the
worker's next call after it.
"""

from __future__ import annotations

import importlib
import os
import signal
import time
from collections.abc import Callable
from typing import Any

_UNCATCHABLE = {signal.SIGKILL, signal.SIGSTOP}
_SIGNALS = tuple(s for s in signal.valid_signals() if s not in _UNCATCHABLE)
_TIMERS = tuple(getattr(signal, name) for name in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF")
                if hasattr(signal, name))
REAP_EVERY_S = 0.05  # exited children are reaped at the end of a frame of calls at most this often
_SETTERS = ("signal", "alarm", "setitimer", "pthread_sigmask", "set_wakeup_fd", "siginterrupt")
# ``signal.getsignal`` wraps the C function to turn SIG_DFL/SIG_IGN into enum members, and for a Python
# handler that costs an exception (measured: 12 us against 1 us for the C function on this loaded
# machine); the C module has been there in every CPython since 3.5, and the wrapper is the fallback.
# ``signal.pthread_sigmask`` likewise turns the C function's set of numbers into a set of enum members
# (a Python call and a generator, each frame of calls): the mask is only ever compared, so the numbers do.
try:
    _raw_getsignal: Callable[[int], Any] = importlib.import_module("_signal").getsignal
    _raw_sigmask: Callable[..., Any] = importlib.import_module("_signal").pthread_sigmask
except (ImportError, AttributeError):
    _raw_getsignal, _raw_sigmask = signal.getsignal, signal.pthread_sigmask


class SignalBaseline:
    """The signal state of a worker when it started, and the means to go back to it."""

    __slots__ = ("_alarm", "_getsignal", "_handlers", "_mask", "_next_reap", "_originals", "_setitimer", "_sigmask",
                 "_signal", "touched")

    def __init__(self) -> None:
        self._signal: Callable[..., Any] = signal.signal
        self._alarm: Callable[[int], int] = signal.alarm
        self._sigmask: Callable[..., Any] = _raw_sigmask
        self._setitimer: Callable[..., Any] = signal.setitimer
        self._getsignal = _raw_getsignal
        handlers: dict[int, Any] = {}
        for sig in _SIGNALS:
            try:
                handler = _raw_getsignal(sig)
            except (OSError, ValueError):
                continue
            if handler is not None:  # None: a handler not installed from Python, which we cannot put back
                handlers[sig] = handler
        self._handlers = handlers
        self._mask = self._sigmask(signal.SIG_BLOCK, [])
        self._originals: dict[str, Any] = {}
        self.touched = False  # a call used one of the signal module's setters since the last reset
        self._next_reap = 0.0  # monotonic time from which the next reset reaps

    def watch_setters(self) -> None:
        """Wrap the ``signal`` module's setters in this process so a call that uses them is known
        (``touched``); they behave as before."""
        for name in _SETTERS:
            original = getattr(signal, name, None)
            if original is None or name in self._originals:
                continue
            self._originals[name] = original
            setattr(signal, name, self._watched(original))

    def _watched(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def watched(*args: Any, **kwargs: Any) -> Any:
            self.touched = True
            return original(*args, **kwargs)

        watched.__name__ = getattr(original, "__name__", "watched")
        watched.__doc__ = original.__doc__
        return watched

    def disarm_alarm(self) -> None:
        """Cancel ``alarm()`` and the real-time interval timer (one system call: on Linux ``alarm(0)``
        disarms an interval timer too, and costs less from Python than ``setitimer``)."""
        self._alarm(0)

    def reset(self) -> None:
        """Put the signal state back and reap exited children (see the module docstring). What no
        setter touched costs one system call to look at (the mask), and a reap every ``REAP_EVERY_S``."""
        touched, self.touched = self.touched, False
        if touched:
            for timer in _TIMERS:
                self._setitimer(timer, 0)
        mask = self._sigmask(signal.SIG_BLOCK, ())
        pending: set[int] = set()
        if mask != self._mask:  # something was blocked: what it left pending is discarded first
            pending = {s for s in signal.sigpending() if s not in _UNCATCHABLE}
            for sig in pending:  # setting SIG_IGN discards a pending signal; its handler is put back below
                self._signal(sig, signal.SIG_IGN)
        # Every disposition is looked at when a setter was used (looking costs a microsecond or more a
        # signal); SIGTERM, by which the pool stops a call, and the pending ones always.
        getsignal, put = self._getsignal, self._signal
        for sig in self._handlers if touched else (*pending, signal.SIGTERM):
            handler = self._handlers.get(sig)
            if handler is not None and (sig in pending or getsignal(sig) != handler):
                try:
                    put(sig, handler)
                except (OSError, ValueError):
                    pass
        if mask != self._mask:
            self._sigmask(signal.SIG_SETMASK, self._mask)
        if touched:
            self._originals.get("set_wakeup_fd", signal.set_wakeup_fd)(-1)
        now = time.monotonic()
        if now >= self._next_reap:
            self._next_reap = now + REAP_EVERY_S
            reap_children()


def reap_children() -> list[tuple[int, int]]:
    """Reap every child of this process that has exited (never waits for one that runs): their pids
    and wait statuses."""
    reaped: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        except InterruptedError:
            continue
        if pid == 0:
            return reaped
        reaped.append((pid, status))


__all__ = ["REAP_EVERY_S", "SignalBaseline", "reap_children"]
