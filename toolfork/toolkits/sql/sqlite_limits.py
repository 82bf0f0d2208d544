"""What a SQLite statement from a model may do to the process and how much it may build.

SQLite runs inside this process, so "read-only" has to cover more than the database file:

- Pragmas. ``PRAGMA hard_heap_limit=20000`` (also as ``SELECT * FROM pragma_hard_heap_limit(20000)``)
  is process-wide: it would cripple every later SQLite call of the program. The select tool allows
  only pragmas that read (an allow-list: introspection with a table or index name, and settings
  queried without a value); the write tool refuses the two process-wide ones.
- Size. One value may be at most ``max_value_bytes`` (SQLite's own ``SQLITE_LIMIT_LENGTH``, set on
  the connection; ``zeroblob(900000000)`` or ``printf('%.*c', 900000000, 'x')`` then fail at once
  with "string or blob too big" instead of allocating a gigabyte).
- Time. A progress handler stops a statement after ``query_timeout`` seconds (an endless recursive
  CTE), in every execution mode, the sequential and inline ones included. It runs between steps,
  and one step of ``printf('%.*c', 900000000, 'x')`` loops for seconds even though the limit makes
  its result NULL; so ``printf`` and ``format`` are replaced on the connection by a function that
  refuses a width or precision over the length limit and hands everything else to SQLite's own
  ``printf`` (on a private in-memory connection with the same limit).

The length limit needs ``Connection.setlimit`` (Python 3.11+); on 3.10 the same C call is made
through ctypes on the connection's handle, checked by reading the limit back, and when that is not
possible (an unusual build) the time budget is the only bound left.
"""

from __future__ import annotations

import ctypes
import re
import sqlite3
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "PROCESS_WIDE_PRAGMAS",
    "READ_PRAGMAS",
    "authorize_read_only",
    "authorize_write",
    "bound",
    "guard_printf",
    "limit_length",
    "limit_length_through_c",
]

SQLITE_LIMIT_LENGTH = getattr(sqlite3, "SQLITE_LIMIT_LENGTH", 0)

# Pragmas whose argument is only a name to describe (or a count of errors to report).
_INTROSPECTION = frozenset(
    {
        "table_info", "table_xinfo", "table_list", "index_info", "index_xinfo", "index_list",
        "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
    }
)
# Pragmas that read a setting or a fact when given no value (with a value, most of them set it).
_QUERIES = frozenset(
    {
        "application_id", "auto_vacuum", "automatic_index", "busy_timeout", "cache_size", "cache_spill",
        "cell_size_check", "collation_list", "compile_options", "data_version", "database_list",
        "defer_foreign_keys", "encoding", "foreign_keys", "freelist_count", "function_list",
        "hard_heap_limit", "journal_mode", "journal_size_limit", "legacy_alter_table", "locking_mode",
        "max_page_count", "mmap_size", "module_list", "page_count", "page_size", "pragma_list",
        "query_only", "recursive_triggers", "schema_version", "secure_delete", "soft_heap_limit",
        "synchronous", "temp_store", "threads", "trusted_schema", "user_version", "wal_autocheckpoint",
    }
)
READ_PRAGMAS = _INTROSPECTION | _QUERIES
PROCESS_WIDE_PRAGMAS = frozenset({"hard_heap_limit", "soft_heap_limit"})

_ATTACH = (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH)


def authorize_read_only(action: int, arg1: Any, arg2: Any, db: Any, trigger: Any) -> int:
    """The select tool's authorizer: no ATTACH/DETACH (other files), only pragmas that read."""
    if action in _ATTACH:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA:
        name = str(arg1).lower()
        reads = name in _INTROSPECTION or (name in _QUERIES and arg2 is None)
        return sqlite3.SQLITE_OK if reads else sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def authorize_write(action: int, arg1: Any, arg2: Any, db: Any, trigger: Any) -> int:
    """The write tool's authorizer: it may change the database, not the process's heap limits."""
    if action == sqlite3.SQLITE_PRAGMA and str(arg1).lower() in PROCESS_WIDE_PRAGMAS and arg2 is not None:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def limit_length_through_c(conn: sqlite3.Connection, max_bytes: int) -> bool:
    """``sqlite3_limit(db, SQLITE_LIMIT_LENGTH, max_bytes)`` on the connection's handle, for Pythons
    without ``setlimit``; True when the limit read back is the one set."""
    try:
        import _sqlite3

        lib = ctypes.CDLL(_sqlite3.__file__)
        lib.sqlite3_limit.restype = ctypes.c_int
        lib.sqlite3_limit.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        # A pysqlite Connection starts with PyObject_HEAD, then the sqlite3* handle.
        handle = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
        if not handle:
            return False
        current = lib.sqlite3_limit(handle, SQLITE_LIMIT_LENGTH, -1)
        if not 0 < current <= 2**31 - 1:  # not a limit: not the handle we think it is
            return False
        lib.sqlite3_limit(handle, SQLITE_LIMIT_LENGTH, max_bytes)
        return bool(lib.sqlite3_limit(handle, SQLITE_LIMIT_LENGTH, -1) == min(max_bytes, current))
    except (ImportError, OSError, AttributeError, ValueError):
        return False


def limit_length(conn: sqlite3.Connection, max_bytes: int) -> bool:
    """Cap the size of any one string or blob the connection builds; False when it cannot be set."""
    setlimit = getattr(conn, "setlimit", None)
    if setlimit is not None:
        setlimit(SQLITE_LIMIT_LENGTH, max_bytes)
        return True
    return limit_length_through_c(conn, max_bytes)


# One conversion of SQLite's printf: flags, width, precision (each a number or '*'), type.
_CONVERSION = re.compile(r"%[-+ 0#!,]*(\*|\d+)?(?:\.(\*|\d+)?)?(.)", re.DOTALL)


def _checked_sizes(fmt: str, args: tuple[Any, ...], max_bytes: int) -> None:
    """Raise when a width or precision of ``fmt`` (literal, or a '*' argument) is over ``max_bytes``."""
    taken = 0
    for match in _CONVERSION.finditer(fmt):
        if match.group(3) == "%":
            continue
        for size in match.group(1, 2):
            if size == "*":
                value = args[taken] if taken < len(args) else 0
                taken += 1
                size = str(abs(value)) if isinstance(value, int) else "0"
            if size and int(size) > max_bytes:
                raise ValueError(f"printf width or precision {size} is over max_value_bytes ({max_bytes})")
        taken += 1  # the value the conversion formats


def guard_printf(conn: sqlite3.Connection, max_bytes: int) -> None:
    """Replace ``printf`` and ``format`` on ``conn`` by checked ones (see the module's docstring)."""
    engine = sqlite3.connect(":memory:", check_same_thread=False)
    limit_length(engine, max_bytes)

    def checked(name: str) -> Callable[..., Any]:
        def call(*values: Any) -> Any:
            if values and isinstance(values[0], str):
                _checked_sizes(values[0], values[1:], max_bytes)
            marks = ", ".join("?" * len(values))
            return engine.execute(f"SELECT {name}({marks})", values).fetchone()[0]

        return call

    for name in ("printf", "format"):
        conn.create_function(name, -1, checked(name), deterministic=True)


def bound(conn: sqlite3.Connection, max_value_bytes: int, timeout_s: float | None) -> None:
    """Apply the size limit, the checked printf and, with a timeout, a progress handler that stops
    the statement at it."""
    limit_length(conn, max_value_bytes)
    guard_printf(conn, max_value_bytes)
    if timeout_s is not None:
        deadline = time.monotonic() + timeout_s
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
