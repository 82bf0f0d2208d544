"""Log lines of ``toolfork run`` and ``toolfork worker``: ``-v`` / ``--log-level``, and where the lines go.

By default only warnings and errors are logged; ``-v`` adds INFO lines (the pool, the job's end),
``-vv`` DEBUG lines, ``--log-level LEVEL`` names the level outright. The level is toolfork's
(the ``toolfork`` logger and its children); other libraries keep theirs (WARNING).

While a command runs, every log record and every ``warnings.warn`` goes through one handler to one
writer (``run``: ``Progress.log``, which puts the line above the progress bar, never onto its line)::

    toolfork.* loggers (the chosen level) ──┐
    warnings.warn (logging.captureWarnings) ├─> root logger ─> LineHandler ─> write(text)
    other loggers (WARNING and up)        ──┘

The root logger's own handlers that write to stderr or stdout (a tools module's ``basicConfig``) are
set aside meanwhile, their formatter kept; all of it is put back when the command ends. Forked workers
inherit the handler, so a tool's own log lines are whole lines too.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from toolfork.commands._terminal import escape

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMAT = "%(levelname)s %(name)s: %(message)s"


def add_logging_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more log lines on stderr: -v INFO, -vv DEBUG (default: warnings and errors)")
    parser.add_argument("--log-level", type=log_level, default=None, metavar="LEVEL",
                        help=f"toolfork's log level, one of {', '.join(LEVELS)} (wins over -v)")


def log_level(text: str) -> int:
    """``--log-level``'s value: a level name in any case; anything else is a usage error naming the choices."""
    name = text.strip().upper()
    if name not in LEVELS:
        raise argparse.ArgumentTypeError(f"unknown log level {text!r}: choose one of {', '.join(LEVELS)}")
    return int(getattr(logging, name))


def chosen_level(args: argparse.Namespace) -> int:
    level = getattr(args, "log_level", None)
    if level is not None:
        return int(level)
    verbose = getattr(args, "verbose", 0) or 0
    return logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG


class LineHandler(logging.Handler):
    """Each record as one line, handed to ``write`` (which adds the newline), its control characters
    escaped (``_terminal.escape``: a record may quote input, a tool or a worker)."""

    def __init__(self, write: Callable[[str], None]) -> None:
        super().__init__()
        self.write = write

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.write(escape(self.format(record).rstrip("\n")))
        except Exception:
            self.handleError(record)


def _writes_to_terminal_streams(handler: logging.Handler) -> bool:
    stream = getattr(handler, "stream", None)
    return type(handler) is logging.StreamHandler and stream in (sys.stderr, sys.stdout, sys.__stderr__,
                                                                  sys.__stdout__)


@contextmanager
def routed_logs(level: int, write: Callable[[str], None]) -> Iterator[LineHandler]:
    """Log records and warnings go to ``write`` while the block runs, toolfork's from ``level`` up."""
    root = logging.getLogger()
    ours = logging.getLogger("toolfork")
    set_aside = [h for h in root.handlers if _writes_to_terminal_streams(h)]
    handler = LineHandler(write)
    formatter = next((h.formatter for h in set_aside if h.formatter is not None), None)
    handler.setFormatter(formatter or logging.Formatter(FORMAT))
    previous_level = ours.level
    previous_showwarning = warnings.showwarning
    for h in set_aside:
        root.removeHandler(h)
    root.addHandler(handler)
    ours.setLevel(level)
    logging.captureWarnings(True)
    try:
        yield handler
    finally:
        logging.captureWarnings(False)
        warnings.showwarning = previous_showwarning
        ours.setLevel(previous_level)
        root.removeHandler(handler)
        for h in set_aside:
            root.addHandler(h)


__all__ = ["LEVELS", "LineHandler", "add_logging_arguments", "chosen_level", "log_level", "routed_logs"]
