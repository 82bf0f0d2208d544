"""The SQL write tool with ``applied_keys_table``: a statement applied once per idempotency key.

A batch runs through an Executor with a journal; the journal is then made to look like the batch was
killed while its writes ran (their results gone), and the batch is run again. The write tool is
idempotent with a keys table, so it runs again: the rows are there once, the second answer says the
key was applied already. Without the table the tool is not idempotent and the resumed batch reports
``OutcomeUnknown``. SQLite always; PostgreSQL with the suite's server.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolfork.executor import OUTCOME_UNKNOWN, Executor, Journal
from toolfork.toolkits.sql import SQLiteToolkit


def _calls(prefix: str) -> list[dict[str, Any]]:
    return [{"id": f"w{i}", "name": f"{prefix}_write",
             "arguments": {"query": "INSERT INTO payments (note) VALUES (:note)",
                           "parameters": [{"name": "note", "value": f"pay {i}"}]}} for i in range(3)]


def _killed_midway(journal: Path) -> None:
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(line for line in lines if '"finished"' not in line))


def _resumed_twice(kit: Any, prefix: str, tmp_path: Path, rows: Callable[[], list[str]]) -> list[Any]:
    path = tmp_path / "batch.journal"
    with Executor(kit, workers=2) as ex:
        with Journal(path) as journal:
            first = ex.run(_calls(prefix), journal=journal)
        assert [r.status for r in first] == ["ok"] * 3, first
        assert not any(r.output.is_error for r in first if r.output), [r.output for r in first]
        assert rows() == ["pay 0", "pay 1", "pay 2"]
        _killed_midway(path)
        with Journal(path) as journal:
            return ex.run(_calls(prefix), journal=journal)


def _sqlite_rows(db: Path) -> Callable[[], list[str]]:
    def rows() -> list[str]:
        with sqlite3.connect(db) as conn:
            return sorted(note for (note,) in conn.execute("SELECT note FROM payments"))
    return rows


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Path:
    db = tmp_path / "pay.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE payments (id INTEGER PRIMARY KEY, note TEXT)")
    return db


def test_sqlite_write_is_applied_once_per_key(sqlite_db: Path, tmp_path: Path) -> None:
    kit = SQLiteToolkit(sqlite_db, applied_keys_table="applied_keys")
    again = _resumed_twice(kit, "sqlite", tmp_path, _sqlite_rows(sqlite_db))
    assert [r.status for r in again] == ["ok"] * 3
    assert all("already applied" in r.output.as_text() for r in again if r.output)
    assert _sqlite_rows(sqlite_db)() == ["pay 0", "pay 1", "pay 2"]
    with sqlite3.connect(sqlite_db) as conn:
        assert conn.execute("SELECT count(*) FROM applied_keys").fetchone() == (3,)


def test_sqlite_write_without_the_table_is_outcome_unknown(sqlite_db: Path, tmp_path: Path) -> None:
    again = _resumed_twice(SQLiteToolkit(sqlite_db), "sqlite", tmp_path, _sqlite_rows(sqlite_db))
    assert {r.error.type for r in again if r.error} == {OUTCOME_UNKNOWN}
    assert _sqlite_rows(sqlite_db)() == ["pay 0", "pay 1", "pay 2"]


def test_a_failed_statement_leaves_its_key_unapplied(sqlite_db: Path) -> None:
    kit = SQLiteToolkit(sqlite_db, applied_keys_table="applied_keys")
    bad = {"id": "b", "name": "sqlite_write", "arguments": {"query": "INSERT INTO nowhere VALUES (1)"}}
    with Executor(kit, workers=2) as ex:
        assert "no such table" in (ex.run([bad])[0].output.as_text())
    with sqlite3.connect(sqlite_db) as conn:
        assert conn.execute("SELECT count(*) FROM applied_keys").fetchone() == (0,)


def test_the_table_name_must_be_an_identifier(sqlite_db: Path) -> None:
    with pytest.raises(ValueError, match="applied_keys_table"):
        SQLiteToolkit(sqlite_db, applied_keys_table="keys; DROP TABLE payments")


@pytest.mark.postgres
@pytest.mark.xdist_group("postgresql")
def test_postgresql_write_is_applied_once_per_key(pg_server: Any, pg_db: str, tmp_path: Path) -> None:
    import psycopg

    from toolfork.toolkits.sql import PostgreSQLToolkit

    dsn = pg_server.dsn(pg_db)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE payments (id serial PRIMARY KEY, note text)")

    def rows() -> list[str]:
        with psycopg.connect(dsn) as conn:
            return sorted(note for (note,) in conn.execute("SELECT note FROM payments"))

    again = _resumed_twice(PostgreSQLToolkit(dsn, applied_keys_table="applied_keys"), "postgresql", tmp_path, rows)
    assert [r.status for r in again] == ["ok"] * 3
    assert all("already applied" in r.output.as_text() for r in again if r.output)
    assert rows() == ["pay 0", "pay 1", "pay 2"]
