"""Arguments for a tool made up from its JSON Schema, the same every time: what ``TestModel`` sends
when it calls every tool without a script.

The smallest value each schema allows: a ``default``, a ``const`` or the first ``enum`` value when the
schema has one; else per type: 1 (or the minimum) for numbers, ``"a"`` (repeated to ``minLength``) for
strings, ``False``, one item (or ``minItems``) for arrays, and an object with its required
properties (``$ref`` into ``$defs`` followed, the first branch of ``anyOf``/``oneOf`` taken).
"""

from __future__ import annotations

import math
from typing import Any

_STRING_FORMATS = {"date": "2026-01-01", "date-time": "2026-01-01T00:00:00Z", "time": "00:00:00",
                   "email": "a@example.com", "uri": "https://example.com",
                   "uuid": "00000000-0000-4000-8000-000000000000"}


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    """The arguments object for a tool whose input schema is ``schema`` (an object schema)."""
    value = _value(schema, schema.get("$defs") or schema.get("definitions") or {}, depth=0)
    return value if isinstance(value, dict) else {}


def _value(schema: Any, defs: dict[str, Any], depth: int) -> Any:
    if not isinstance(schema, dict) or depth > 20:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _value(defs.get(ref.rsplit("/", 1)[-1], {}), defs, depth + 1)
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = [b for b in schema.get(key) or () if not (isinstance(b, dict) and b.get("type") == "null")]
        if branches:
            return _value(branches[0], defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") or {}
        return {name: _value(properties.get(name, {}), defs, depth + 1) for name in schema.get("required") or ()}
    if kind == "array":
        count = 0 if schema.get("maxItems") == 0 else max(1, int(schema.get("minItems", 1)))
        return [_value(schema.get("items", {}), defs, depth + 1) for _ in range(count)]
    if kind == "string":
        return _STRING_FORMATS.get(schema.get("format", ""), "a" * max(1, int(schema.get("minLength", 1))))
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "boolean":
        return False
    return None


def _number(schema: dict[str, Any], integer: bool) -> int | float:
    low = schema.get("minimum")
    exclusive = schema.get("exclusiveMinimum")
    if isinstance(exclusive, (int, float)) and not isinstance(exclusive, bool):
        low = exclusive + 1 if integer else exclusive + 0.5
    value: float = 1 if low is None else low
    high = schema.get("maximum")
    if isinstance(high, (int, float)) and value > high:
        value = high
    return math.ceil(value) if integer else float(value)


__all__ = ["arguments_for"]
