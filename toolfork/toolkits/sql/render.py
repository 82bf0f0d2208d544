"""What the model reads: schemas and result sets as compact Markdown, values as JSON-safe data."""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Column:
    name: str
    type: str
    nullable: bool
    default: str | None = None
    primary_key: bool = False
    extra: str = ""


@dataclass
class ForeignKey:
    columns: list[str]
    ref_table: str
    ref_columns: list[str]
    on_delete: str | None = None
    on_update: str | None = None
    name: str | None = None


@dataclass
class Index:
    name: str
    columns: list[str]
    unique: bool = False


@dataclass
class Table:
    name: str
    kind: str = "table"  # table | view | materialized view | foreign table
    columns: list[Column] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    foreign_keys: list[ForeignKey] = field(default_factory=list)
    indexes: list[Index] = field(default_factory=list)


def _cell_md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "\\n")


def schema_markdown(title: str, tables: Sequence[Table], missing: Sequence[str] = ()) -> str:
    """One section per table: columns, keys, references and indexes, in the order a model needs them."""
    out = [f"# {title}", ""]
    if not tables:
        out.append("No tables.")
    for table in tables:
        out.append(f"## {table.kind.capitalize()} `{table.name}`")
        out.append("")
        out.append("| Column | Type | Null | Default | Key |")
        out.append("|---|---|---|---|---|")
        fk_of = {}
        for fk in table.foreign_keys:
            if len(fk.columns) == 1:
                fk_of[fk.columns[0]] = f"FK → {fk.ref_table}.{fk.ref_columns[0] if fk.ref_columns else '?'}"
        for col in table.columns:
            keys = []
            if col.name in table.primary_key or col.primary_key:
                keys.append("PK")
            if col.name in fk_of:
                keys.append(fk_of[col.name])
            default = "" if col.default is None else _cell_md(col.default)
            type_text = _cell_md(col.type + (f" {col.extra}" if col.extra else "")) or "(any)"
            out.append(
                f"| {_cell_md(col.name)} | {type_text} | {'yes' if col.nullable else 'no'} | {default} | "
                f"{', '.join(keys)} |"
            )
        out.append("")
        if table.primary_key:
            out.append(f"Primary key: ({', '.join(table.primary_key)})")
        if table.foreign_keys:
            out.append("Foreign keys:")
            for fk in table.foreign_keys:
                actions = ""
                if fk.on_delete and fk.on_delete.upper() not in ("NO ACTION", ""):
                    actions += f" ON DELETE {fk.on_delete.upper()}"
                if fk.on_update and fk.on_update.upper() not in ("NO ACTION", ""):
                    actions += f" ON UPDATE {fk.on_update.upper()}"
                out.append(f"- ({', '.join(fk.columns)}) → {fk.ref_table}({', '.join(fk.ref_columns)}){actions}")
        if table.indexes:
            out.append("Indexes:")
            for idx in table.indexes:
                unique = "UNIQUE " if idx.unique else ""
                out.append(f"- {unique}{idx.name} ({', '.join(idx.columns)})")
        out.append("")
    if missing:
        out.append(f"Not found: {', '.join(missing)}")
    return "\n".join(out).rstrip() + "\n"


def json_value(value: Any, max_chars: int) -> Any:
    """A JSON-safe, size-bounded version of a database value."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if len(raw) <= 64:
            return "base64:" + base64.b64encode(raw).decode("ascii")
        return f"<{len(raw)} bytes>"
    if isinstance(value, (dict, list, tuple)):
        text = json.dumps(value, default=str, ensure_ascii=False)
    else:
        text = str(value)
    if len(text) > max_chars:
        return text[:max_chars] + f"…[{len(text)} chars]"
    return text


def _md_value(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    return _cell_md(str(value))


def rows_markdown(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table of already JSON-safe values."""
    if not columns:
        return ""
    header = "| " + " | ".join(_cell_md(c) for c in columns) + " |"
    rule = "|" + "---|" * len(columns)
    body = ["| " + " | ".join(_md_value(v) for v in row) + " |" for row in rows]
    return "\n".join([header, rule, *body])
