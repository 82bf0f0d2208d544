"""PostgreSQL toolkit against a real PostgreSQL server started by the test setup (conftest.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from tests.toolkits.conftest import PostgresServer
from tests.toolkits.helpers import (
    assert_workers_open_their_own_connections,
    err,
    in_bounded_child,
    in_forked_child,
    ok,
    params,
)
from toolfork.toolkits.sql import PostgreSQLToolkit
from toolfork.tools import Tool

# One server per test run under `pytest -n auto --dist loadgroup`: every PostgreSQL test goes to one worker.
pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("postgresql")]

SCHEMA = r"""
CREATE TABLE authors (id serial PRIMARY KEY, name text NOT NULL UNIQUE, born date);
CREATE TABLE books (
    id serial PRIMARY KEY,
    author_id integer NOT NULL REFERENCES authors(id) ON DELETE CASCADE,
    title text NOT NULL,
    price numeric(8, 2) DEFAULT 9.99,
    tags text,
    cover bytea,
    meta jsonb
);
CREATE INDEX idx_books_author ON books(author_id);
CREATE UNIQUE INDEX uq_books_title ON books(author_id, title);
CREATE VIEW cheap_books AS SELECT title FROM books WHERE price < 15;
INSERT INTO authors (name, born) VALUES ('Ada Lovelace', '1815-12-10'), ('Alan Turing', '1912-06-23');
INSERT INTO books (author_id, title, price, tags, cover, meta) VALUES
    (1, 'Notes', 12.50, 'math|history', NULL, '{"pages": 65}'),
    (2, 'Computing Machinery', 20, '50% off', '\x00ff', NULL),
    (2, 'On Computable Numbers', 15, NULL, NULL, NULL);
CREATE FUNCTION add_book(t text) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN INSERT INTO books (author_id, title) VALUES (1, t); RETURN 1; END $$;
CREATE FUNCTION sneaky_rw() RETURNS integer LANGUAGE plpgsql AS $$
BEGIN PERFORM set_config('transaction_read_only', 'off', true); DELETE FROM books; RETURN 1; END $$;
CREATE PROCEDURE purge() LANGUAGE plpgsql AS $$ BEGIN DELETE FROM books; COMMIT; END $$;
"""


def _loaded(pg_server: PostgresServer, name: str) -> str:
    dsn = pg_server.dsn(name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
    return dsn


@pytest.fixture(scope="module")
def ro_dsn(pg_server: PostgresServer) -> Iterator[str]:
    """One database for the tests that must not change data: each of them asserts it did not."""
    name = pg_server.create_database()
    try:
        yield _loaded(pg_server, name)
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def dsn(pg_server: PostgresServer, pg_db: str) -> str:
    """A fresh database for tests that write."""
    return _loaded(pg_server, pg_db)


@pytest.fixture
def ro(ro_dsn: str) -> Iterator[dict[str, Tool]]:
    toolkit = PostgreSQLToolkit(ro_dsn)
    yield {t.name: t for t in toolkit.tools()}
    toolkit.close()


@pytest.fixture
def kit(dsn: str) -> Iterator[PostgreSQLToolkit]:
    toolkit = PostgreSQLToolkit(dsn)
    yield toolkit
    toolkit.close()


@pytest.fixture
def pg(kit: PostgreSQLToolkit) -> dict[str, Tool]:
    return {t.name: t for t in kit.tools()}


def snapshot(dsn: str) -> list[Any]:
    with psycopg.connect(dsn) as conn:
        return [
            conn.execute("SELECT * FROM authors ORDER BY id").fetchall(),
            conn.execute("SELECT id, author_id, title, price, tags FROM books ORDER BY id").fetchall(),
            conn.execute(
                "SELECT relname, relkind FROM pg_class WHERE relnamespace = 'public'::regnamespace ORDER BY 1"
            ).fetchall(),
            conn.execute("SELECT last_value, is_called FROM books_id_seq").fetchall(),
            conn.execute("SELECT count(*) FROM pg_prepared_xacts").fetchall(),
        ]


# ---------------------------------------------------------------- shape, schema


def test_tool_names_and_filters(ro_dsn: str) -> None:
    kit = PostgreSQLToolkit(ro_dsn)
    assert [t.name for t in kit.tools()] == ["postgresql_schema", "postgresql_select", "postgresql_write"]
    assert [t.name for t in PostgreSQLToolkit(ro_dsn).exclude(["postgresql_write"]).tools()] == [
        "postgresql_schema",
        "postgresql_select",
    ]
    assert [t.name for t in PostgreSQLToolkit(ro_dsn, prefix="crm").only(["crm_select"]).tools()] == ["crm_select"]


def test_dsn_from_the_environment(ro_dsn: str, pg_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLFORK_POSTGRES_DSN", ro_dsn)
    kit = PostgreSQLToolkit()
    assert ok({t.name: t for t in kit.tools()}, "postgresql_select", query="SELECT count(*) FROM authors").data[
        "rows"
    ] == [[2]]
    kit.close()
    # Without any DSN, libpq's own environment applies; its PGPASSWORD is redacted like a DSN password.
    monkeypatch.delenv("TOOLFORK_POSTGRES_DSN")
    monkeypatch.setenv("PGHOST", "127.0.0.1")
    monkeypatch.setenv("PGPORT", str(pg_server.port))
    monkeypatch.setenv("PGUSER", pg_server.user)
    monkeypatch.setenv("PGDATABASE", ro_dsn.rsplit("/", 1)[1])
    monkeypatch.setenv("PGPASSWORD", pg_server.password)
    env_kit = PostgreSQLToolkit()
    tools = {t.name: t for t in env_kit.tools()}
    assert ok(tools, "postgresql_select", query="SELECT count(*) FROM books").data["rows"] == [[3]]
    echoed = err(tools, "postgresql_select", query=f'SELECT * FROM "{pg_server.password}"')
    assert pg_server.password not in echoed and "***" in echoed
    env_kit.close()


def test_schema_markdown(ro: dict[str, Tool]) -> None:
    text = ok(ro, "postgresql_schema").as_text()
    assert text.startswith("# PostgreSQL schema")
    assert "## Table `authors`" in text and "## View `cheap_books`" in text
    assert "| id | integer | no | nextval('authors_id_seq'::regclass) | PK |" in text
    assert "| author_id | integer | no |  | FK → authors.id |" in text
    assert "| price | numeric(8,2) | yes | 9.99 |  |" in text
    assert "| meta | jsonb | yes |  |  |" in text
    assert "Primary key: (id)" in text
    assert "- (author_id) → authors(id) ON DELETE CASCADE" in text
    assert "- UNIQUE uq_books_title (author_id, title)" in text
    assert "- idx_books_author (author_id)" in text
    assert "- UNIQUE authors_name_key (name)" in text


def test_schema_allow_list(ro_dsn: str) -> None:
    tools = {t.name: t for t in PostgreSQLToolkit(ro_dsn, tables=["books", "cheap_books"]).tools()}
    text = ok(tools, "postgresql_schema").as_text()
    assert "`books`" in text and "`cheap_books`" in text and "`authors`" not in text
    assert "authors are not available" in err(tools, "postgresql_schema", tables=["authors"])
    only_view = ok(tools, "postgresql_schema", tables=["cheap_books"]).as_text()
    assert "## View `cheap_books`" in only_view and "## Table `books`" not in only_view


# ---------------------------------------------------------------- select


def test_select_values_and_parameters(ro: dict[str, Tool]) -> None:
    out = ok(ro, "postgresql_select", query="SELECT id, title, price, tags, cover, meta FROM books ORDER BY id")
    lines = out.as_text().splitlines()
    assert lines[0] == "| id | title | price | tags | cover | meta |"
    assert lines[2] == '| 1 | Notes | 12.50 | math\\|history | NULL | {"pages": 65} |'
    assert lines[3] == "| 2 | Computing Machinery | 20.00 | 50% off | base64:AP8= | NULL |"
    assert out.data["rows"][0][2] == "12.50" and "rows_affected" not in out.data
    found = ok(
        ro,
        "postgresql_select",
        query="SELECT title, '12:30'::time AS t, :n::int + 1 AS n FROM books "
        "WHERE tags LIKE '50%' AND author_id = :author",
        parameters=params(author=2, n=41),
    )
    assert found.data["rows"] == [["Computing Machinery", "12:30:00", 42]]
    born = ok(
        ro, "postgresql_select", query="SELECT born FROM authors WHERE name = :n", parameters=params(n="Ada Lovelace")
    )
    assert born.data["rows"] == [["1815-12-10"]]
    injection = ok(
        ro,
        "postgresql_select",
        query="SELECT count(*) FROM books WHERE title = :t",
        parameters=params(t="'; DELETE FROM books; --"),
    )
    assert injection.data["rows"] == [[0]]
    assert "missing value for placeholder(s) :author" in err(
        ro, "postgresql_select", query="SELECT * FROM books WHERE author_id = :author"
    )


def test_select_statements_a_cursor_cannot_wrap(ro: dict[str, Tool]) -> None:
    show = ok(ro, "postgresql_select", query="SHOW search_path")
    assert show.data["columns"] == ["search_path"]
    plan = ok(ro, "postgresql_select", query="EXPLAIN SELECT * FROM books WHERE id = :id", parameters=params(id=1))
    assert plan.data["columns"] == ["QUERY PLAN"] and plan.data["row_count"] >= 1


def test_select_caps_rows_from_a_huge_result(ro: dict[str, Tool]) -> None:
    out = ok(ro, "postgresql_select", query="SELECT g FROM generate_series(1, 1000000) g", max_rows=3)
    assert out.data["rows"] == [[1], [2], [3]] and out.data["truncated"] is True
    assert "Showing the first 3 rows" in out.as_text()
    assert ok(ro, "postgresql_select", query="SELECT 1 AS one WHERE false").as_text().endswith("0 rows.")


def test_select_errors_name_the_problem(ro: dict[str, Tool]) -> None:
    missing = err(ro, "postgresql_select", query="SELECT * FROM nope")
    assert 'relation "nope" does not exist' in missing and "[42P01]" in missing
    assert "division by zero" in err(ro, "postgresql_select", query="SELECT 1 / (g - 2) FROM generate_series(1, 5) g")
    assert "syntax error" in err(ro, "postgresql_select", query="SELEC 1")
    # After errors the session is healthy.
    assert ok(ro, "postgresql_select", query="SELECT 1 AS one").data["rows"] == [[1]]


def test_statement_timeout(ro_dsn: str) -> None:
    kit = PostgreSQLToolkit(ro_dsn, statement_timeout_ms=200)
    tools = {t.name: t for t in kit.tools()}
    assert "statement timeout" in err(tools, "postgresql_select", query="SELECT pg_sleep(10)")
    assert ok(tools, "postgresql_select", query="SELECT 2 AS two").data["rows"] == [[2]]
    kit.close()


SINGLE_ATTACKS = [
    "DELETE FROM books",
    "UPDATE books SET price = 0",
    "INSERT INTO books (author_id, title) VALUES (1, 'x')",
    "WITH gone AS (DELETE FROM books RETURNING *) SELECT * FROM gone",
    "WITH x AS (UPDATE books SET price = 0 RETURNING id) SELECT count(*) FROM x",
    "SELECT add_book('injected')",
    "SELECT sneaky_rw()",
    "SELECT 1; DELETE FROM books",
    "SELECT 1; COMMIT; DELETE FROM books",
    "/* only a comment */ DELETE FROM books -- trailing comment",
    "-- leading comment\nDROP TABLE books",
    "DO $$ BEGIN DELETE FROM books; END $$",
    "CALL purge()",
    "CREATE TABLE sneaky (a int)",
    "CREATE TEMP TABLE sneaky (a int)",
    "TRUNCATE books",
    "ALTER TABLE books ADD COLUMN hacked int",
    "SELECT nextval('books_id_seq')",
    "PREPARE TRANSACTION 'escape'",
    "SELECT * FROM books FOR UPDATE",
]


@pytest.mark.parametrize("attack", SINGLE_ATTACKS)
def test_select_is_read_only_by_construction(ro: dict[str, Tool], ro_dsn: str, attack: str) -> None:
    before = snapshot(ro_dsn)
    ro["postgresql_select"].invoke({"query": attack})
    ro["postgresql_select"].invoke({"query": "DELETE FROM authors"})
    assert snapshot(ro_dsn) == before
    assert ok(ro, "postgresql_select", query="SELECT count(*) FROM books").data["rows"] == [[3]]


SESSION_ATTACKS = [
    ["COMMIT", "DELETE FROM books"],
    ["ROLLBACK", "DELETE FROM books"],
    ["BEGIN", "DELETE FROM books"],
    ["SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", "DELETE FROM books"],
    ["SET default_transaction_read_only = off", "DELETE FROM books"],
    ["SELECT set_config('default_transaction_read_only', 'off', false)", "DELETE FROM books"],
    ["SET TRANSACTION READ WRITE", "DELETE FROM books"],
    ["PREPARE wipe AS DELETE FROM books", "EXECUTE wipe"],
    ["RELEASE SAVEPOINT toolfork_select", "DELETE FROM books"],
]


@pytest.mark.parametrize("calls", SESSION_ATTACKS, ids=lambda c: c[0][:40])
def test_select_state_from_one_call_cannot_unlock_the_next(ro: dict[str, Tool], ro_dsn: str, calls: list[str]) -> None:
    before = snapshot(ro_dsn)
    for query in calls:
        ro["postgresql_select"].invoke({"query": query})
    assert snapshot(ro_dsn) == before
    message = err(ro, "postgresql_select", query="DELETE FROM books")
    assert "read-only transaction" in message and "use postgresql_write to change data" in message


# ---------------------------------------------------------------- write


def test_write_commits_and_reports(pg: dict[str, Tool], dsn: str) -> None:
    out = ok(
        pg,
        "postgresql_write",
        query="INSERT INTO authors (name, born) VALUES (:name, :born) RETURNING id",
        parameters=params(name="Grace Hopper", born="1906-12-09"),
    )
    assert out.data["rows"] == [[3]] and out.data["rows_affected"] == 1
    assert out.as_text().startswith("OK: 1 row affected.")
    assert ok(pg, "postgresql_write", query="UPDATE books SET price = price * 2 WHERE author_id = 2").as_text() == (
        "OK: 2 rows affected."
    )
    assert ok(pg, "postgresql_write", query="CREATE TABLE loans (id serial PRIMARY KEY)").as_text() == "OK."
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT name FROM authors WHERE id = 3").fetchone() == ("Grace Hopper",)
        assert conn.execute("SELECT sum(price) FROM books WHERE author_id = 2").fetchone()[0] == 70
        assert conn.execute("SELECT to_regclass('loans') IS NOT NULL").fetchone() == (True,)
    # The select tool sees committed writes.
    assert ok(pg, "postgresql_select", query="SELECT count(*) FROM authors").data["rows"] == [[3]]


def test_write_errors_roll_back(pg: dict[str, Tool], dsn: str) -> None:
    before = snapshot(dsn)
    dup = err(pg, "postgresql_write", query="INSERT INTO authors (name) VALUES ('Ada Lovelace')")
    assert "duplicate key value violates unique constraint" in dup and "DETAIL: Key (name)" in dup
    fk = err(pg, "postgresql_write", query="INSERT INTO books (author_id, title) VALUES (99, 'x')")
    assert "foreign key constraint" in fk
    stacked = err(pg, "postgresql_write", query="DELETE FROM books; DELETE FROM authors")
    assert "multiple commands" in stacked
    after = snapshot(dsn)
    # Sequences are not transactional: a failed INSERT legitimately consumes an id. Everything else holds.
    assert after[:3] == before[:3] and after[4:] == before[4:]
    assert (
        ok(pg, "postgresql_write", query="DELETE FROM books WHERE id = :id", parameters=params(id=1)).data[
            "rows_affected"
        ]
        == 1
    )


# ---------------------------------------------------------------- credentials and connections


def test_password_never_leaks(pg_server: PostgresServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "Wr0ng-Pa55word!"
    kit = PostgreSQLToolkit(pg_server.dsn("postgres", password=wrong))
    tools = {t.name: t for t in kit.tools()}
    for name, args in [
        ("postgresql_select", {"query": "SELECT 1"}),
        ("postgresql_schema", {}),
        ("postgresql_write", {"query": "SELECT 1"}),
    ]:
        message = err(tools, name, **args)
        assert "password authentication failed" in message
        assert wrong not in message and "Pa55" not in message
    assert wrong not in repr(kit)
    secret = pg_server.password
    refused = PostgreSQLToolkit(f"postgresql://toolfork_app:{quote(secret, safe='')}@127.0.0.1:1/x?connect_timeout=2")
    refused_tools = {t.name: t for t in refused.tools()}
    message = err(refused_tools, "postgresql_select", query="SELECT 1")
    assert secret not in message and "S3cr3t" not in message and "connection" in message.lower()
    with pytest.raises(ValueError) as info:
        PostgreSQLToolkit(f"host=127.0.0.1 password={secret.replace(' ', '')} junk")
    assert "S3cr3t" not in str(info.value) and "invalid PostgreSQL DSN" in str(info.value)
    assert "S3cr3t" not in caplog.text and wrong not in caplog.text


def test_fork_child_opens_its_own_connection(kit: PostgreSQLToolkit, pg: dict[str, Tool]) -> None:
    query = {"query": "SELECT pg_backend_pid()"}
    parent_backend = pg["postgresql_select"].invoke(query).data["rows"][0][0]

    def in_child() -> dict[str, Any]:
        out = pg["postgresql_select"].invoke(query)
        wrote = pg["postgresql_write"].invoke({"query": "INSERT INTO authors (name) VALUES ('child')"})
        return {"backend": out.data["rows"][0][0], "error": wrote.is_error, "opened": kit._reader.opened}

    child = in_forked_child(in_child)
    assert child["backend"] != parent_backend and child["opened"] == 1 and child["error"] is False
    # The parent's connection was neither used nor closed by the child: same backend, still healthy.
    again = pg["postgresql_select"].invoke(query)
    assert not again.is_error and again.data["rows"][0][0] == parent_backend
    assert ok(pg, "postgresql_select", query="SELECT count(*) FROM authors WHERE name = 'child'").data["rows"] == [[1]]


def test_reconnects_after_the_server_drops_the_connection(ro: dict[str, Tool], pg_server: PostgresServer) -> None:
    backend = ok(ro, "postgresql_select", query="SELECT pg_backend_pid()").data["rows"][0][0]
    with pg_server.admin() as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
    outcomes = [ro["postgresql_select"].invoke({"query": "SELECT pg_backend_pid()"}) for _ in range(2)]
    assert not outcomes[-1].is_error
    assert outcomes[-1].data["rows"][0][0] != backend


def test_inside_the_forking_executor(kit: PostgreSQLToolkit, pg: dict[str, Tool]) -> None:
    assert_workers_open_their_own_connections(kit, pg, "postgresql", "SELECT pg_backend_pid()")


# ---------------------------------------------------------------- state a read leaves, results it builds


def test_a_read_leaves_no_session_state_for_the_next_call(ro: dict[str, Tool], ro_dsn: str) -> None:
    # A session advisory lock survives ROLLBACK: held by the toolkit's reader it would block others.
    assert ok(ro, "postgresql_select", query="SELECT pg_advisory_lock(4242)").data["row_count"] == 1
    with psycopg.connect(ro_dsn, autocommit=True) as other:
        got = other.execute("SELECT pg_try_advisory_lock(4242)").fetchone()
        assert got is not None and got[0] is True
        other.execute("SELECT pg_advisory_unlock(4242)")
    # A prepared statement survives ROLLBACK too; so do cursors declared WITH HOLD on commit only.
    ok(ro, "postgresql_select", query="PREPARE leak AS SELECT 42")
    assert "prepared statement \"leak\" does not exist" in err(ro, "postgresql_select", query="EXECUTE leak")
    # Settings are rolled back with the transaction; the next call sees the defaults.
    ok(ro, "postgresql_select", query="SET search_path = pg_catalog")
    ok(ro, "postgresql_select", query="SELECT set_config('statement_timeout', '1', false)")
    assert ok(ro, "postgresql_select", query="SELECT count(*) FROM books, pg_sleep(0.05)").data["rows"] == [[3]]


def test_a_result_of_many_large_rows_is_cut_at_the_byte_budget(ro_dsn: str) -> None:
    def attack() -> list[Any]:
        kit = PostgreSQLToolkit(ro_dsn)
        select = {t.name: t for t in kit.tools()}["postgresql_select"]
        # 10,000 rows of 5 MB each (50 GB): the cursor hands them out as they are fetched.
        out = select.invoke({"query": "SELECT g, repeat('x', 5000000) FROM generate_series(1, 10000) g",
                             "max_rows": 10_000})
        after = select.invoke({"query": "SELECT count(*) FROM books"})
        kit.close()
        return [out.data["row_count"], out.as_text()[-300:], after.data["rows"]]

    (rows, text, after), grown = in_bounded_child(attack)
    assert 1 <= rows <= 10 and "would pass 50000000 bytes of data" in text, (rows, text)
    assert after == [[3]]
    assert grown < 400, f"peak RSS grew by {grown:.0f} MB"
