"""MySQL toolkit against a real MariaDB server started by the test setup (conftest.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pymysql
import pytest

from tests.toolkits.conftest import MariaDBServer
from tests.toolkits.helpers import (
    assert_workers_open_their_own_connections,
    err,
    in_bounded_child,
    in_forked_child,
    ok,
    params,
)
from toolfork.toolkits.sql import MySQLToolkit
from toolfork.toolkits.sql.mysql import parse_mysql_dsn
from toolfork.tools import Tool

# One server per test run under `pytest -n auto --dist loadgroup`: every MariaDB test goes to one worker.
pytestmark = [pytest.mark.mysql, pytest.mark.xdist_group("mariadb")]

STATEMENTS = [
    "CREATE TABLE authors (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(100) NOT NULL UNIQUE, born DATE)",
    """CREATE TABLE books (
        id INT AUTO_INCREMENT PRIMARY KEY,
        author_id INT NOT NULL,
        title VARCHAR(200) NOT NULL,
        price DECIMAL(8, 2) DEFAULT 9.99,
        tags TEXT,
        cover BLOB,
        CONSTRAINT fk_books_author FOREIGN KEY (author_id) REFERENCES authors(id) ON DELETE CASCADE,
        UNIQUE KEY uq_books_title (author_id, title),
        KEY idx_books_price (price)
    ) ENGINE=InnoDB""",
    "CREATE VIEW cheap_books AS SELECT title FROM books WHERE price < 15",
    "INSERT INTO authors (name, born) VALUES ('Ada Lovelace', '1815-12-10'), ('Alan Turing', '1912-06-23')",
    """INSERT INTO books (author_id, title, price, tags, cover) VALUES
        (1, 'Notes', 12.50, 'math|history', NULL),
        (2, 'Computing Machinery', 20, '50% off', x'00ff'),
        (2, 'On Computable Numbers', 15, NULL, NULL)""",
    """CREATE FUNCTION add_book(t VARCHAR(200)) RETURNS INT MODIFIES SQL DATA
        BEGIN INSERT INTO books (author_id, title) VALUES (1, t); RETURN 1; END""",
    "CREATE PROCEDURE purge_books() BEGIN DELETE FROM books; END",
    "CREATE PROCEDURE drop_books() BEGIN DROP TABLE books; END",
]


def _loaded(server: MariaDBServer, name: str) -> str:
    dsn = server.dsn(name)
    conn = pymysql.connect(
        host="127.0.0.1", port=server.port, user=server.user, password=server.password, database=name, autocommit=True
    )
    with conn, conn.cursor() as cur:
        for statement in STATEMENTS:
            cur.execute(statement)
    return dsn


@pytest.fixture(scope="module")
def ro_dsn(mariadb_server: MariaDBServer) -> Iterator[str]:
    """One database for the tests that must not change data: each of them asserts it did not."""
    name = mariadb_server.create_database()
    try:
        yield _loaded(mariadb_server, name)
    finally:
        mariadb_server.drop_database(name)


@pytest.fixture
def dsn(mariadb_server: MariaDBServer, mariadb_db: str) -> str:
    return _loaded(mariadb_server, mariadb_db)


@pytest.fixture
def ro(ro_dsn: str) -> Iterator[dict[str, Tool]]:
    kit = MySQLToolkit(ro_dsn)
    yield {t.name: t for t in kit.tools()}
    kit.close()


@pytest.fixture
def kit(dsn: str) -> Iterator[MySQLToolkit]:
    toolkit = MySQLToolkit(dsn)
    yield toolkit
    toolkit.close()


@pytest.fixture
def my(kit: MySQLToolkit) -> dict[str, Tool]:
    return {t.name: t for t in kit.tools()}


def snapshot(server: MariaDBServer, dsn: str) -> list[Any]:
    database = dsn.rsplit("/", 1)[1]
    with server.admin(database) as conn, conn.cursor() as cur:
        out = []
        for query in (
            "SELECT * FROM authors ORDER BY id",
            "SELECT id, author_id, title, price, tags FROM books ORDER BY id",
            "SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY 1",
            "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "ORDER BY 1, 2",
            "SELECT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() ORDER BY 1",
            "SELECT user, host FROM mysql.user ORDER BY 1, 2",
        ):
            cur.execute(query)
            out.append(cur.fetchall())
        return out


# ---------------------------------------------------------------- shape, schema


def test_tool_names_filters_and_construction(ro_dsn: str) -> None:
    kit = MySQLToolkit(ro_dsn)
    assert [t.name for t in kit.tools()] == ["mysql_schema", "mysql_select", "mysql_write"]
    assert [t.name for t in MySQLToolkit(ro_dsn).exclude(["mysql_write"]).tools()] == ["mysql_schema", "mysql_select"]
    assert [t.name for t in MySQLToolkit(ro_dsn, prefix="shop").only(["shop_schema"]).tools()] == ["shop_schema"]
    nodb = {t.name: t for t in MySQLToolkit("mysql://u:p@127.0.0.1:3306/").tools()}
    assert "no database configured" in err(nodb, "mysql_select", query="SELECT 1")
    with pytest.raises(ValueError, match="multi-statements"):
        MySQLToolkit(ro_dsn, client_flag=65536)


def test_dsn_from_the_environment(ro_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLFORK_MYSQL_DSN", ro_dsn)
    kit = MySQLToolkit()
    tools = {t.name: t for t in kit.tools()}
    assert ok(tools, "mysql_select", query="SELECT count(*) FROM authors").data["rows"] == [[2]]
    kit.close()


def test_schema_markdown(ro: dict[str, Tool]) -> None:
    text = ok(ro, "mysql_schema").as_text()
    assert text.startswith("# MySQL schema")
    assert "## Table `authors`" in text and "## View `cheap_books`" in text
    assert "| id | int(11) auto_increment | no |  | PK |" in text
    assert "| author_id | int(11) | no |  | FK → authors.id |" in text
    assert "| price | decimal(8,2) | yes | 9.99 |  |" in text
    assert "| tags | text | yes |  |  |" in text
    assert "- (author_id) → authors(id) ON DELETE CASCADE" in text
    assert "- UNIQUE uq_books_title (author_id, title)" in text
    assert "- idx_books_price (price)" in text
    assert "- UNIQUE name (name)" in text


def test_schema_allow_list(ro_dsn: str) -> None:
    tools = {t.name: t for t in MySQLToolkit(ro_dsn, tables=["authors"]).tools()}
    text = ok(tools, "mysql_schema").as_text()
    assert "`authors`" in text and "`books`" not in text
    assert "books are not available" in err(tools, "mysql_schema", tables=["books"])


# ---------------------------------------------------------------- select


def test_select_values_and_parameters(ro: dict[str, Tool]) -> None:
    out = ok(ro, "mysql_select", query="SELECT id, title, price, tags, cover FROM books ORDER BY id")
    lines = out.as_text().splitlines()
    assert lines[0] == "| id | title | price | tags | cover |"
    assert lines[2] == "| 1 | Notes | 12.50 | math\\|history | NULL |"
    assert lines[3] == "| 2 | Computing Machinery | 20.00 | 50% off | base64:AP8= |"
    found = ok(
        ro,
        "mysql_select",
        query="SELECT title, '12:30' AS t, :n + 1 AS n FROM books WHERE tags LIKE '50%' AND author_id = :author",
        parameters=params(author=2, n=41),
    )
    assert found.data["rows"] == [["Computing Machinery", "12:30", 42]]
    born = ok(ro, "mysql_select", query="SELECT born FROM authors WHERE name = :n", parameters=params(n="Alan Turing"))
    assert born.data["rows"] == [["1912-06-23"]]
    injection = ok(
        ro,
        "mysql_select",
        query="SELECT count(*) FROM books WHERE title = :t",
        parameters=params(t="x' OR '1'='1"),
    )
    assert injection.data["rows"] == [[0]]
    assert "parameter(s) typo not used" in err(ro, "mysql_select", query="SELECT 1", parameters=params(typo=1))


def test_select_caps_rows_and_keeps_the_session_usable(ro: dict[str, Tool]) -> None:
    digits = "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 " + (
        "UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
    )
    query = f"SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d AS n FROM {digits} a, {digits} b, {digits} c, {digits} e"
    out = ok(ro, "mysql_select", query=query, max_rows=4)
    assert out.data["row_count"] == 4 and out.data["truncated"] is True
    assert "Showing the first 4 rows" in out.as_text()
    assert ok(ro, "mysql_select", query="SELECT 7 AS seven").data["rows"] == [[7]]


def test_select_errors_name_the_problem(ro: dict[str, Tool]) -> None:
    missing = err(ro, "mysql_select", query="SELECT * FROM nope")
    assert "(1146)" in missing and "nope' doesn't exist" in missing
    stacked = err(ro, "mysql_select", query="SELECT 1; SELECT 2")
    assert "(1064)" in stacked and "Send one statement per call." in stacked
    assert ok(ro, "mysql_select", query="SELECT 1 AS one").data["rows"] == [[1]]


SINGLE_ATTACKS = [
    "DELETE FROM books",
    "UPDATE books SET price = 0",
    "INSERT INTO books (author_id, title) VALUES (1, 'x')",
    "INSERT INTO books (author_id, title) SELECT 1, 'x' FROM DUAL",
    "REPLACE INTO authors (id, name) VALUES (1, 'Mallory')",
    "DELETE books FROM books JOIN authors ON authors.id = books.author_id",
    "WITH gone AS (SELECT id FROM books) DELETE FROM books WHERE id IN (SELECT id FROM gone)",
    "SELECT add_book('injected')",
    "DO add_book('injected')",
    "SET @x = add_book('injected')",
    "CALL purge_books()",
    "CALL drop_books()",
    "SELECT 1; DELETE FROM books",
    "/* only a comment */ DELETE FROM books -- trailing comment",
    "# hash comment\nDROP TABLE books",
    "DROP TABLE books",
    "DROP VIEW cheap_books",
    "TRUNCATE TABLE books",
    "RENAME TABLE books TO gone",
    "ALTER TABLE books ADD COLUMN hacked INT",
    "CREATE INDEX sneaky ON books (tags(3))",
    "CREATE TABLE sneaky (a INT)",
    "CREATE TEMPORARY TABLE sneaky (a INT)",
    "CREATE TABLE sneaky AS SELECT * FROM books",
    "LOAD DATA LOCAL INFILE '/etc/hostname' INTO TABLE books",
    "SELECT * FROM books FOR UPDATE",
]


@pytest.mark.parametrize("attack", SINGLE_ATTACKS)
def test_select_is_read_only_by_construction(
    ro: dict[str, Tool], ro_dsn: str, mariadb_server: MariaDBServer, attack: str
) -> None:
    before = snapshot(mariadb_server, ro_dsn)
    ro["mysql_select"].invoke({"query": attack})
    ro["mysql_select"].invoke({"query": "DELETE FROM authors"})
    assert snapshot(mariadb_server, ro_dsn) == before
    assert ok(ro, "mysql_select", query="SELECT count(*) FROM books").data["rows"] == [[3]]


SESSION_ATTACKS = [
    ["COMMIT", "DROP TABLE books"],
    ["ROLLBACK", "DELETE FROM books"],
    ["START TRANSACTION READ WRITE", "DELETE FROM books"],
    ["SET SESSION TRANSACTION READ WRITE", "DROP TABLE books"],
    ["SET SESSION TRANSACTION READ WRITE", "DELETE FROM books"],
    ["SET SESSION tx_read_only = 0", "TRUNCATE TABLE books"],
    ["SET autocommit = 0", "DELETE FROM books"],
    ["SET autocommit = 1", "DROP TABLE books"],
    ["PREPARE wipe FROM 'DROP TABLE books'", "EXECUTE wipe"],
    ["PREPARE wipe FROM 'DELETE FROM books'", "EXECUTE wipe"],
]


@pytest.mark.parametrize("calls", SESSION_ATTACKS, ids=lambda c: c[0][:40])
def test_select_state_from_one_call_cannot_unlock_the_next(
    ro: dict[str, Tool], ro_dsn: str, mariadb_server: MariaDBServer, calls: list[str]
) -> None:
    before = snapshot(mariadb_server, ro_dsn)
    for query in calls:
        ro["mysql_select"].invoke({"query": query})
    assert snapshot(mariadb_server, ro_dsn) == before
    message = err(ro, "mysql_select", query="DROP TABLE books")
    assert "(1792)" in message and "READ ONLY transaction" in message
    assert "use mysql_write to change data" in message


# ---------------------------------------------------------------- write


def test_write_commits_and_reports(my: dict[str, Tool], dsn: str, mariadb_server: MariaDBServer) -> None:
    out = ok(
        my,
        "mysql_write",
        query="INSERT INTO authors (name, born) VALUES (:name, :born)",
        parameters=params(name="Grace Hopper", born="1906-12-09"),
    )
    assert out.as_text() == "OK: 1 row affected." and out.data["rows_affected"] == 1
    updated = ok(
        my, "mysql_write", query="UPDATE books SET price = price * 2 WHERE author_id = :a", parameters=params(a=2)
    )
    assert updated.data["rows_affected"] == 2
    returning = ok(my, "mysql_write", query="DELETE FROM books WHERE id = 1 RETURNING id, title")
    assert returning.data["rows"] == [[1, "Notes"]]
    assert ok(my, "mysql_write", query="CREATE TABLE loans (id INT PRIMARY KEY)").as_text().startswith("OK")
    rows = snapshot(mariadb_server, dsn)
    assert (3, "Grace Hopper") == rows[0][2][:2]
    assert [r[3] for r in rows[1]] == [40, 30]
    assert ("loans", "BASE TABLE") in rows[2]
    assert ok(my, "mysql_select", query="SELECT count(*) FROM authors").data["rows"] == [[3]]


def test_write_errors_roll_back(my: dict[str, Tool], dsn: str, mariadb_server: MariaDBServer) -> None:
    before = snapshot(mariadb_server, dsn)
    assert "Duplicate entry 'Ada Lovelace'" in err(
        my, "mysql_write", query="INSERT INTO authors (name) VALUES ('Ada Lovelace')"
    )
    assert "foreign key constraint fails" in err(
        my, "mysql_write", query="INSERT INTO books (author_id, title) VALUES (99, 'x')"
    )
    assert "Send one statement per call." in err(my, "mysql_write", query="DELETE FROM books; DELETE FROM authors")
    assert snapshot(mariadb_server, dsn) == before
    ok(my, "mysql_write", query="DELETE FROM authors WHERE id = 2")
    assert ok(my, "mysql_select", query="SELECT count(*) FROM books").data["rows"] == [[1]]  # cascaded


# ---------------------------------------------------------------- credentials and connections


def test_password_never_leaks(mariadb_server: MariaDBServer, ro_dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    database = ro_dsn.rsplit("/", 1)[1]
    wrong = "Wr0ng-Pa55word!"
    kit = MySQLToolkit(mariadb_server.dsn(database, password=wrong))
    tools = {t.name: t for t in kit.tools()}
    for name, args in [
        ("mysql_select", {"query": "SELECT 1"}),
        ("mysql_schema", {}),
        ("mysql_write", {"query": "DO 1"}),
    ]:
        message = err(tools, name, **args)
        assert "Access denied for user" in message and wrong not in message and "Pa55" not in message
    assert wrong not in repr(kit) and mariadb_server.password not in repr(MySQLToolkit(ro_dsn))
    secret = mariadb_server.password
    refused = MySQLToolkit(f"mysql://toolfork_app:{quote(secret, safe='')}@127.0.0.1:1/x?connect_timeout=2")
    message = err({t.name: t for t in refused.tools()}, "mysql_select", query="SELECT 1")
    assert "Can't connect" in message and secret not in message and "S3cr3t" not in message
    with pytest.raises(ValueError) as info:
        MySQLToolkit(f"mysql://toolfork_app:{quote(secret, safe='')}@127.0.0.1:notaport/x")
    assert "S3cr3t" not in str(info.value) and "invalid port" in str(info.value)
    assert "S3cr3t" not in caplog.text and wrong not in caplog.text


def test_fork_child_opens_its_own_connection(kit: MySQLToolkit, my: dict[str, Tool]) -> None:
    query = {"query": "SELECT CONNECTION_ID()"}
    parent_connection = my["mysql_select"].invoke(query).data["rows"][0][0]

    def in_child() -> dict[str, Any]:
        out = my["mysql_select"].invoke(query)
        wrote = my["mysql_write"].invoke({"query": "INSERT INTO authors (name) VALUES ('child')"})
        return {"connection": out.data["rows"][0][0], "error": wrote.is_error, "opened": kit._reader.opened}

    child = in_forked_child(in_child)
    assert child["connection"] != parent_connection and child["opened"] == 1 and child["error"] is False
    again = my["mysql_select"].invoke(query)
    assert not again.is_error and again.data["rows"][0][0] == parent_connection
    assert ok(my, "mysql_select", query="SELECT count(*) FROM authors WHERE name = 'child'").data["rows"] == [[1]]


def test_reconnects_after_the_server_drops_the_connection(ro: dict[str, Tool], mariadb_server: MariaDBServer) -> None:
    connection = ok(ro, "mysql_select", query="SELECT CONNECTION_ID()").data["rows"][0][0]
    with mariadb_server.admin() as admin, admin.cursor() as cur:
        cur.execute(f"KILL {int(connection)}")
    outcomes = [ro["mysql_select"].invoke({"query": "SELECT CONNECTION_ID()"}) for _ in range(2)]
    assert not outcomes[-1].is_error
    assert outcomes[-1].data["rows"][0][0] != connection


def test_inside_the_forking_executor(kit: MySQLToolkit, my: dict[str, Tool]) -> None:
    assert_workers_open_their_own_connections(kit, my, "mysql", "SELECT CONNECTION_ID()")


# ---------------------------------------------------------------- state a read leaves, results it builds


def test_a_read_leaves_no_session_state_for_the_next_call(
    ro: dict[str, Tool], ro_dsn: str, mariadb_server: MariaDBServer
) -> None:
    # A user-level lock survives ROLLBACK: held by the toolkit's reader it would block others.
    assert ok(ro, "mysql_select", query="SELECT GET_LOCK('toolfork_test', 0)").data["rows"] == [[1]]
    other = pymysql.connect(**parse_mysql_dsn(ro_dsn))
    try:
        with other.cursor() as cur:
            cur.execute("SELECT IS_FREE_LOCK('toolfork_test')")
            assert cur.fetchone() == (1,)
    finally:
        other.close()
    # Session variables are not transactional in MySQL: a SET would stay for every later call.
    ok(ro, "mysql_select", query="SET SESSION sql_select_limit = 1")
    assert ok(ro, "mysql_select", query="SELECT id FROM books ORDER BY id").data["rows"] == [[1], [2], [3]]
    ok(ro, "mysql_select", query="SET SESSION character_set_results = 'latin1'")
    ok(ro, "mysql_select", query="SET @@session.max_sort_length = 4")
    assert ok(ro, "mysql_select", query="SELECT @@session.max_sort_length").data["rows"] != [[4]]
    assert "books" in ok(ro, "mysql_schema").as_text()


def test_a_result_of_many_large_rows_is_cut_at_the_byte_budget(ro_dsn: str) -> None:
    def attack() -> list[Any]:
        kit = MySQLToolkit(ro_dsn)
        select = {t.name: t for t in kit.tools()}["mysql_select"]
        # 10,000 rows of 5 MB each (50 GB), streamed by the server as they are read.
        out = select.invoke({"query": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000) "
                                      "SELECT x, REPEAT('x', 5000000) FROM c", "max_rows": 10_000})
        after = select.invoke({"query": "SELECT count(*) FROM books"})
        kit.close()
        return [out.data["row_count"] if out.data else out.as_text(), out.as_text()[-300:], after.data["rows"]]

    (rows, text, after), grown = in_bounded_child(attack)
    assert isinstance(rows, int) and 1 <= rows <= 10 and "would pass 50000000 bytes of data" in text, (rows, text)
    assert after == [[3]]
    assert grown < 400, f"peak RSS grew by {grown:.0f} MB"
