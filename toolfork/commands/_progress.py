"""``run``'s progress report on stderr: a bar redrawn in place on a terminal; plain, periodic lines
otherwise, because a log file or a CI console would fill up with carriage returns and escape codes.

Other lines (the start line, log lines: see ``_logs``) go above the bar, never onto its line::

    Progress.message(text) / .log(text) ──> clear the bar's line, write the text and a newline,
                                            draw the bar again below it (on a terminal)
    Job, LaneJob ──> note / note_ok ──> counts (and the Tally of the final summary) ──> the bar

Writes are whole (one ``write`` a line or a bar) and made under a lock, since log lines come from any
thread; a forked worker that inherited the log handler only clears the line before it writes its own
(the host draws the bar again at its next update).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import IO

from toolfork.commands._summary import Tally
from toolfork.commands._terminal import escape


class Progress:
    """Calls done, rate and failures on stderr: a bar redrawn in place on a terminal, otherwise a plain
    line every ``interval`` seconds while calls finish, and one at the end. ``stream`` None: silent,
    but the counts (``done``, ``failed``) are still kept, since the exit code depends on them."""

    BAR = 24

    def __init__(self, stream: IO[str] | None, total: int | None, interval: float) -> None:
        self.stream = stream
        self.total = total
        self.tty = bool(stream is not None and stream.isatty())
        self.interval = 0.1 if self.tty else interval
        self.start = time.monotonic()
        self.last = self.start
        self.done = self.failed = self.skipped = self.position = 0
        self._ran = 0
        self.tally = Tally()  # the records of this run, by status and error type (the final summary)
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._bar = ""  # the bar last drawn on a terminal, drawn again below a message ("" once final)

    def begin(self) -> None:
        """The job starts now (the rate does not count the pool's start)."""
        self.start = self.last = time.monotonic()

    def note(self, *, failed: bool, lineno: int, ran: bool = True) -> None:
        """A line's record was written; ``ran`` False for records made without running a call (bad
        lines), which must not inflate the rate."""
        self.done += 1
        self.failed += failed
        self._ran += ran
        self._reached(lineno)

    def note_ok(self, count: int, lineno: int) -> None:
        """``count`` calls ran ok and their records were written, the last from line ``lineno``."""
        self.done += count
        self._ran += count
        self.tally.add_ok(count)
        self._reached(lineno)

    def _reached(self, lineno: int) -> None:
        self.position = max(self.position, lineno)
        now = time.monotonic()
        if self.stream is not None and now - self.last >= self.interval:
            self.last = now
            self._show(now, final=False)

    def skip(self, lineno: int) -> None:
        """A line skipped by --resume: it moves the position (and the ETA) but is not done now."""
        self.skipped += 1
        self.position = max(self.position, lineno)

    def message(self, text: str) -> None:
        """A line of its own above the bar (nothing with ``stream`` None)."""
        if self.stream is not None:
            self._line(self.stream, text)

    def log(self, text: str) -> None:
        """A log line: above the bar, or plainly on stderr when the progress report is off (``-q``)."""
        self._line(self.stream if self.stream is not None else sys.stderr, text)

    def _line(self, stream: IO[str], text: str) -> None:
        text = escape(text)  # it may quote input, a tool or a worker: shown, never obeyed by the terminal
        if os.getpid() != self._pid:  # a forked worker: its copy of the bar is stale, and the lock may be too
            stream.write(("\r\x1b[K" if self.tty else "") + text + "\n")
            stream.flush()
            return
        with self._lock:
            stream.write(("\r\x1b[K" if self.tty else "") + text + "\n" + self._bar)
            stream.flush()

    def finish(self, note: str = "") -> None:
        if self.stream is not None:
            self._show(time.monotonic(), final=True, note=note)

    def _show(self, now: float, *, final: bool, note: str = "") -> None:
        assert self.stream is not None
        elapsed = max(now - self.start, 1e-9)
        rate = self._ran / elapsed
        parts = [f"{self.done} done", f"{self.failed} failed"]
        if self.skipped:
            parts.append(f"{self.skipped} skipped (in OUT)")
        parts.append(f"{rate:.1f} calls/s")
        if final:
            parts.append(f"{elapsed:.1f} s")
        elif self.total and rate > 0:
            left = max(self.total - self.position, 0) / rate
            parts.append(f"ETA {int(left) // 60}:{int(left) % 60:02d}")
        text = ", ".join(parts) + (f" ({escape(note)})" if note else "")
        if self.tty:
            bar = ""
            if self.total:
                filled = min(self.BAR, self.BAR * self.position // max(self.total, 1))
                bar = f"[{'#' * filled}{'.' * (self.BAR - filled)}] {100 * self.position // self.total:3d}% "
            line = f"\r\x1b[K{bar}{text}" + ("\n" if final else "")
            self._bar = "" if final else line
        else:
            percent = f"{100 * self.position // self.total}%, " if self.total and not final else ""
            line = f"toolfork run: {percent}{text}\n"
        with self._lock:
            self.stream.write(line)
            self.stream.flush()


__all__ = ["Progress"]
