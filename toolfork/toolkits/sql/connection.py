"""One database connection per process, never shared across fork.

The executor forks worker processes. A connection opened in the parent is a socket with protocol
state; if a child used it too, parent and child would interleave messages on one session and corrupt
both. So the holder remembers the pid that opened the connection and, in any other process, opens a
fresh one. The inherited object is parked, not closed: closing it politely would send a goodbye
message on the shared socket and end the parent's session.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

C = TypeVar("C")

# Connections inherited from a parent process: kept referenced so no finaliser ever touches them.
_INHERITED: list[object] = []


class ProcessLocalConnection(Generic[C]):
    """Lazily opened connection, reopened after fork or after it was discarded; calls are serialised."""

    def __init__(self, connect: Callable[[], C], close: Callable[[C], None]) -> None:
        self._connect = connect
        self._close = close
        self._conn: C | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self.opened = 0  # connections opened by this holder in this process (tests read it)

    def _adopt_process(self) -> None:
        if self._pid != os.getpid():
            # A lock held by another thread at fork time would stay held forever in the child.
            self._lock = threading.Lock()
            if self._conn is not None:
                _INHERITED.append(self._conn)
            self._conn = None
            self._pid = os.getpid()
            self.opened = 0

    @contextlib.contextmanager
    def connection(self) -> Iterator[C]:
        """The process's connection, held exclusively for the block."""
        self._adopt_process()
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()
                self.opened += 1
            yield self._conn

    def discard(self) -> None:
        """Drop the connection after an error that may have broken it; the next call reconnects."""
        self._adopt_process()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                self._close(conn)

    def close(self) -> None:
        self.discard()
