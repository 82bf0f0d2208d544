"""The kill tests' ledger tools for Ray mode: Ray's workers are started by Ray, not by the ``toolfork run``
host, so they do not see its environment; each call names its SQLite ledger in its arguments instead.

``charge`` is not idempotent (every run of it adds a row); ``upsert`` is ``idempotent=True`` (a row only
for an idempotency key that has none yet).
"""

from __future__ import annotations

import sqlite3

from toolfork.tools import ToolRuntime, tool


def _record(ledger: str, sql: str, row: tuple[str | None, str | None]) -> None:
    with sqlite3.connect(ledger, timeout=60, isolation_level=None) as db:
        db.execute(sql, row)


@tool
def charge(n: int, ledger: str, runtime: ToolRuntime) -> str:
    """Record one charge for this call: a side effect that happens again each time the call runs."""
    _record(ledger, "INSERT INTO charges VALUES (?, ?)", (runtime.call_id, runtime.idempotency_key))
    return str(n)


@tool(idempotent=True)
def upsert(n: int, ledger: str, runtime: ToolRuntime) -> str:
    """Record this call's effect once per idempotency key, however often the call runs."""
    _record(ledger, "INSERT OR IGNORE INTO applied VALUES (?, ?)", (runtime.idempotency_key, runtime.call_id))
    return str(n)
