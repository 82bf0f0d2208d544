"""SQLite toolkit against real database files: schema, select (read-only by construction), write."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.toolkits.helpers import err, in_bounded_child, in_forked_child, ok, params
from toolfork.toolkits.sql import SQLiteToolkit
from toolfork.tools import Tool, ToolInputError

SCHEMA = """
CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, born DATE);
CREATE TABLE books (
    id INTEGER PRIMARY KEY,
    author_id INTEGER NOT NULL REFERENCES authors(id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    price NUMERIC(8, 2) DEFAULT 9.99,
    tags TEXT,
    cover BLOB
);
CREATE INDEX idx_books_author ON books(author_id);
CREATE UNIQUE INDEX uq_books_title ON books(author_id, title);
CREATE VIEW cheap_books AS SELECT title FROM books WHERE price < 15;
INSERT INTO authors VALUES (1, 'Ada Lovelace', '1815-12-10'), (2, 'Alan Turing', '1912-06-23');
INSERT INTO books VALUES
    (1, 1, 'Notes', 12.5, 'math|history', NULL),
    (2, 2, 'Computing Machinery', 20, '50% off', x'00ff'),
    (3, 2, 'On Computable Numbers', 15, NULL, NULL);
"""


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "library.db"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def sq(db: Path) -> dict[str, Tool]:
    return {t.name: t for t in SQLiteToolkit(db).tools()}


def snapshot(path: Path) -> tuple[str, list[Any]]:
    conn = sqlite3.connect(path)
    try:
        rows = [
            conn.execute("SELECT * FROM authors ORDER BY id").fetchall(),
            conn.execute("SELECT * FROM books ORDER BY id").fetchall(),
            conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall(),
        ]
    finally:
        conn.close()
    return hashlib.sha256(path.read_bytes()).hexdigest(), rows


# ---------------------------------------------------------------- shape


def test_tool_names_filters_and_guidelines(db: Path) -> None:
    kit = SQLiteToolkit(db)
    assert [t.name for t in kit.tools()] == ["sqlite_schema", "sqlite_select", "sqlite_write"]
    assert "sqlite_select" in (kit.guidelines() or "") and ":name" in (kit.guidelines() or "")
    read_only = SQLiteToolkit(db).exclude(["sqlite_write"])
    assert [t.name for t in read_only.tools()] == ["sqlite_schema", "sqlite_select"]
    assert [t.name for t in SQLiteToolkit(db).only(["sqlite_select"]).tools()] == ["sqlite_select"]
    named = SQLiteToolkit(db, prefix="library")
    assert [t.name for t in named.tools()] == ["library_schema", "library_select", "library_write"]
    schema = {t.name: t for t in kit.tools()}["sqlite_select"].to_json_schema()
    assert schema["required"] == ["query"] and "parameters" in schema["properties"]


def test_default_path_touches_nothing_until_a_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    kit = SQLiteToolkit()
    assert kit.path == tmp_path / "toolfork.db"
    assert len(kit.tools()) == 3 and not kit.path.exists()
    monkeypatch.setenv("TOOLFORK_SQLITE_PATH", str(tmp_path / "env.db"))
    tools = {t.name: t for t in SQLiteToolkit().tools()}
    ok(tools, "sqlite_write", query="CREATE TABLE t (a INTEGER)")
    assert (tmp_path / "env.db").exists() and not (tmp_path / "toolfork.db").exists()


def test_constructor_validation(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="in-memory database"):
        SQLiteToolkit(":memory:")
    with pytest.raises(ValueError, match="max_rows"):
        SQLiteToolkit(tmp_path / "x.db", max_rows=0)
    with pytest.raises(ValueError, match="prefix"):
        SQLiteToolkit(tmp_path / "x.db", prefix="bad name")
    with pytest.raises(ValueError, match="list of table names"):
        SQLiteToolkit(tmp_path / "x.db", tables="books")  # type: ignore[arg-type]


# ---------------------------------------------------------------- schema


def test_schema_describes_tables_keys_and_indexes(sq: dict[str, Tool]) -> None:
    text = ok(sq, "sqlite_schema").as_text()
    assert text.startswith("# SQLite schema")
    assert "## Table `authors`" in text and "## Table `books`" in text and "## View `cheap_books`" in text
    assert "| id | INTEGER | no |  | PK |" in text
    assert "| author_id | INTEGER | no |  | FK → authors.id |" in text
    assert "| price | NUMERIC(8, 2) | yes | 9.99 |  |" in text
    assert "- (author_id) → authors(id) ON DELETE CASCADE" in text
    assert "- idx_books_author (author_id)" in text
    assert "- UNIQUE uq_books_title (author_id, title)" in text
    assert "sqlite_autoindex_authors_1 (name)" in text  # the UNIQUE constraint's index


def test_schema_allow_list_and_requested_tables(db: Path) -> None:
    limited = {t.name: t for t in SQLiteToolkit(db, tables=["books"]).tools()}
    text = ok(limited, "sqlite_schema").as_text()
    assert "`books`" in text and "`authors`" not in text
    message = err(limited, "sqlite_schema", tables=["authors"])
    assert "authors are not available" in message and "available tables: books" in message
    full = {t.name: t for t in SQLiteToolkit(db).tools()}
    one = ok(full, "sqlite_schema", tables=["authors"]).as_text()
    assert "`authors`" in one and "`books`" not in one
    partial = ok(full, "sqlite_schema", tables=["authors", "ghosts"]).as_text()
    assert "Not found: ghosts" in partial
    missing = err(full, "sqlite_schema", tables=["ghosts"])
    assert "ghosts not found" in missing and "authors, books, cheap_books" in missing


def test_schema_of_a_missing_database_file(tmp_path: Path) -> None:
    tools = {t.name: t for t in SQLiteToolkit(tmp_path / "new.db").tools()}
    assert "does not exist yet" in err(tools, "sqlite_schema")
    assert "does not exist yet" in err(tools, "sqlite_select", query="SELECT 1")
    assert not (tmp_path / "new.db").exists()
    ok(tools, "sqlite_write", query="CREATE TABLE t (a INTEGER)")
    assert "## Table `t`" in ok(tools, "sqlite_schema").as_text()


# ---------------------------------------------------------------- select


def test_select_returns_a_markdown_table_and_data(sq: dict[str, Tool]) -> None:
    out = ok(sq, "sqlite_select", query="SELECT id, title, price, tags, cover FROM books ORDER BY id")
    lines = out.as_text().splitlines()
    assert lines[0] == "| id | title | price | tags | cover |"
    assert lines[2] == "| 1 | Notes | 12.5 | math\\|history | NULL |"
    assert lines[3] == "| 2 | Computing Machinery | 20 | 50% off | base64:AP8= |"
    assert out.as_text().endswith("3 rows.")
    assert out.data["columns"] == ["id", "title", "price", "tags", "cover"]
    assert out.data["rows"][2] == [3, "On Computable Numbers", 15, None, None]
    assert out.data["truncated"] is False and out.data["row_count"] == 3
    json.dumps(out.data)  # JSON-safe


def test_select_named_parameters(sq: dict[str, Tool]) -> None:
    out = ok(
        sq,
        "sqlite_select",
        query="SELECT title FROM books WHERE author_id = :author AND price >= :min ORDER BY id",
        parameters=params(author=2, min=15),
    )
    assert out.data["rows"] == [["Computing Machinery"], ["On Computable Numbers"]]
    # A value that looks like SQL stays a value.
    evil = ok(
        sq,
        "sqlite_select",
        query="SELECT count(*) AS n FROM books WHERE title = :t",
        parameters=params(t="x'; DROP TABLE books; --"),
    )
    assert evil.data["rows"] == [[0]]
    # ':' inside literals and comments is not a placeholder.
    literal = ok(sq, "sqlite_select", query="SELECT '12:30' AS t, :v AS v -- :ignored", parameters=params(v=True))
    assert literal.data["rows"] == [["12:30", 1]]
    assert "missing value for placeholder(s) :min" in err(
        sq, "sqlite_select", query="SELECT * FROM books WHERE price > :min"
    )
    assert "parameter(s) extra not used" in err(sq, "sqlite_select", query="SELECT 1", parameters=params(extra=1))


def test_parameter_list_form(sq: dict[str, Tool]) -> None:
    colon = ok(sq, "sqlite_select", query="SELECT :a + 1 AS n", parameters=[{"name": ":a", "value": 1}])
    assert colon.data["rows"] == [[2]]
    twice = err(
        sq, "sqlite_select", query="SELECT :a", parameters=[{"name": "a", "value": 1}, {"name": "a", "value": 2}]
    )
    assert "parameter 'a' is given twice" in twice
    null = ok(sq, "sqlite_select", query="SELECT :v IS NULL AS is_null", parameters=params(v=None))
    assert null.data["rows"] == [[1]]
    # Every SQL tool can be exported for OpenAI strict function calling.
    for tool in SQLiteToolkit(Path("unused.db")).tools():
        strict = tool.to_openai(strict=True)
        assert strict["function"]["strict"] is True


def test_select_caps_rows_with_a_note(sq: dict[str, Tool], db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.executemany("INSERT INTO authors (name) VALUES (?)", [(f"author {i}",) for i in range(300)])
    conn.commit()
    conn.close()
    default = ok(sq, "sqlite_select", query="SELECT id, name FROM authors")
    assert default.data["row_count"] == 100 and default.data["truncated"] is True
    assert "Showing the first 100 rows; the query returned more." in default.as_text()
    small = ok(sq, "sqlite_select", query="SELECT id FROM authors ORDER BY id", max_rows=5)
    assert small.data["rows"] == [[1], [2], [3], [4], [5]]
    exact = ok(sq, "sqlite_select", query="SELECT id FROM authors LIMIT 5", max_rows=5)
    assert exact.data["truncated"] is False and exact.as_text().endswith("5 rows.")
    assert "max_rows must be between 1 and 10000" in err(sq, "sqlite_select", query="SELECT 1", max_rows=0)


def test_select_sql_errors_are_outputs(sq: dict[str, Tool]) -> None:
    assert "no such table: nope" in err(sq, "sqlite_select", query="SELECT * FROM nope")
    assert "syntax error" in err(sq, "sqlite_select", query="SELEC 1")
    with pytest.raises(ToolInputError, match="query"):
        sq["sqlite_select"].validate({"parameters": []})
    with pytest.raises(ToolInputError, match="parameters"):
        sq["sqlite_select"].validate({"query": "SELECT 1", "parameters": [{"name": "a", "value": [1, 2]}]})
    with pytest.raises(ToolInputError, match="parameters"):
        sq["sqlite_select"].validate({"query": "SELECT 1", "parameters": {"a": 1}})  # an object, not a list
    with pytest.raises(ToolInputError, match="parameters"):
        sq["sqlite_select"].validate({"query": "SELECT 1", "parameters": [{"name": "a", "value": 1, "x": 2}]})


READ_ONLY_ATTACKS = [
    "DELETE FROM books",
    "INSERT INTO books (author_id, title) VALUES (1, 'x')",
    "UPDATE books SET price = 0 RETURNING id",
    "WITH doomed AS (SELECT id FROM books) DELETE FROM books WHERE id IN (SELECT id FROM doomed)",
    "SELECT 1; DELETE FROM books",
    "/* just a comment */ DELETE FROM books -- trailing",
    "-- leading comment\nDROP TABLE books",
    "CREATE TABLE sneaky (a INTEGER)",
    "CREATE TEMP TABLE sneaky (a INTEGER)",
    "PRAGMA query_only = 0",
    "REPLACE INTO authors (id, name) VALUES (1, 'Mallory')",
    "ALTER TABLE books ADD COLUMN hacked INTEGER",
]


@pytest.mark.parametrize("attack", READ_ONLY_ATTACKS)
def test_select_cannot_change_anything(sq: dict[str, Tool], db: Path, attack: str) -> None:
    before = snapshot(db)
    out = sq["sqlite_select"].invoke({"query": attack})
    assert out.is_error, out.as_text()
    assert snapshot(db) == before


def test_select_cannot_attach_or_vacuum_into_other_files(sq: dict[str, Tool], db: Path, tmp_path: Path) -> None:
    before = snapshot(db)
    for query in (
        f"ATTACH DATABASE '{tmp_path / 'evil.db'}' AS evil",
        f"ATTACH DATABASE 'file:{tmp_path / 'evil2.db'}?mode=rwc' AS evil",
        f"VACUUM INTO '{tmp_path / 'copy.db'}'",
    ):
        message = err(sq, "sqlite_select", query=query)
        assert "refused by the read-only tool" in message
    assert not any((tmp_path / name).exists() for name in ("evil.db", "evil2.db", "copy.db"))
    assert snapshot(db) == before


def test_read_only_error_points_to_the_write_tool(sq: dict[str, Tool]) -> None:
    message = err(sq, "sqlite_select", query="DELETE FROM books")
    assert "readonly" in message and "use sqlite_write to change data" in message
    assert "one statement per call" in err(sq, "sqlite_select", query="SELECT 1; SELECT 2").lower()


# ---------------------------------------------------------------- write


def test_write_changes_and_commits(sq: dict[str, Tool], db: Path) -> None:
    out = ok(
        sq,
        "sqlite_write",
        query="INSERT INTO authors (name, born) VALUES (:name, :born)",
        parameters=params(name="Grace Hopper", born="1906-12-09"),
    )
    assert out.as_text() == "OK: 1 row affected." and out.data["rows_affected"] == 1
    updated = ok(
        sq, "sqlite_write", query="UPDATE books SET price = price + 1 WHERE author_id = :a", parameters=params(a=2)
    )
    assert updated.as_text().startswith("OK: 2 rows affected.")
    returning = ok(sq, "sqlite_write", query="DELETE FROM books WHERE id = 1 RETURNING id, title")
    assert returning.data["rows"] == [[1, "Notes"]] and "| 1 | Notes |" in returning.as_text()
    assert returning.data["rows_affected"] == 1
    ddl = ok(sq, "sqlite_write", query="CREATE TABLE loans (id INTEGER PRIMARY KEY)")
    assert ddl.as_text() == "OK."
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT name FROM authors WHERE id = 3").fetchone() == ("Grace Hopper",)
    assert conn.execute("SELECT price FROM books WHERE id = 2").fetchone() == (21,)
    assert conn.execute("SELECT count(*) FROM books").fetchone() == (2,)
    conn.close()


def test_write_errors_roll_back_and_foreign_keys_are_enforced(sq: dict[str, Tool], db: Path) -> None:
    before = snapshot(db)
    fk = err(sq, "sqlite_write", query="INSERT INTO books (author_id, title) VALUES (99, 'orphan')")
    assert "FOREIGN KEY constraint failed" in fk
    assert "UNIQUE constraint failed" in err(
        sq, "sqlite_write", query="INSERT INTO authors (name) VALUES ('Ada Lovelace')"
    )
    assert "one statement" in err(sq, "sqlite_write", query="DELETE FROM books; DELETE FROM authors")
    assert snapshot(db)[1] == before[1]
    ok(sq, "sqlite_write", query="DELETE FROM authors WHERE id = 2")
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM books WHERE author_id = 2").fetchone() == (0,)  # cascaded
    conn.close()


def test_works_in_a_forked_child(sq: dict[str, Tool], db: Path) -> None:
    ok(sq, "sqlite_select", query="SELECT 1")

    def child() -> list[Any]:
        out = sq["sqlite_write"].invoke({"query": "INSERT INTO authors (name) VALUES ('from child')"})
        seen = sq["sqlite_select"].invoke({"query": "SELECT count(*) FROM authors"})
        return [out.is_error, seen.data["rows"]]

    assert in_forked_child(child) == [False, [[3]]]
    assert ok(sq, "sqlite_select", query="SELECT count(*) FROM authors").data["rows"] == [[3]]


# ---------------------------------------------------------------- process-wide state and resource bombs

STATE_PRAGMAS = [
    "PRAGMA hard_heap_limit=20000",
    "PRAGMA main.soft_heap_limit = 1000",
    "PRAGMA threads = 8",
    "PRAGMA cache_size = -2000000",
    "PRAGMA mmap_size = 1000000000",
    "PRAGMA writable_schema = ON",
    "PRAGMA case_sensitive_like = ON",
    "PRAGMA query_only = OFF",
    "PRAGMA shrink_memory",
    "PRAGMA optimize",
]


def _sqlite_still_works() -> list[Any]:
    """What a fresh connection of this process sees: the heap limit, and whether a 1 MB value builds."""
    conn = sqlite3.connect(":memory:")
    try:
        return [conn.execute("PRAGMA hard_heap_limit").fetchone()[0],
                conn.execute("SELECT length(zeroblob(1000000))").fetchone()[0]]
    finally:
        conn.close()


def test_select_refuses_every_pragma_that_sets_state(db: Path) -> None:
    def child() -> list[Any]:
        # In a child: a pragma that got through would cripple SQLite for the whole process.
        tools = {t.name: t for t in SQLiteToolkit(db).tools()}
        outs = [tools["sqlite_select"].invoke({"query": q}) for q in STATE_PRAGMAS]
        # The table-valued form: SQLite itself allows no value there, and it must stay that way.
        outs.append(tools["sqlite_select"].invoke({"query": "SELECT * FROM pragma_hard_heap_limit(20000)"}))
        return [[o.is_error, o.as_text()] for o in outs] + [_sqlite_still_works()]

    *outs, as_function, after = in_forked_child(child)
    assert as_function[0], as_function
    for query, (is_error, text) in zip(STATE_PRAGMAS, outs, strict=True):
        assert is_error and "pragmas that set anything are refused by the read-only tool" in text, (query, text)
    assert after == [0, 1_000_000]


def test_select_still_reads_with_pragmas_that_only_read(sq: dict[str, Tool]) -> None:
    columns = ok(sq, "sqlite_select", query="PRAGMA table_info(books)").data["rows"]
    assert [row[1] for row in columns][:3] == ["id", "author_id", "title"]
    names = ok(sq, "sqlite_select", query="SELECT name FROM pragma_table_info('authors') ORDER BY cid").data["rows"]
    assert names == [["id"], ["name"], ["born"]]
    assert ok(sq, "sqlite_select", query="PRAGMA user_version").data["rows"] == [[0]]
    assert ok(sq, "sqlite_select", query="PRAGMA hard_heap_limit").data["rows"] == [[0]]
    assert ok(sq, "sqlite_select", query="PRAGMA integrity_check").data["rows"] == [["ok"]]
    assert ok(sq, "sqlite_select", query="PRAGMA index_list(books)").data["row_count"] == 2


def test_write_refuses_the_process_wide_pragmas_only(sq: dict[str, Tool], db: Path) -> None:
    def child() -> list[Any]:
        tools = {t.name: t for t in SQLiteToolkit(db).tools()}
        outs = [tools["sqlite_write"].invoke({"query": q})
                for q in ("PRAGMA hard_heap_limit = 20000", "PRAGMA soft_heap_limit=1000", "PRAGMA user_version = 7")]
        return [[o.is_error, o.as_text()] for o in outs] + [_sqlite_still_works()]

    hard, soft, version, after = in_forked_child(child)
    assert hard[0] and soft[0] and "process-wide" in hard[1], (hard, soft)
    assert version[0] is False
    assert after == [0, 1_000_000]
    assert ok(sq, "sqlite_select", query="PRAGMA user_version").data["rows"] == [[7]]


BOMBS = [
    "SELECT zeroblob(900000000)",
    "SELECT printf('%.*c', 900000000, 'x')",
    "SELECT format('%900000000d', 1)",
    "SELECT hex(randomblob(400000000))",
    "SELECT length(replace(hex(zeroblob(5000000)), '0', '0000000000'))",
    "WITH RECURSIVE r(s, n) AS (SELECT 'xx', 0 UNION ALL SELECT s || s, n + 1 FROM r WHERE n < 40) "
    "SELECT max(length(s)) FROM r",
]


def test_select_bounds_what_a_query_builds(db: Path) -> None:
    def attack() -> list[Any]:
        tools = {t.name: t for t in SQLiteToolkit(db, max_rows=10_000, query_timeout=2).tools()}
        select = tools["sqlite_select"]
        outs = [select.invoke({"query": q}) for q in BOMBS]
        endless = select.invoke({"query": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                                          "SELECT count(*) FROM c"})
        # 10,000 rows of 5 MB each: every value is allowed, the whole is not.
        wide = select.invoke({"query": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 10000) "
                                       "SELECT x, zeroblob(5000000) FROM c", "max_rows": 10_000})
        return ([[o.is_error, o.as_text()] for o in outs]
                + [[endless.is_error, endless.as_text()], [wide.data["row_count"], wide.as_text()[-300:]]])

    results, grown = in_bounded_child(attack)
    *bombs, endless, wide = results
    for query, (is_error, text) in zip(BOMBS, bombs, strict=True):
        if "printf" in query or "format" in query:  # SQLite's own loops for seconds in one step: refused
            assert is_error and "printf and format refuse a width or precision over max_value_bytes" in text
            continue
        assert is_error and "string or blob too big" in text, (query, text)
        assert "max_value_bytes (10000000 bytes)" in text, (query, text)
    assert endless[0] and "ran longer than query_timeout (2 s) and was stopped" in endless[1]
    assert 1 <= wide[0] <= 10 and "would pass 50000000 bytes of data" in wide[1], wide
    assert grown < 400, f"peak RSS grew by {grown:.0f} MB"


def test_printf_and_format_still_format(sq: dict[str, Tool]) -> None:
    query = ("SELECT printf('%5.2f|%-4s|%%|%d|%.*c', 3.14159, 'ab', 12345678901, 3, 'x'), "
             "format('%s', x'414243'), printf()")
    assert ok(sq, "sqlite_select", query=query).data["rows"] == [[" 3.14|ab  |%|12345678901|xxx", "ABC", None]]
    update = ok(sq, "sqlite_write", query="UPDATE books SET tags = printf('#%03d', id) WHERE id = 1")
    assert update.data["rows_affected"] == 1
    assert ok(sq, "sqlite_select", query="SELECT tags FROM books WHERE id = 1").data["rows"] == [["#001"]]


def test_the_bounds_are_settings(db: Path) -> None:
    tools = {t.name: t for t in SQLiteToolkit(db, max_value_bytes=100, query_timeout=None).tools()}
    assert "at most max_value_bytes (100 bytes)" in err(tools, "sqlite_select", query="SELECT zeroblob(101)")
    assert ok(tools, "sqlite_select", query="SELECT length(zeroblob(100))").data["rows"] == [[100]]
    with pytest.raises(ValueError, match="max_value_bytes"):
        SQLiteToolkit(db, max_value_bytes=0)
    with pytest.raises(ValueError, match="query_timeout"):
        SQLiteToolkit(db, query_timeout=0)


def test_the_length_limit_through_c_matches_setlimit() -> None:
    """The ctypes path Python 3.10 takes (it has no Connection.setlimit), tried on this Python."""
    from toolfork.toolkits.sql.sqlite_limits import limit_length_through_c

    conn = sqlite3.connect(":memory:")
    try:
        assert limit_length_through_c(conn, 1234)
        with pytest.raises(sqlite3.DataError, match="too big"):
            conn.execute("SELECT zeroblob(1235)").fetchall()
        assert conn.execute("SELECT length(zeroblob(1234))").fetchone() == (1234,)
    finally:
        conn.close()
