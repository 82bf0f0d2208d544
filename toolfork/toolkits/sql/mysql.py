"""MySQL / MariaDB toolkit (PyMySQL).

Read-only by construction: the select tool uses its own connection, sets the session's transaction
mode to READ ONLY before every call (so a previous call's ``SET SESSION TRANSACTION READ WRITE`` does
not carry over), runs the statement inside ``START TRANSACTION READ ONLY`` and always rolls back. The
session setting matters: a DDL statement (DROP, CREATE, RENAME, GRANT) ends the current transaction
with an implicit commit, and only the session mode makes the server refuse it. The connection never
enables multi-statements, so ``SELECT 1; DELETE ...`` is a syntax error, not two statements.

What a read leaves in the session is undone before the next call: user-level locks (``GET_LOCK``),
which a rollback keeps, are released after every call, and after a statement with no result set
(``SET SESSION ...``, ``SELECT ... INTO @v``, ``LOCK TABLES``, ``PREPARE``) the read connection is
replaced, so no later call, and no schema listing, inherits what it set (session variables in MySQL
are not transactional).

Effects outside the tables that an account with the FILE or SUPER privilege can cause from a SELECT
(``SELECT ... INTO OUTFILE``) are not transactional; give the toolkit an account without them.
"""

import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .base import QueryResult, SQLToolkit, fetch_result
from .connection import ProcessLocalConnection
from .render import Column, ForeignKey, Index, Table

__all__ = ["MySQLToolkit", "parse_mysql_dsn"]

_SCHEMES = ("mysql", "mariadb", "mysql+pymysql", "mariadb+pymysql")
_READ_ONLY_TRANSACTION = 1792  # ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
_CONNECTION_LOST = {0, 2006, 2013, 2014, 2055}


class NoDatabase(Exception):
    """The toolkit was built without a database name; reported when a tool runs."""


def _pymysql() -> Any:
    try:
        import pymysql
    except ImportError:  # pragma: no cover - extra not installed
        raise ImportError("MySQLToolkit needs PyMySQL: pip install 'toolfork[mysql]'") from None
    return pymysql


def parse_mysql_dsn(dsn: str) -> dict[str, Any]:
    """``mysql://user:password@host:port/database?unix_socket=/path&charset=utf8mb4`` to connect() kwargs.

    User and password are percent-decoded, so a password containing '@' or '/' must be written
    percent-encoded, as in any URL.
    """
    parts = urlsplit(dsn)
    if parts.scheme.lower() not in _SCHEMES:
        raise ValueError(f"MySQL DSN must start with one of {', '.join(s + '://' for s in _SCHEMES)}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("MySQL DSN has an invalid port") from None
    kwargs: dict[str, Any] = {}
    if parts.hostname:
        kwargs["host"] = unquote(parts.hostname)
    if port:
        kwargs["port"] = port
    if parts.username:
        kwargs["user"] = unquote(parts.username)
    if parts.password is not None:
        kwargs["password"] = unquote(parts.password)
    database = unquote(parts.path.lstrip("/"))
    if database:
        kwargs["database"] = database
    for key, values in parse_qs(parts.query).items():
        value = values[-1]
        if key in ("unix_socket", "charset", "ssl_ca", "ssl_cert", "ssl_key"):
            kwargs[key] = value
        elif key in ("connect_timeout", "read_timeout", "write_timeout"):
            kwargs[key] = int(value)
        else:
            raise ValueError(f"MySQL DSN has an unsupported option {key!r}")
    return kwargs


class MySQLToolkit(SQLToolkit):
    """Tools over one MySQL or MariaDB database.

    Give a DSN (``mysql://user:password@host:3306/db``, default ``$TOOLFORK_MYSQL_DSN``) and/or keyword
    arguments (``host``, ``port``, ``user``, ``password``, ``database``, ``unix_socket``); keywords win
    over the DSN. Nothing connects until a tool runs.
    """

    name = "mysql"
    dialect = "mysql"
    label = "MySQL"

    def __init__(
        self,
        dsn: str | None = None,
        *,
        tables: Sequence[str] | None = None,
        max_rows: int = 100,
        max_cell_chars: int = 1000,
        prefix: str | None = None,
        connect_timeout: int = 10,
        **connect_kwargs: Any,
    ) -> None:
        super().__init__(tables=tables, max_rows=max_rows, max_cell_chars=max_cell_chars, prefix=prefix)
        _pymysql()
        self._settings: dict[str, Any] = {}
        settings: dict[str, Any] = {}
        if dsn is None:
            dsn = os.environ.get("TOOLFORK_MYSQL_DSN")
        if dsn:
            try:
                settings.update(parse_mysql_dsn(dsn))
            except ValueError as exc:
                raise ValueError(self.redact(str(exc))) from None
        settings.update({k: v for k, v in connect_kwargs.items() if v is not None})
        if "client_flag" in settings:
            raise ValueError("client_flag cannot be set: multi-statements must stay disabled")
        settings.setdefault("charset", "utf8mb4")
        settings.setdefault("connect_timeout", connect_timeout)
        self._settings = settings
        self._reader: ProcessLocalConnection[Any] = ProcessLocalConnection(
            lambda: self._connect(autocommit=True), lambda c: c.close()
        )
        self._writer: ProcessLocalConnection[Any] = ProcessLocalConnection(
            lambda: self._connect(autocommit=False), lambda c: c.close()
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(database={self._settings.get('database')!r}, prefix={self.prefix!r})"

    def secrets(self) -> list[str]:
        password = self._settings.get("password")
        return [str(password)] if password else []

    # ------------------------------------------------------------ connections

    def _connect(self, autocommit: bool) -> Any:
        pymysql = _pymysql()
        if not self._settings.get("database"):
            raise NoDatabase(
                "no database configured: give it in the DSN path (mysql://user:pw@host/db), as database=..., "
                "or in TOOLFORK_MYSQL_DSN"
            )
        return pymysql.connect(autocommit=autocommit, local_infile=False, **self._settings)

    def close(self) -> None:
        self._reader.close()
        self._writer.close()

    def _broken(self, exc: BaseException, holder: ProcessLocalConnection[Any], conn: Any) -> None:
        pymysql = _pymysql()
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        if (
            isinstance(exc, (pymysql.err.InterfaceError, pymysql.err.OperationalError))
            and (code in _CONNECTION_LOST or not conn.open)
        ) or not isinstance(exc, pymysql.err.MySQLError):
            holder.discard()

    def _read(self, work: Any) -> Any:
        """Run ``work(cursor)`` in a read-only transaction on the read connection, then roll back.

        A result cut short (at the row cap or the byte budget) is not drained: the rest could be
        gigabytes the server would send for nothing, so the connection is dropped instead.
        """
        pymysql = _pymysql()
        with self._reader.connection() as conn:
            cur = conn.cursor(pymysql.cursors.SSCursor)
            abandon = False
            try:
                cur.execute("SET SESSION TRANSACTION READ ONLY")
                cur.execute("START TRANSACTION READ ONLY")
                result = work(cur)
                abandon = isinstance(result, QueryResult) and result.truncated
                return result
            except BaseException as exc:
                self._broken(exc, self._reader, conn)
                raise
            finally:
                if abandon:
                    self._reader.discard()
                elif conn.open:
                    try:
                        cur.close()  # drains an unbuffered result the caller stopped reading
                        conn.rollback()
                        conn.query("DO RELEASE_ALL_LOCKS()")  # user-level locks outlive a rollback
                    except Exception:
                        self._reader.discard()

    # ------------------------------------------------------------ dialect hooks

    def run_select(self, sql: str, params: dict[str, Any] | None, limit: int) -> QueryResult:
        def work(cur: Any) -> QueryResult:
            cur.execute(sql, params)
            return fetch_result(cur, limit, self.max_result_bytes)

        result: QueryResult = self._read(work)
        if not result.columns:  # not a query: it may have set session state (SET SESSION, LOCK TABLES...)
            self._reader.discard()
        return result

    def run_write(self, sql: str, params: dict[str, Any] | None, limit: int,
                  key: str | None = None) -> QueryResult | None:  # no applied_keys_table here: key is None
        with self._writer.connection() as conn:
            try:
                with conn.cursor() as cur:
                    cur.execute(sql, params)
                    result = fetch_result(cur, limit, self.max_result_bytes)
                conn.commit()
                return result
            except BaseException as exc:
                if conn.open:
                    try:
                        conn.rollback()
                    except Exception:
                        self._writer.discard()
                self._broken(exc, self._writer, conn)
                raise

    def describe_tables(self, names: Sequence[str] | None) -> list[Table]:
        def work(cur: Any) -> list[Table]:
            cur.execute(
                "SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES "
                "WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME"
            )
            wanted = set(names) if names is not None else None
            tables = {
                name: Table(name=name, kind="view" if "VIEW" in str(kind).upper() else "table")
                for name, kind in cur.fetchall()
                if wanted is None or name in wanted
            }
            if not tables:
                return []
            cur.execute(
                "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, COLUMN_KEY, EXTRA "
                "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                "ORDER BY TABLE_NAME, ORDINAL_POSITION"
            )
            for table_name, col, col_type, nullable, default, key, extra in cur.fetchall():
                if table_name not in tables:
                    continue
                if default is not None and str(default).upper() == "NULL":
                    default = None
                tables[table_name].columns.append(
                    Column(
                        name=col,
                        type=str(col_type),
                        nullable=nullable == "YES",
                        default=None if default is None else str(default),
                        primary_key=key == "PRI",
                        extra=str(extra or ""),
                    )
                )
            cur.execute(
                "SELECT k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_NAME, "
                "k.REFERENCED_COLUMN_NAME, r.DELETE_RULE, r.UPDATE_RULE "
                "FROM information_schema.KEY_COLUMN_USAGE k "
                "JOIN information_schema.REFERENTIAL_CONSTRAINTS r ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA "
                "AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME "
                "WHERE k.TABLE_SCHEMA = DATABASE() AND k.REFERENCED_TABLE_NAME IS NOT NULL "
                "ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION"
            )
            fks: dict[tuple[str, str], ForeignKey] = {}
            for table_name, con_name, col, ref_table, ref_col, on_delete, on_update in cur.fetchall():
                if table_name not in tables:
                    continue
                fk = fks.get((table_name, con_name))
                if fk is None:
                    fk = ForeignKey(
                        columns=[],
                        ref_table=ref_table,
                        ref_columns=[],
                        on_delete=on_delete,
                        on_update=on_update,
                        name=con_name,
                    )
                    fks[(table_name, con_name)] = fk
                    tables[table_name].foreign_keys.append(fk)
                fk.columns.append(col)
                fk.ref_columns.append(ref_col)
            cur.execute(
                "SELECT TABLE_NAME, INDEX_NAME, NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS "
                "WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX"
            )
            indexes: dict[tuple[str, str], Index] = {}
            for table_name, index_name, non_unique, col in cur.fetchall():
                if table_name not in tables:
                    continue
                if index_name == "PRIMARY":
                    tables[table_name].primary_key.append(col)
                    continue
                idx = indexes.get((table_name, index_name))
                if idx is None:
                    idx = Index(name=index_name, columns=[], unique=not int(non_unique))
                    indexes[(table_name, index_name)] = idx
                    tables[table_name].indexes.append(idx)
                idx.columns.append(col or "<expr>")
            return list(tables.values())

        return self._read(work)  # type: ignore[no-any-return]

    def is_read_only_violation(self, exc: BaseException) -> bool:
        return bool(exc.args) and exc.args[0] == _READ_ONLY_TRANSACTION

    def error_text(self, exc: BaseException) -> str:
        pymysql = _pymysql()
        if isinstance(exc, pymysql.err.MySQLError) and len(exc.args) >= 2:
            text = f"{type(exc).__name__} ({exc.args[0]}): {exc.args[1]}"
            if "syntax" in str(exc.args[1]).lower() and ";" in str(exc.args[1]):
                text += "\nSend one statement per call."
            return text
        return f"{type(exc).__name__}: {exc}"
