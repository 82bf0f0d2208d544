"""SQLite toolkit: the embedded default, a database file on disk.

The select tool opens its own connection with ``mode=ro`` (the file is opened read-only by SQLite
itself) and ``PRAGMA query_only``; an authorizer refuses ATTACH (which would open or create other
files, writable ones included, and which ``VACUUM INTO`` uses to write a copy anywhere) and changes to
``query_only``. Connections are opened per call: they are cheap, and per-call connections can never
be shared across a fork or a thread.
"""

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .base import QueryResult, SQLToolkit
from .render import Column, ForeignKey, Index, Table

__all__ = ["SQLiteToolkit"]


class DatabaseMissing(Exception):
    """The select or schema tool was asked to read a database file that does not exist yet."""


def _authorize_read_only(action: int, arg1: Any, arg2: Any, db: Any, trigger: Any) -> int:
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and str(arg1).lower() == "query_only":
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _denied(text: str) -> bool:
    # SQLite says "not authorized"; Python's sqlite3 reports an authorizer refusal as "authorization denied".
    return "not authorized" in text or "authorization denied" in text


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _fetch(cursor: sqlite3.Cursor, limit: int) -> QueryResult:
    columns = [d[0] for d in cursor.description] if cursor.description else []
    rows: list[Sequence[Any]] = []
    truncated = False
    if columns:
        rows = list(cursor.fetchmany(limit + 1))
        truncated = len(rows) > limit
        rows = rows[:limit]
    return QueryResult(columns=columns, rows=rows, truncated=truncated)


class SQLiteToolkit(SQLToolkit):
    """Tools over one SQLite database file; the write tool creates the file if it is missing.

    Without ``path`` the file is ``$TOOLFORK_SQLITE_PATH``, else ``toolfork.db`` in the current
    directory; nothing is created until the write tool runs, so listing the tools touches no file.

    ``foreign_keys`` turns on SQLite's foreign-key enforcement for writes (SQLite leaves it off by
    default, which lets a model insert dangling references silently).
    """

    name = "sqlite"
    dialect = "sqlite"
    label = "SQLite"

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        tables: Sequence[str] | None = None,
        max_rows: int = 100,
        max_cell_chars: int = 1000,
        prefix: str | None = None,
        busy_timeout: float = 5.0,
        foreign_keys: bool = True,
    ) -> None:
        text = os.fspath(path) if path is not None else os.environ.get("TOOLFORK_SQLITE_PATH", "toolfork.db")
        if text in ("", ":memory:") or text.startswith("file::memory:"):
            raise ValueError(
                "SQLiteToolkit needs a database file: an in-memory database cannot be opened a second "
                "time read-only for the select tool"
            )
        super().__init__(tables=tables, max_rows=max_rows, max_cell_chars=max_cell_chars, prefix=prefix)
        self.path = Path(text).expanduser().resolve()
        self.busy_timeout = busy_timeout
        self.foreign_keys = foreign_keys

    # ------------------------------------------------------------ connections

    @contextlib.contextmanager
    def read_connection(self) -> Iterator[sqlite3.Connection]:
        if not self.path.exists():
            raise DatabaseMissing(f"database file {self.path.name} does not exist yet (the write tool creates it)")
        conn = sqlite3.connect(
            self.path.as_uri() + "?mode=ro", uri=True, timeout=self.busy_timeout, isolation_level=None
        )
        try:
            conn.execute("PRAGMA query_only = 1")
            conn.set_authorizer(_authorize_read_only)
            yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def write_connection(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout)
        try:
            if self.foreign_keys:
                conn.execute("PRAGMA foreign_keys = ON")
            yield conn
        finally:
            conn.close()

    # ------------------------------------------------------------ dialect hooks

    def run_select(self, sql: str, params: dict[str, Any] | None, limit: int) -> QueryResult:
        with self.read_connection() as conn:
            cursor = conn.execute(sql, params or {})
            try:
                return _fetch(cursor, limit)
            finally:
                cursor.close()

    def run_write(self, sql: str, params: dict[str, Any] | None, limit: int) -> QueryResult:
        with self.write_connection() as conn:
            try:
                cursor = conn.execute(sql, params or {})
                result = _fetch(cursor, limit)
                # RETURNING rows are produced while stepping; rowcount is final only once stepped out.
                if result.columns:
                    cursor.fetchall()
                result.rowcount = cursor.rowcount
                conn.commit()
                return result
            except BaseException:
                conn.rollback()
                raise

    def describe_tables(self, names: Sequence[str] | None) -> list[Table]:
        with self.read_connection() as conn:
            listed = conn.execute(
                "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
            ).fetchall()
            wanted = set(names) if names is not None else None
            tables = []
            for name, kind in listed:
                if wanted is not None and name not in wanted:
                    continue
                tables.append(self._describe(conn, name, kind))
            return tables

    @staticmethod
    def _describe(conn: sqlite3.Connection, name: str, kind: str) -> Table:
        table = Table(name=name, kind=kind)
        pk: list[tuple[int, str]] = []
        for _cid, col, col_type, notnull, default, pk_pos in conn.execute(f"PRAGMA table_info({_quote(name)})"):
            table.columns.append(
                Column(name=col, type=col_type or "", nullable=not notnull and not pk_pos, default=default)
            )
            if pk_pos:
                pk.append((pk_pos, col))
        table.primary_key = [col for _, col in sorted(pk)]
        groups: dict[int, ForeignKey] = {}
        for fk_id, _seq, ref_table, src, dst, on_update, on_delete, _match in conn.execute(
            f"PRAGMA foreign_key_list({_quote(name)})"
        ):
            fk = groups.setdefault(
                fk_id,
                ForeignKey(columns=[], ref_table=ref_table, ref_columns=[], on_delete=on_delete, on_update=on_update),
            )
            fk.columns.append(src)
            fk.ref_columns.append(dst or "")
        table.foreign_keys = [groups[k] for k in sorted(groups)]
        for _seq, index_name, unique, origin, *_rest in conn.execute(f"PRAGMA index_list({_quote(name)})"):
            if origin == "pk":
                continue
            cols = [row[2] or "<expr>" for row in conn.execute(f"PRAGMA index_info({_quote(index_name)})")]
            table.indexes.append(Index(name=index_name, columns=cols, unique=bool(unique)))
        table.indexes.sort(key=lambda i: i.name)
        return table

    def is_read_only_violation(self, exc: BaseException) -> bool:
        text = str(exc).lower()
        return isinstance(exc, sqlite3.Error) and ("readonly" in text or "read-only" in text or _denied(text))

    def error_text(self, exc: BaseException) -> str:
        if isinstance(exc, DatabaseMissing):
            return str(exc)
        text = str(exc)
        if isinstance(exc, sqlite3.DatabaseError) and _denied(text.lower()):
            text += " (ATTACH, DETACH, VACUUM INTO and PRAGMA query_only are refused by the read-only tool)"
        if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in text:
            text += " Send one statement per call."
        return f"{type(exc).__name__}: {text}"
