"""Tools for the kill tests: each call records its effect in a ledger, a SQLite file or a PostgreSQL
database (``LEDGER_ENV`` holds the path or the ``postgresql://`` DSN).

``charge`` is not idempotent: every run of it adds a row. ``upsert`` is ``idempotent=True``: it adds a
row only when its ``runtime.idempotency_key`` has none yet, so running it again has no further effect.
``pad`` makes a result that many bytes longer (to fill pipes). While the file named by ``PACE_ENV``
exists, each call first sleeps a millisecond: a kill test keeps its job unfinished until its kills
have landed, however long a loaded machine keeps the test itself from running.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from toolfork.tools import ToolRuntime, tool

LEDGER_ENV = "TOOLFORK_TEST_LEDGER"
PACE_ENV = "TOOLFORK_TEST_PACE"
PACE_S = 0.001
_connections: dict[int, Any] = {}
TABLES = ("CREATE TABLE charges (call_id TEXT NOT NULL, key TEXT NOT NULL)",
          "CREATE TABLE applied (key TEXT PRIMARY KEY, call_id TEXT NOT NULL)")


def _is_postgres(where: str) -> bool:
    return where.startswith("postgresql://")


def create_ledger(where: str) -> None:
    if _is_postgres(where):
        import psycopg

        with psycopg.connect(where, autocommit=True) as conn:
            for table in TABLES:
                conn.execute(table)
        return
    with sqlite3.connect(where) as db:
        db.execute("PRAGMA journal_mode=WAL")
        for table in TABLES:
            db.execute(table)


def read_ledger(where: str, table: str) -> list[str]:
    """The call ids of a ledger table's rows (one per effect)."""
    if _is_postgres(where):
        import psycopg

        with psycopg.connect(where) as conn:
            return [cid for (cid,) in conn.execute(f"SELECT call_id FROM {table}")]
    with sqlite3.connect(where) as db:
        return [cid for (cid,) in db.execute(f"SELECT call_id FROM {table}")]


def _record(sql: str, row: tuple[str | None, str | None]) -> None:
    pace = os.environ.get(PACE_ENV)
    if pace and os.path.exists(pace):
        time.sleep(PACE_S)
    pid = os.getpid()  # a connection never crosses a fork
    db = _connections.get(pid)
    where = os.environ[LEDGER_ENV]
    if db is None:
        if _is_postgres(where):
            import psycopg

            db = psycopg.connect(where, autocommit=True)
        else:
            db = sqlite3.connect(where, timeout=60, isolation_level=None)
            db.execute("PRAGMA synchronous=OFF")
        _connections.clear()
        _connections[pid] = db
    if _is_postgres(where):
        sql = sql.replace("?", "%s").replace("INSERT OR IGNORE", "INSERT")
        sql += " ON CONFLICT DO NOTHING" if "applied" in sql else ""
    db.execute(sql, row)


@tool
def charge(n: int, runtime: ToolRuntime, pad: int = 0) -> str:
    """Record one charge for this call: a side effect that happens again each time the call runs."""
    _record("INSERT INTO charges VALUES (?, ?)", (runtime.call_id, runtime.idempotency_key))
    return f"{n}{'.' * pad}"


@tool(idempotent=True)
def upsert(n: int, runtime: ToolRuntime, pad: int = 0) -> str:
    """Record this call's effect once per idempotency key, however often the call runs."""
    _record("INSERT OR IGNORE INTO applied VALUES (?, ?)", (runtime.idempotency_key, runtime.call_id))
    return f"{n}{'.' * pad}"
