"""SQLite toolkit: the embedded default, a database file on disk.

The select tool opens its own connection with ``mode=ro`` (the file is opened read-only by SQLite
itself) and ``PRAGMA query_only``; an authorizer refuses ATTACH (which would open or create other
files, writable ones included, and which ``VACUUM INTO`` uses to write a copy anywhere) and every
pragma that is not a read, so no statement can change process-wide state such as the heap limit.
Every connection caps the size of a value and the time of a statement (``sqlite_limits``).
Connections are opened per call: they are cheap, and per-call connections can never be shared
across a fork or a thread.
"""

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .base import QueryResult, SQLToolkit, fetch_result
from .render import Column, ForeignKey, Index, Table
from .sqlite_limits import authorize_read_only, authorize_write, bound

__all__ = ["SQLiteToolkit"]


class DatabaseMissing(Exception):
    """The select or schema tool was asked to read a database file that does not exist yet."""


def _denied(text: str) -> bool:
    # SQLite says "not authorized"; Python's sqlite3 reports an authorizer refusal as "authorization denied".
    return "not authorized" in text or "authorization denied" in text


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class SQLiteToolkit(SQLToolkit):
    """Tools over one SQLite database file; the write tool creates the file if it is missing.

    Without ``path`` the file is ``$TOOLFORK_SQLITE_PATH``, else ``toolfork.db`` in the current
    directory; nothing is created until the write tool runs, so listing the tools touches no file.

    ``foreign_keys`` turns on SQLite's foreign-key enforcement for writes (SQLite leaves it off by
    default, which lets a model insert dangling references silently).

    ``max_value_bytes`` caps any one string or blob a statement builds or reads (SQLite's
    ``SQLITE_LIMIT_LENGTH``); ``query_timeout`` stops a statement, the write tool's too, that runs
    longer (None: no limit).
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
        max_value_bytes: int = 10_000_000,
        query_timeout: float | None = 30.0,
        applied_keys_table: str | None = None,
    ) -> None:
        text = os.fspath(path) if path is not None else os.environ.get("TOOLFORK_SQLITE_PATH", "toolfork.db")
        if text in ("", ":memory:") or text.startswith("file::memory:"):
            raise ValueError(
                "SQLiteToolkit needs a database file: an in-memory database cannot be opened a second "
                "time read-only for the select tool"
            )
        super().__init__(tables=tables, max_rows=max_rows, max_cell_chars=max_cell_chars, prefix=prefix,
                         applied_keys_table=applied_keys_table)
        self.path = Path(text).expanduser().resolve()
        if not 1 <= max_value_bytes <= 1_000_000_000:
            raise ValueError("max_value_bytes must be between 1 and 1000000000")
        if query_timeout is not None and query_timeout <= 0:
            raise ValueError("query_timeout must be positive (or None for no limit)")
        self.busy_timeout = busy_timeout
        self.foreign_keys = foreign_keys
        self.max_value_bytes = max_value_bytes
        self.query_timeout = query_timeout

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
            conn.set_authorizer(authorize_read_only)
            bound(conn, self.max_value_bytes, self.query_timeout)
            yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def write_connection(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout)
        try:
            if self.foreign_keys:
                conn.execute("PRAGMA foreign_keys = ON")
            conn.set_authorizer(authorize_write)
            bound(conn, self.max_value_bytes, self.query_timeout)
            yield conn
        finally:
            conn.close()

    # ------------------------------------------------------------ dialect hooks

    def run_select(self, sql: str, params: dict[str, Any] | None, limit: int) -> QueryResult:
        with self.read_connection() as conn:
            cursor = conn.execute(sql, params or {})
            try:
                return fetch_result(cursor, limit, self.max_result_bytes)
            finally:
                cursor.close()

    def run_write(self, sql: str, params: dict[str, Any] | None, limit: int,
                  key: str | None = None) -> QueryResult | None:
        with self.write_connection() as conn:
            try:
                if key is not None:
                    table = _quote(str(self.applied_keys_table))
                    conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, "
                                 "applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)")
                    conn.execute("BEGIN IMMEDIATE")  # the key and the statement: one transaction
                    if conn.execute(f"INSERT OR IGNORE INTO {table} (key) VALUES (?)", (key,)).rowcount == 0:
                        conn.rollback()
                        return None
                cursor = conn.execute(sql, params or {})
                result = fetch_result(cursor, limit, self.max_result_bytes)
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
            text += (
                " (ATTACH, DETACH, VACUUM INTO and pragmas that set anything are refused by the read-only tool; "
                "the write tool refuses PRAGMA hard_heap_limit and soft_heap_limit, which are process-wide)"
            )
        if isinstance(exc, sqlite3.OperationalError) and text == "interrupted" and self.query_timeout is not None:
            text += f": the statement ran longer than query_timeout ({self.query_timeout:g} s) and was stopped"
        if isinstance(exc, sqlite3.OperationalError) and text == "user-defined function raised exception":
            # The only functions defined on these connections are the checked printf and format.
            text += f": printf and format refuse a width or precision over max_value_bytes ({self.max_value_bytes})"
        if isinstance(exc, sqlite3.DataError | sqlite3.OperationalError) and "too big" in text:
            text += f": one value may be at most max_value_bytes ({self.max_value_bytes} bytes)"
        # "You can only execute one statement at a time": a Warning up to Python 3.10, then a ProgrammingError.
        if isinstance(exc, (sqlite3.ProgrammingError, sqlite3.Warning)) and "one statement" in text:
            text += " Send one statement per call."
        return f"{type(exc).__name__}: {text}"
