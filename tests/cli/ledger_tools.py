"""Tools for the kill tests: each call records its effect in a SQLite ledger (``LEDGER_ENV`` names it).

``charge`` is not idempotent: every run of it adds a row. ``upsert`` is ``idempotent=True``: it adds a
row only when its ``runtime.idempotency_key`` has none yet, so running it again has no further effect.
``pad`` makes a result that many bytes longer (to fill pipes).
"""

from __future__ import annotations

import os
import sqlite3

from toolfork.tools import ToolRuntime, tool

LEDGER_ENV = "TOOLFORK_TEST_LEDGER"
_connections: dict[int, sqlite3.Connection] = {}


def create_ledger(path: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE charges (call_id TEXT NOT NULL, key TEXT NOT NULL)")
        db.execute("CREATE TABLE applied (key TEXT PRIMARY KEY, call_id TEXT NOT NULL)")


def _ledger() -> sqlite3.Connection:
    pid = os.getpid()  # a connection never crosses a fork
    db = _connections.get(pid)
    if db is None:
        db = sqlite3.connect(os.environ[LEDGER_ENV], timeout=60, isolation_level=None)
        db.execute("PRAGMA synchronous=OFF")
        _connections.clear()
        _connections[pid] = db
    return db


@tool
def charge(n: int, runtime: ToolRuntime, pad: int = 0) -> str:
    """Record one charge for this call: a side effect that happens again each time the call runs."""
    _ledger().execute("INSERT INTO charges VALUES (?, ?)", (runtime.call_id, runtime.idempotency_key))
    return f"{n}{'.' * pad}"


@tool(idempotent=True)
def upsert(n: int, runtime: ToolRuntime, pad: int = 0) -> str:
    """Record this call's effect once per idempotency key, however often the call runs."""
    _ledger().execute("INSERT OR IGNORE INTO applied VALUES (?, ?)", (runtime.idempotency_key, runtime.call_id))
    return f"{n}{'.' * pad}"
