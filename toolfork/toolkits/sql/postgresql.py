"""PostgreSQL toolkit (psycopg 3).

Read-only by construction: the select tool uses its own connection whose session default is READ
ONLY, opens every call with ``BEGIN READ ONLY`` and always ends it with ``ROLLBACK``. PostgreSQL then
refuses any write inside the statement, however it is hidden (a data-modifying CTE, a function that
inserts, ``SET TRANSACTION READ WRITE`` after the first query). The statement always goes through the
extended query protocol, which carries exactly one statement, so ``SELECT 1; COMMIT; DELETE ...``
cannot end the read-only transaction and run a write after it.

Rows are read through a server-side cursor so a huge result never lands in memory; statements a
cursor cannot wrap (SHOW, EXPLAIN) fall back to a plain single-statement execution.

What a read leaves in the session is undone before the next call: the rollback reverts ``SET`` and
``set_config``; session advisory locks (``pg_advisory_lock``), which a rollback keeps, are released
after every call; and after a statement with no result set (``PREPARE``, ``SET``, ``LISTEN``...) the
read connection is replaced, so no later call, and no schema listing, inherits what it set.

Server-side effects outside the database's tables that a superuser can cause from a SELECT
(``COPY ... TO`` a file, ``lo_export``, ``dblink``) are not transactional; give the toolkit a role
without those privileges.
"""

import contextlib
import itertools
import os
from collections.abc import Sequence
from typing import Any

from .base import QueryResult, SQLToolkit, fetch_result
from .connection import ProcessLocalConnection
from .render import Column, ForeignKey, Index, Table

__all__ = ["PostgreSQLToolkit"]

_FK_ACTIONS = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}
_KINDS = {"r": "table", "p": "table", "v": "view", "m": "materialized view", "f": "foreign table"}
_cursor_ids = itertools.count()

_TABLES_SQL = """
SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition
ORDER BY c.relname
"""
_COLUMNS_SQL = """
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = %(schema)s AND c.relname = ANY(%(names)s) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum
"""
_CONSTRAINTS_SQL = """
SELECT rel.relname, con.conname, con.contype,
  ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(attnum, ord)
        JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum ORDER BY k.ord),
  CASE WHEN fn.nspname = n.nspname THEN frel.relname ELSE fn.nspname || '.' || frel.relname END,
  ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY k(attnum, ord)
        JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum ORDER BY k.ord),
  con.confdeltype, con.confupdtype
FROM pg_constraint con
JOIN pg_class rel ON rel.oid = con.conrelid JOIN pg_namespace n ON n.oid = rel.relnamespace
LEFT JOIN pg_class frel ON frel.oid = con.confrelid LEFT JOIN pg_namespace fn ON fn.oid = frel.relnamespace
WHERE n.nspname = %(schema)s AND rel.relname = ANY(%(names)s) AND con.contype IN ('p', 'f')
ORDER BY rel.relname, con.conname
"""
_INDEXES_SQL = """
SELECT t.relname, i.relname, ix.indisunique,
  ARRAY(SELECT pg_get_indexdef(ix.indexrelid, k, true) FROM generate_series(1, ix.indnkeyatts) k ORDER BY k)
FROM pg_index ix
JOIN pg_class i ON i.oid = ix.indexrelid JOIN pg_class t ON t.oid = ix.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = %(schema)s AND t.relname = ANY(%(names)s) AND NOT ix.indisprimary
ORDER BY t.relname, i.relname
"""


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - extra not installed
        raise ImportError("PostgreSQLToolkit needs psycopg 3: pip install 'toolfork[postgres]'") from None
    return psycopg


class PostgreSQLToolkit(SQLToolkit):
    """Tools over one PostgreSQL database, given a libpq DSN (URI or ``key=value`` form).

    Without ``dsn`` it is ``$TOOLFORK_POSTGRES_DSN``, else empty, which lets libpq use its own
    environment (PGHOST, PGUSER, PGPASSWORD, ...). Nothing connects until a tool runs.

    ``schema`` is the schema the schema tool describes; ``statement_timeout_ms`` makes the server
    cancel runaway queries (the executor's timeout still bounds the whole call).
    """

    name = "postgresql"
    dialect = "postgresql"
    label = "PostgreSQL"

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str = "public",
        tables: Sequence[str] | None = None,
        max_rows: int = 100,
        max_cell_chars: int = 1000,
        prefix: str | None = None,
        connect_timeout: int = 10,
        statement_timeout_ms: int | None = None,
        applied_keys_table: str | None = None,
    ) -> None:
        super().__init__(tables=tables, max_rows=max_rows, max_cell_chars=max_cell_chars, prefix=prefix,
                         applied_keys_table=applied_keys_table)
        psycopg = _psycopg()
        if dsn is None:
            dsn = os.environ.get("TOOLFORK_POSTGRES_DSN", "")
        self._dsn = dsn
        self._password = ""
        self.schema = schema
        try:
            params = psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            raise ValueError(f"invalid PostgreSQL DSN: {self.redact(str(exc))}") from None
        self._password = str(params.get("password") or "")
        self.connect_timeout = connect_timeout
        self.statement_timeout_ms = statement_timeout_ms
        self._reader: ProcessLocalConnection[Any] = ProcessLocalConnection(
            lambda: self._connect(read_only=True), lambda c: c.close()
        )
        self._writer: ProcessLocalConnection[Any] = ProcessLocalConnection(
            lambda: self._connect(read_only=False), lambda c: c.close()
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(schema={self.schema!r}, prefix={self.prefix!r})"

    def secrets(self) -> list[str]:
        # libpq also takes the password from PGPASSWORD when the DSN has none.
        return [p for p in (self._password, os.environ.get("PGPASSWORD", "")) if p]

    # ------------------------------------------------------------ connections

    def _connect(self, read_only: bool) -> Any:
        psycopg = _psycopg()
        conn = psycopg.connect(
            self._dsn, autocommit=True, connect_timeout=self.connect_timeout, application_name="toolfork"
        )
        if read_only:
            # Belt and braces: even a transaction we did not open ourselves starts read-only.
            conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        return conn

    def close(self) -> None:
        self._reader.close()
        self._writer.close()

    def _broken(self, exc: BaseException, holder: ProcessLocalConnection[Any], conn: Any) -> None:
        psycopg = _psycopg()
        if (
            not isinstance(exc, psycopg.Error)
            or isinstance(exc, psycopg.OperationalError)
            or getattr(conn, "broken", False)
            or conn.closed
        ):
            holder.discard()

    @staticmethod
    def _execute_single(conn: Any, sql: str, params: dict[str, Any] | None) -> Any:
        """Run one statement through the extended protocol (pipeline mode never uses simple query)."""
        cur = conn.cursor()
        with conn.pipeline() as pipeline:
            cur.execute(sql, params)
            pipeline.sync()
        return cur

    # ------------------------------------------------------------ dialect hooks

    @contextlib.contextmanager
    def _read_only_transaction(self) -> Any:
        with self._reader.connection() as conn:
            try:
                conn.execute("BEGIN READ ONLY")
                if self.statement_timeout_ms:
                    conn.execute(f"SET LOCAL statement_timeout = {int(self.statement_timeout_ms)}")
                yield conn
            except BaseException as exc:
                self._broken(exc, self._reader, conn)
                raise
            finally:
                if not conn.closed and not getattr(conn, "broken", False):
                    try:
                        conn.execute("ROLLBACK")
                        conn.execute("SELECT pg_advisory_unlock_all()")  # session locks outlive a rollback
                    except Exception:
                        self._reader.discard()

    def run_select(self, sql: str, params: dict[str, Any] | None, limit: int) -> QueryResult:
        result = self._select(sql, params, limit)
        if not result.columns:  # not a query: it may have left state in the session (PREPARE, SET...)
            self._reader.discard()
        return result

    def _select(self, sql: str, params: dict[str, Any] | None, limit: int) -> QueryResult:
        psycopg = _psycopg()
        with self._read_only_transaction() as conn:
            conn.execute("SAVEPOINT toolfork_select")
            cursor = conn.cursor(name=f"toolfork_select_{next(_cursor_ids)}")
            try:
                cursor.execute(sql, params)  # DECLARE ... CURSOR FOR <sql>, extended protocol
            except psycopg.Error:
                # Not a cursor-able statement (SHOW, EXPLAIN, ...), or a plain error: run it directly,
                # still inside the read-only transaction, and report that run's outcome.
                with contextlib.suppress(Exception):
                    cursor.close()
                conn.execute("ROLLBACK TO SAVEPOINT toolfork_select")
                return fetch_result(self._execute_single(conn, sql, params), limit, self.max_result_bytes)
            try:
                result = fetch_result(cursor, limit, self.max_result_bytes)
                result.rowcount = None
                return result
            finally:
                with contextlib.suppress(Exception):
                    cursor.close()

    def run_write(self, sql: str, params: dict[str, Any] | None, limit: int,
                  key: str | None = None) -> QueryResult | None:
        with self._writer.connection() as conn:
            try:
                if key is not None:
                    self._create_keys_table(conn)
                with conn.transaction():
                    if key is not None and not self._claim(conn, key):
                        return None
                    return fetch_result(self._execute_single(conn, sql, params), limit, self.max_result_bytes)
            except BaseException as exc:
                self._broken(exc, self._writer, conn)
                raise

    def _create_keys_table(self, conn: Any) -> None:
        """The applied-keys table, created in a transaction of its own (two workers creating it at once:
        the loser's unique violation on the catalog means it is there)."""
        psycopg = _psycopg()
        table = f'"{self.schema}"."{self.applied_keys_table}"'
        try:
            with conn.transaction():
                conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, "
                             "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
            pass

    def _claim(self, conn: Any, key: str) -> bool:
        """Record ``key`` in the applied-keys table, in the caller's transaction; False when it is there
        already. A second call with the same key waits on the first one's row until that commits."""
        table = f'"{self.schema}"."{self.applied_keys_table}"'
        cur = conn.execute(f"INSERT INTO {table} (key) VALUES (%s) ON CONFLICT (key) DO NOTHING", (key,))
        return bool(cur.rowcount)

    def describe_tables(self, names: Sequence[str] | None) -> list[Table]:
        with self._read_only_transaction() as conn:
            listed = conn.execute(_TABLES_SQL, {"schema": self.schema}).fetchall()
            wanted = set(names) if names is not None else None
            tables = {
                name: Table(name=name, kind=_KINDS.get(kind, "table"))
                for name, kind in listed
                if wanted is None or name in wanted
            }
            if not tables:
                return []
            args = {"schema": self.schema, "names": list(tables)}
            for table_name, col, col_type, nullable, default in conn.execute(_COLUMNS_SQL, args):
                tables[table_name].columns.append(Column(name=col, type=col_type, nullable=nullable, default=default))
            for table_name, con_name, con_type, cols, ref_table, ref_cols, on_delete, on_update in conn.execute(
                _CONSTRAINTS_SQL, args
            ):
                if con_type == "p":
                    tables[table_name].primary_key = list(cols)
                else:
                    tables[table_name].foreign_keys.append(
                        ForeignKey(
                            columns=list(cols),
                            ref_table=ref_table,
                            ref_columns=list(ref_cols),
                            on_delete=_FK_ACTIONS.get(on_delete),
                            on_update=_FK_ACTIONS.get(on_update),
                            name=con_name,
                        )
                    )
            for table_name, index_name, unique, cols in conn.execute(_INDEXES_SQL, args):
                tables[table_name].indexes.append(Index(name=index_name, columns=list(cols), unique=unique))
            return list(tables.values())

    def is_read_only_violation(self, exc: BaseException) -> bool:
        return getattr(exc, "sqlstate", None) == "25006"

    def error_text(self, exc: BaseException) -> str:
        psycopg = _psycopg()
        if isinstance(exc, psycopg.Error):
            diag = exc.diag
            text = diag.message_primary or str(exc).strip()
            if isinstance(exc, psycopg.OperationalError) and not exc.sqlstate:
                text = str(exc).strip()  # connection failures carry the useful text in the message
            if diag.message_detail:
                text += f"\nDETAIL: {diag.message_detail}"
            if diag.message_hint:
                text += f"\nHINT: {diag.message_hint}"
            code = f" [{exc.sqlstate}]" if exc.sqlstate else ""
            return f"{type(exc).__name__}{code}: {text}"
        return f"{type(exc).__name__}: {exc}"
