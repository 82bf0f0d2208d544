"""``toolfork run``'s interrupts, as batch users expect them (Celery's warm shutdown, Kubernetes' grace
period): the first Ctrl-C or SIGTERM stops taking lines and lets the calls already taken finish within
their own timeouts, their records written; the second stops at once.

    1st SIGINT/SIGTERM ── handler: exit status 128+N, ``on_first()`` (the input ends: LineSource.stop),
         │                 "finishing N calls; Ctrl-C again to stop now" on stderr (one os.write)
         ▼
    the job runs out of input: the calls it holds finish, their records are written, it ends
         │
    2nd SIGINT/SIGTERM ── handler: both signals ignored from now on, ``KeyboardInterrupt``: the pool
                          closes, the running calls are killed (``--resume`` finds them OutcomeUnknown)

So a warm-stopped job's OUT holds exactly the records an uninterrupted run writes for its first lines,
and ``--resume`` goes on from there as if nothing happened. The handler runs in the main thread
between two bytecodes of whatever it interrupted: it takes no lock and writes its line with one
``os.write`` to descriptor 2, never through ``sys.stderr`` (a buffered write it interrupted would
refuse a second one).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any


class Stop:
    """What the signals did: ``warm`` after the first, ``exit_code`` 130 (SIGINT) or 143 (SIGTERM)."""

    def __init__(self) -> None:
        self.warm = False
        self.exit_code = 0


@contextlib.contextmanager
def warm_stop(on_first: Callable[[], None], running: Callable[[], int]) -> Iterator[Stop]:
    """Within the block, the first SIGINT or SIGTERM calls ``on_first`` and says that ``running()``
    calls are finishing; the second raises ``KeyboardInterrupt`` and both are ignored from then on,
    so a third cannot cut the clean-up short. Outside the main thread, nothing is installed."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    # Started with Ctrl-C ignored (a background job of a shell): keep it so.
    signals = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not signal.SIG_IGN]
    clear = "\r\x1b[K" if os.isatty(2) else ""  # a bar may be drawn on the line

    def handler(signum: int, frame: Any) -> None:
        if stop.warm:
            for s in signals:
                signal.signal(s, signal.SIG_IGN)
            raise KeyboardInterrupt
        stop.warm = True
        stop.exit_code = 128 + signum
        on_first()
        try:
            n = running()
            what = f"{n} call" + ("" if n == 1 else "s")
            os.write(2, f"{clear}toolfork run: finishing {what}; Ctrl-C again to stop now\n".encode())
        except OSError:
            pass

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield stop
    finally:
        if not stop.warm:
            for s, old in previous.items():
                signal.signal(s, old)
        else:  # on its way out with its status: a late signal must not turn that into death by the signal
            for s in signals:
                signal.signal(s, signal.SIG_IGN)


__all__ = ["Stop", "warm_stop"]
