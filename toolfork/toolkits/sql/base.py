"""The three SQL tools every dialect shares: schema, select (read-only) and write.

A dialect subclass supplies introspection and execution; this module owns the tool definitions,
parameter binding, row capping, rendering and error handling, so the three databases behave the same
to a model. Read-only-ness of the select tool is the dialect's job and is enforced by the database
(read-only transaction or connection), never by inspecting the SQL text.

Exactly once: with ``applied_keys_table="..."`` (SQLite and PostgreSQL) the write tool records each
call's ``runtime.idempotency_key`` in that table in the same transaction as its statement, and a call
whose key is there already is not run again; the tool is then ``idempotent=True``, so a resumed job
runs it again instead of reporting ``OutcomeUnknown`` (see docs/cli-run.md, "Exactly once").

Credentials: subclasses report their secrets (the password), and every error text passes through
``redact`` before a model or a log can see it.
"""

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

from toolfork.tools import Tool, Toolkit, ToolOutput, ToolRuntime, tool

from .params import Dialect, ParameterError, bind
from .render import Table, json_value, rows_markdown, schema_markdown

__all__ = ["MAX_RESULT_BYTES", "QueryResult", "SQLParameter", "SQLToolkit", "Scalar", "as_mapping", "fetch_result"]

Scalar = str | int | float | bool | None

_PASSWORD_KV = re.compile(r"(?i)(password|passwd|pwd)(\s*[=:]\s*)('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^\s;,&]+)")
_URL_USERINFO = re.compile(r"(?i)([a-z][a-z0-9+.\-]*://[^:/@\s]*:)[^@\s]*@")
_MAX_ROWS_LIMIT = 10_000
MAX_RESULT_BYTES = 50_000_000  # the most string and byte data one call fetches from the database
_FETCH_BATCH = 100


# The tools take a list of {name, value} pairs rather than a free-form object because OpenAI's strict
# function calling cannot express an object with arbitrary keys. The docstring below is model-facing.
class SQLParameter(BaseModel):
    """The value for one :name placeholder in the SQL."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="placeholder name without the colon, e.g. id for :id")
    value: Scalar = Field(description="the value: string, number, boolean or null")


def as_mapping(parameters: Sequence[SQLParameter | Mapping[str, Any]] | Mapping[str, Any] | None) -> dict[str, Any]:
    """The tools' ``[{"name": "id", "value": 1}]`` as ``{"id": 1}`` (a dict passes through as is)."""
    if parameters is None:
        return {}
    if isinstance(parameters, Mapping):
        return dict(parameters)
    out: dict[str, Any] = {}
    for item in parameters:
        name, value = (item.name, item.value) if isinstance(item, SQLParameter) else (item["name"], item["value"])
        name = name[1:] if name.startswith(":") else name
        if name in out:
            raise ParameterError(f"parameter {name!r} is given twice")
        out[name] = value
    return out


@dataclass
class QueryResult:
    """Raw outcome of one statement; values are converted to JSON-safe ones by the toolkit."""

    columns: list[str] = field(default_factory=list)
    rows: list[Sequence[Any]] = field(default_factory=list)
    truncated: bool = False
    rowcount: int | None = None
    cut_at_bytes: int | None = None  # set when the rows stopped at the byte budget, not at the row cap


def _row_bytes(row: Sequence[Any]) -> int:
    return sum(len(v) if isinstance(v, (str, bytes, bytearray, memoryview)) else 8 for v in row)


def fetch_result(cursor: Any, limit: int, max_bytes: int = MAX_RESULT_BYTES) -> QueryResult:
    """At most ``limit`` rows of a DB-API cursor's result (one more is fetched to tell whether it was
    cut), and no more rows once they hold ``max_bytes`` of strings and bytes: rows come in small
    batches, so a result of many large rows never lands in memory whole."""
    if cursor.description is None:
        return QueryResult(rowcount=cursor.rowcount)
    rows: list[Sequence[Any]] = []
    held = 0
    cut = False
    while len(rows) <= limit and not cut:
        # One row first; then as many as the budget left would hold at the average size so far.
        fits = (max_bytes - held) // max(1, held // len(rows)) + 1 if rows else 1
        batch = cursor.fetchmany(max(1, min(_FETCH_BATCH, fits, limit + 1 - len(rows))))
        if not batch:
            break
        for row in batch:
            held += _row_bytes(row)
            if held > max_bytes and rows:
                cut = True
                break
            rows.append(row)
    return QueryResult(
        columns=[d[0] for d in cursor.description],
        rows=rows[:limit],
        truncated=cut or len(rows) > limit,
        rowcount=cursor.rowcount,
        cut_at_bytes=max_bytes if cut else None,
    )


class SQLToolkit(Toolkit, ABC):
    """Base of the SQLite, PostgreSQL and MySQL toolkits.

    ``tables`` limits what the schema tool shows (an allow-list of table names); ``max_rows`` is the
    default cap on rows returned by select (the model may ask for up to 10 000); ``prefix`` names the
    tools (``{prefix}_schema``, ``{prefix}_select``, ``{prefix}_write``) so two databases of one
    dialect can sit in one agent.
    """

    dialect: ClassVar[Dialect]
    label: ClassVar[str]
    max_result_bytes: int = MAX_RESULT_BYTES  # the byte budget of one call's rows (an instance may lower it)

    def __init__(
        self,
        *,
        tables: Sequence[str] | None = None,
        max_rows: int = 100,
        max_cell_chars: int = 1000,
        prefix: str | None = None,
        applied_keys_table: str | None = None,
    ) -> None:
        super().__init__()
        if not 1 <= max_rows <= _MAX_ROWS_LIMIT:
            raise ValueError(f"max_rows must be between 1 and {_MAX_ROWS_LIMIT}")
        if isinstance(tables, str):
            raise ValueError("tables must be a list of table names, not a string")
        self.allowed_tables: list[str] | None = list(tables) if tables is not None else None
        self.max_rows = max_rows
        self.max_cell_chars = max_cell_chars
        self.prefix = prefix or self.dialect
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.prefix):
            raise ValueError(f"prefix {self.prefix!r} must be a valid identifier")
        if applied_keys_table is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", applied_keys_table):
            raise ValueError(f"applied_keys_table {applied_keys_table!r} must be a valid identifier")
        # Where the write tool records the idempotency keys of the calls it applied (None: it does not).
        self.applied_keys_table = applied_keys_table

    # ------------------------------------------------------------ dialect hooks

    @abstractmethod
    def describe_tables(self, names: Sequence[str] | None) -> list[Table]:
        """Tables and views (all, or those named), with columns, keys and indexes."""
        ...

    @abstractmethod
    def run_select(self, sql: str, params: dict[str, Any] | None, limit: int) -> QueryResult:
        """Run one statement with no way to change data; fetch at most ``limit`` rows (+1 to detect more)."""
        ...

    @abstractmethod
    def run_write(self, sql: str, params: dict[str, Any] | None, limit: int,
                  key: str | None = None) -> QueryResult | None:
        """Run one statement and commit it. With ``key``: in one transaction with recording ``key`` in
        ``applied_keys_table``; None (nothing run) when the key is there already."""
        ...

    def secrets(self) -> list[str]:
        """Strings that must never appear in an output (passwords)."""
        return []

    def is_read_only_violation(self, exc: BaseException) -> bool:
        return False

    def error_text(self, exc: BaseException) -> str:
        return str(exc)

    def close(self) -> None:
        """Close this process's connections (also happens at process exit)."""

    # ------------------------------------------------------------ shared behaviour

    @property
    def tool_names(self) -> dict[str, str]:
        return {kind: f"{self.prefix}_{kind}" for kind in ("schema", "select", "write")}

    def redact(self, text: str) -> str:
        for secret in sorted(self.secrets(), key=len, reverse=True):
            if secret:
                for form in {secret, quote(secret, safe=""), quote(secret)}:
                    text = text.replace(form, "***")
        text = _PASSWORD_KV.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)
        return _URL_USERINFO.sub(lambda m: f"{m.group(1)}***@", text)

    def failure(self, exc: BaseException, kind: str) -> ToolOutput:
        if isinstance(exc, ParameterError):
            return ToolOutput.error(f"parameter error: {exc}")
        message = f"{self.label} error: {self.error_text(exc)}"
        if kind == "select" and self.is_read_only_violation(exc):
            message += (
                f"\nThe {self.tool_names['select']} tool is read-only; use {self.tool_names['write']} to change data."
            )
        return ToolOutput.error(self.redact(message))

    def guidelines(self) -> str:
        names = self.tool_names
        return (
            f"{self.label} database: call {names['schema']} first to learn the tables. Use "
            f"{names['select']} for reading (it is read-only and returns at most max_rows rows) and "
            f"{names['write']} to change data. One statement per call. Pass values as named parameters: "
            'write :name in the SQL and give [{"name": "name", "value": ...}] in parameters; never paste values '
            "into the SQL text."
        )

    def _check_limit(self, max_rows: int | None) -> int:
        limit = self.max_rows if max_rows is None else max_rows
        if not 1 <= limit <= _MAX_ROWS_LIMIT:
            raise ParameterError(f"max_rows must be between 1 and {_MAX_ROWS_LIMIT}, got {limit}")
        return limit

    def _result_output(self, result: QueryResult, limit: int, prefix: str) -> ToolOutput:
        rows = [[json_value(v, self.max_cell_chars) for v in row] for row in result.rows[:limit]]
        truncated = result.truncated or len(result.rows) > limit
        parts = [prefix] if prefix else []
        if result.columns:
            parts.append(rows_markdown(result.columns, rows))
            if result.cut_at_bytes is not None:
                parts.append(
                    f"Showing the first {len(rows)} rows: with more the result would pass "
                    f"{result.cut_at_bytes} bytes of data. Select fewer or smaller columns, or fewer rows."
                )
            elif truncated:
                parts.append(
                    f"Showing the first {limit} rows; the query returned more. Narrow it with WHERE/LIMIT "
                    "or pass a larger max_rows."
                )
            else:
                parts.append(f"{len(rows)} row{'s' if len(rows) != 1 else ''}.")
        elif not prefix:
            parts.append("The statement ran and returned no result set.")
        out = ToolOutput.text("\n\n".join(parts))
        out.data = {
            "columns": list(result.columns),
            "rows": rows,
            "row_count": len(rows),
            "truncated": truncated,
        }
        if result.rowcount is not None:
            out.data["rows_affected"] = result.rowcount
        return out

    def _schema(self, tables: list[str] | None) -> ToolOutput:
        allowed = self.allowed_tables
        if tables:
            if allowed is not None:
                refused = [t for t in tables if t not in allowed]
                if refused:
                    return ToolOutput.error(
                        f"table(s) {', '.join(refused)} are not available; available tables: "
                        f"{', '.join(allowed) or '(none)'}"
                    )
            names: list[str] | None = list(tables)
        else:
            names = allowed
        found = self.describe_tables(names)
        missing = [n for n in (names or []) if n not in {t.name for t in found}]
        if tables and not found:
            everything = [t.name for t in self.describe_tables(allowed)]
            return ToolOutput.error(
                f"table(s) {', '.join(missing)} not found; available tables: {', '.join(everything) or '(none)'}"
            )
        title = f"{self.label} schema"
        return ToolOutput.text(schema_markdown(title, found, missing if tables else ()))

    def provide(self) -> list[Tool]:
        kit = self
        names = self.tool_names

        @tool(
            names["schema"],
            description=(
                f"Describe the {self.label} database: tables, columns and types, primary keys, foreign "
                "keys and indexes, as Markdown."
            ),
        )
        def schema(tables: list[str] | None = None) -> ToolOutput:
            """Describe the database schema.

            Args:
                tables: only these tables (default: all the toolkit may show)
            """
            try:
                return kit._schema(tables)
            except Exception as exc:  # any database failure becomes an output the model can read
                return kit.failure(exc, "schema")

        @tool(
            names["select"],
            description=(
                f"Run one read-only SQL query on the {self.label} database and get the rows as a Markdown "
                "table. Writes are impossible here (read-only transaction). Use :name placeholders with "
                "`parameters` for values."
            ),
        )
        def select(query: str, parameters: list[SQLParameter] | None = None, max_rows: int | None = None) -> ToolOutput:
            """Run a read-only query.

            Args:
                query: one SQL statement, e.g. SELECT name FROM users WHERE id = :id
                parameters: values for the :name placeholders, e.g. [{"name": "id", "value": 42}]
                max_rows: most rows to return (default the toolkit's, at most 10000)
            """
            try:
                limit = kit._check_limit(max_rows)
                sql, params = bind(query, as_mapping(parameters), kit.dialect)
                result = kit.run_select(sql, params, limit)
                result.rowcount = None  # a driver's count for a capped, rolled-back read means nothing
                return kit._result_output(result, limit, "")
            except Exception as exc:
                return kit.failure(exc, "select")

        @tool(
            names["write"],
            idempotent=self.applied_keys_table is not None,
            description=(
                f"Run one SQL statement that changes the {self.label} database (INSERT, UPDATE, DELETE, "
                "CREATE, ALTER, ...) and commit it. Use :name placeholders with `parameters` for values."
            ),
        )
        def write(runtime: ToolRuntime, query: str, parameters: list[SQLParameter] | None = None) -> ToolOutput:
            """Run a statement that changes data and commit it.

            Args:
                query: one SQL statement, e.g. UPDATE users SET name = :name WHERE id = :id
                parameters: values for the :name placeholders, e.g. [{"name": "id", "value": 42}]
            """
            try:
                sql, params = bind(query, as_mapping(parameters), kit.dialect)
                key = runtime.idempotency_key if kit.applied_keys_table is not None else None
                result = kit.run_write(sql, params, kit.max_rows, key) if key else kit.run_write(sql, params,
                                                                                                 kit.max_rows)
                if result is None:
                    return ToolOutput.text(f"OK: already applied (idempotency key {key} is in "
                                           f"{kit.applied_keys_table}); not run again.")
                affected = result.rowcount if result.rowcount is not None and result.rowcount >= 0 else None
                head = "OK." if affected is None else f"OK: {affected} row{'s' if affected != 1 else ''} affected."
                return kit._result_output(result, kit.max_rows, head)
            except Exception as exc:
                return kit.failure(exc, "write")

        return [schema, select, write]
