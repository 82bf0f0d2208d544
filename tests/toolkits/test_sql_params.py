"""Placeholder binding and error redaction, the pure parts shared by every SQL toolkit."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolfork.toolkits.sql import ParameterError, SQLiteToolkit, parse_mysql_dsn
from toolfork.toolkits.sql.params import bind, scan


def names(sql: str, dialect: str = "postgresql") -> list[str]:
    return [name for _, _, name in scan(sql, dialect)]  # type: ignore[arg-type]


def test_placeholders_are_found_outside_literals_comments_and_casts() -> None:
    assert names("SELECT * FROM t WHERE a = :a AND b = :b_2") == ["a", "b_2"]
    assert names("SELECT ':no', \":no\", x::int, :yes -- :no\n/* :no */ FROM t") == ["yes"]
    assert names("SELECT $$ :no $$, $tag$ :no $tag$, :yes") == ["yes"]
    assert names("SELECT E'it\\'s :no', 'it''s :no', :yes") == ["yes"]
    assert names("SELECT arr[1:2], :yes") == ["yes"]
    assert names("SELECT `:no`, '\\' :no', :yes # :no", "mysql") == ["yes"]
    assert names("SELECT 5--1, :yes", "mysql") == ["yes"]  # MySQL needs a space after -- for a comment
    assert names("SELECT [:no], :yes", "sqlite") == ["yes"]
    assert names("SET @a := 1") == []


def test_bind_rewrites_for_pyformat_drivers_and_escapes_percent() -> None:
    sql, params = bind("SELECT * FROM t WHERE name LIKE '5%' AND id = :id", {"id": 3}, "postgresql")
    assert sql == "SELECT * FROM t WHERE name LIKE '5%%' AND id = %(id)s" and params == {"id": 3}
    same, none = bind("SELECT '100%'", None, "mysql")
    assert same == "SELECT '100%'" and none is None  # no placeholders: left untouched, no params
    sqlite_sql, sqlite_params = bind("SELECT :a", {"a": 1}, "sqlite")
    assert sqlite_sql == "SELECT :a" and sqlite_params == {"a": 1}
    repeated, _ = bind("SELECT :a, :a", {"a": 1}, "mysql")
    assert repeated == "SELECT %(a)s, %(a)s"


def test_bind_reports_missing_and_unused_parameters() -> None:
    with pytest.raises(ParameterError, match=r"missing value for placeholder\(s\) :a, :b"):
        bind("SELECT :b, :a", None, "sqlite")
    with pytest.raises(ParameterError, match=r"parameter\(s\) z not used"):
        bind("SELECT :a", {"a": 1, "z": 2}, "postgresql")


def test_redaction_of_passwords_in_any_form(tmp_path: Path) -> None:
    kit = SQLiteToolkit(tmp_path / "x.db")
    kit.secrets = lambda: ["p@ss word"]  # type: ignore[method-assign]
    text = kit.redact("failed for postgresql://bob:p%40ss%20word@db:5432/x and password=hunter2; p@ss word")
    assert "p@ss" not in text and "p%40ss" not in text and "hunter2" not in text
    assert "postgresql://bob:***@db:5432/x" in text and "password=***" in text


def test_parse_mysql_dsn() -> None:
    parsed = parse_mysql_dsn("mysql://bob:p%40ss%2Fw@db.local:3307/shop?charset=utf8&connect_timeout=3")
    assert parsed == {
        "host": "db.local",
        "port": 3307,
        "user": "bob",
        "password": "p@ss/w",
        "database": "shop",
        "charset": "utf8",
        "connect_timeout": 3,
    }
    assert parse_mysql_dsn("mariadb://u@/db?unix_socket=/run/m.sock") == {
        "user": "u",
        "database": "db",
        "unix_socket": "/run/m.sock",
    }
    with pytest.raises(ValueError, match="must start with"):
        parse_mysql_dsn("postgres://u:p@h/db")
    with pytest.raises(ValueError, match="invalid port"):
        parse_mysql_dsn("mysql://u:secret@h:notaport/db")
    with pytest.raises(ValueError, match="unsupported option 'sslmode'"):
        parse_mysql_dsn("mysql://u:secret@h/db?sslmode=x")
