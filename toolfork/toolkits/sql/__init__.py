"""SQL toolkits: schema, read-only select and write tools for SQLite, PostgreSQL and MySQL/MariaDB.

The PostgreSQL and MySQL drivers are optional extras and are imported only when their toolkit is
constructed.
"""

from .base import QueryResult, SQLParameter, SQLToolkit
from .mysql import MySQLToolkit, parse_mysql_dsn
from .params import ParameterError
from .postgresql import PostgreSQLToolkit
from .sqlite import SQLiteToolkit

__all__ = [
    "MySQLToolkit",
    "ParameterError",
    "PostgreSQLToolkit",
    "QueryResult",
    "SQLParameter",
    "SQLToolkit",
    "SQLiteToolkit",
    "parse_mysql_dsn",
]
