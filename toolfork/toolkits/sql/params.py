"""Named ``:name`` placeholders for every dialect.

A model writes one placeholder style whatever the database; this module finds the placeholders the
way the database's lexer would (skipping string literals, quoted identifiers, comments, dollar quotes
and ``::`` casts) and rewrites them into the driver's own style. Finding them properly, rather than by
regex, is what lets ``'12:30'`` or ``x::int`` pass through untouched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

Dialect = Literal["sqlite", "postgresql", "mysql"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")


class ParameterError(ValueError):
    """Placeholders and parameters do not match; the message names the culprits."""


def _skip_quoted(sql: str, i: int, quote: str, backslash: bool) -> int:
    """Index just past the literal that starts at ``sql[i]`` (a doubled quote is an escaped quote)."""
    j = i + 1
    while j < len(sql):
        ch = sql[j]
        if backslash and ch == "\\":
            j += 2
            continue
        if ch == quote:
            if j + 1 < len(sql) and sql[j + 1] == quote:
                j += 2
                continue
            return j + 1
        j += 1
    return len(sql)


def scan(sql: str, dialect: Dialect) -> list[tuple[int, int, str]]:
    """Positions ``(start, end, name)`` of every ``:name`` placeholder outside literals and comments."""
    found: list[tuple[int, int, str]] = []
    i = 0
    n = len(sql)
    mysql = dialect == "mysql"
    while i < n:
        ch = sql[i]
        if ch == "'":
            escaped = mysql or (dialect == "postgresql" and i > 0 and sql[i - 1] in "eE")
            i = _skip_quoted(sql, i, "'", backslash=escaped)
        elif ch == '"':
            i = _skip_quoted(sql, i, '"', backslash=mysql)
        elif ch == "`" and dialect != "postgresql":
            i = _skip_quoted(sql, i, "`", backslash=False)
        elif ch == "[" and dialect == "sqlite":
            close = sql.find("]", i + 1)
            i = n if close == -1 else close + 1
        elif ch == "-" and sql.startswith("--", i) and (not mysql or i + 2 >= n or sql[i + 2] in " \t\r\n"):
            newline = sql.find("\n", i)
            i = n if newline == -1 else newline + 1
        elif ch == "#" and mysql:
            newline = sql.find("\n", i)
            i = n if newline == -1 else newline + 1
        elif ch == "/" and sql.startswith("/*", i):
            close = sql.find("*/", i + 2)
            i = n if close == -1 else close + 2
        elif ch == "$" and dialect == "postgresql":
            tag = _DOLLAR_TAG.match(sql, i)
            if tag and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] == "_")):
                close = sql.find(tag.group(0), tag.end())
                i = n if close == -1 else close + len(tag.group(0))
            else:
                i += 1
        elif ch == ":":
            if i + 1 < n and sql[i + 1] == ":":  # PostgreSQL cast x::int
                i += 2
                continue
            if i > 0 and sql[i - 1] == ":":
                i += 1
                continue
            name = _NAME.match(sql, i + 1)
            if name:
                found.append((i, name.end(), name.group(0)))
                i = name.end()
            else:
                i += 1
        else:
            i += 1
    return found


def bind(sql: str, parameters: Mapping[str, Any] | None, dialect: Dialect) -> tuple[str, dict[str, Any] | None]:
    """Check placeholders against parameters and rewrite ``sql`` for the driver.

    Returns the SQL to send and the parameters to pass (None when the query has no placeholders, so
    drivers that format with ``%`` leave a literal ``%`` alone).
    """
    params = dict(parameters or {})
    spots = scan(sql, dialect)
    used = {name for _, _, name in spots}
    missing = sorted(used - params.keys())
    unused = sorted(params.keys() - used)
    problems = []
    if missing:
        problems.append(f"missing value for placeholder(s) {', '.join(':' + m for m in missing)}")
    if unused:
        problems.append(f"parameter(s) {', '.join(unused)} not used in the query (write them as :name in the SQL)")
    if problems:
        raise ParameterError("; ".join(problems))
    if not spots:
        return sql, None
    if dialect == "sqlite":
        return sql, params  # sqlite3 understands :name natively
    out = []
    last = 0
    for start, end, name in spots:
        out.append(sql[last:start].replace("%", "%%"))
        out.append(f"%({name})s")
        last = end
    out.append(sql[last:].replace("%", "%%"))
    return "".join(out), params
