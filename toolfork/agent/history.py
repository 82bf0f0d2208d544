"""Chat histories: where a conversation's messages live between turns and between processes.

The loop only ever appends an assistant turn that asked for tools *together with* the results of
all its calls (one ``extend`` call, one SQLite transaction), so no history ever holds a tool call
without its result, whatever failed in between. Both providers reject such a history.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from pathlib import Path

from toolfork.agent.messages import Message, message_from_dict


class ChatHistory(ABC):
    """Base class: ``messages()`` returns the conversation, ``extend()`` appends atomically."""

    #: True when the messages outlive the process (a paused run's JSON then need not carry them).
    persistent: bool = False

    @abstractmethod
    def messages(self) -> list[Message]:
        ...

    @abstractmethod
    def extend(self, messages: Iterable[Message]) -> None:
        ...

    def replace(self, messages: Iterable[Message]) -> None:
        """Set the whole conversation (used when a paused run is restored into a fresh agent)."""
        self.clear()
        self.extend(messages)

    @abstractmethod
    def clear(self) -> None:
        ...

    def __len__(self) -> int:
        return len(self.messages())


class InMemoryChatHistory(ChatHistory):
    """The default: a list in this process, gone when the agent is."""

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._messages: list[Message] = list(messages)

    def messages(self) -> list[Message]:
        return list(self._messages)

    def extend(self, messages: Iterable[Message]) -> None:
        self._messages.extend(messages)

    def clear(self) -> None:
        self._messages.clear()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS toolfork_messages (
    thread_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
)
"""


class SQLiteChatHistory(ChatHistory):
    """A conversation stored in a SQLite file under ``thread_id``, so it continues in another process.

    Every read goes to the file (no cache): two processes taking turns on one thread both see the
    other's messages. Writes of one ``extend`` are one transaction.
    """

    persistent = True

    def __init__(self, path: str | Path, thread_id: str = "default") -> None:
        if not thread_id:
            raise ValueError("SQLiteChatHistory needs a non-empty thread_id")
        self.path = Path(path)
        self.thread_id = thread_id
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(self._connect()) as conn:
            conn.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 30000")
        return conn

    def messages(self) -> list[Message]:
        conn = self._connect()
        try:
            rows = conn.execute(
                "SELECT message FROM toolfork_messages WHERE thread_id = ? ORDER BY seq",
                (self.thread_id,),
            ).fetchall()
        finally:
            conn.close()
        return [message_from_dict(json.loads(row[0])) for row in rows]

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A connection in a transaction, committed on success and rolled back on any error.

        IMMEDIATE takes the write lock before anything is read, so two processes appending to one
        thread cannot interleave inside a tool call / result pair.
        """
        with self._lock:
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            finally:
                conn.close()

    def _insert(self, conn: sqlite3.Connection, first_seq: int, payload: list[str]) -> None:
        conn.executemany(
            "INSERT INTO toolfork_messages (thread_id, seq, message) VALUES (?, ?, ?)",
            [(self.thread_id, first_seq + i, text) for i, text in enumerate(payload)],
        )

    def extend(self, messages: Iterable[Message]) -> None:
        payload = [json.dumps(m.to_dict()) for m in messages]
        if not payload:
            return
        with self._write() as conn:
            row = conn.execute(
                "SELECT COALESCE(MAX(seq), -1) FROM toolfork_messages WHERE thread_id = ?",
                (self.thread_id,),
            ).fetchone()
            self._insert(conn, int(row[0]) + 1, payload)

    def clear(self) -> None:
        conn = self._connect()
        try:
            conn.execute("DELETE FROM toolfork_messages WHERE thread_id = ?", (self.thread_id,))
        finally:
            conn.close()

    def replace(self, messages: Iterable[Message]) -> None:
        payload = [json.dumps(m.to_dict()) for m in messages]
        with self._write() as conn:
            conn.execute("DELETE FROM toolfork_messages WHERE thread_id = ?", (self.thread_id,))
            self._insert(conn, 0, payload)


__all__ = ["ChatHistory", "InMemoryChatHistory", "SQLiteChatHistory"]
