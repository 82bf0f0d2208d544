"""Turning validation failures into messages a model can act on.

pydantic's raw error locations contain union-member tags (``('x', 'int')``) and its messages say
"Field required" / "Extra inputs are not permitted"; a model does better with ``x: missing required
argument`` and ``c: unexpected argument (valid arguments: a, b)``. This module does that rewording,
once, for both the pydantic validators and the raw JSON Schema validator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from toolfork.tools.schema import resolve_ref

_REPR_LIMIT = 60


def short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


def format_loc(parts: Sequence[str | int]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _field_path(loc: Sequence[Any], value: Any, last_is_key: bool) -> list[str | int]:
    """Keep the parts of a pydantic ``loc`` that are real keys/indexes of the input, dropping the tags
    pydantic inserts for union members and validator wrappers (``int``, ``function-after[...]``)."""
    path: list[str | int] = []
    for i, part in enumerate(loc):
        is_last = i == len(loc) - 1
        if isinstance(value, Mapping) and part in value:
            path.append(part)
            value = value[part]
        elif isinstance(value, (list, tuple)) and isinstance(part, int) and -len(value) <= part < len(value):
            path.append(part)
            value = value[part]
        elif is_last and last_is_key:
            path.append(part)  # a missing key: not in the input by definition
        elif isinstance(part, int):
            path.append(part)
        # else: a tag, skipped
    return path


# pydantic's words for an unknown key: models and TypedDicts / dataclasses.
_EXTRA_KINDS = ("extra_forbidden", "unexpected_keyword_argument")


def pydantic_errors(
    exc: ValidationError, value: Any, argument_names: Sequence[str] | None = None,
    nested_extra: bool = True,
) -> list[dict[str, Any]]:
    """``[{"loc", "msg", "type"}]`` from a pydantic error; same-path errors (the members of a union)
    are merged into one "A or B" message. ``nested_extra=False`` leaves out unknown keys below the top
    level, for callers that check those themselves (``ClosedObjects``): which nested objects pydantic
    closes depends on its version, toolfork's rule does not."""
    merged: dict[str, dict[str, Any]] = {}
    for err in exc.errors(include_url=False):
        kind = err.get("type", "")
        path = _field_path(err.get("loc", ()), value, kind in ("missing", *_EXTRA_KINDS))
        top = len(path) == 1
        if kind in _EXTRA_KINDS:
            if not nested_extra and not top:
                continue
            kind = "extra_forbidden"
        if kind == "missing":
            msg = "missing required argument" if top else "missing required field"
        elif kind == "extra_forbidden":
            msg = "unexpected argument" if top else "unexpected field"
            if top and argument_names is not None:
                msg += f" (valid arguments: {', '.join(argument_names) or 'none'})"
        else:
            msg = str(err.get("msg", "invalid value"))
        loc = format_loc(path)
        entry = merged.get(loc)
        if entry is None:
            entry = merged[loc] = {"loc": loc, "msg": msg, "type": kind, "_input": err.get("input"),
                                   "_show": kind not in ("missing", "extra_forbidden")}
        elif msg not in entry["msg"].split(" or "):
            entry["msg"] += f" or {msg}"
    out = []
    for entry in merged.values():
        show = entry.pop("_show")
        got = entry.pop("_input")
        if show:
            entry["msg"] += f" (got {short_repr(got)})"
        out.append(entry)
    return out


def strip_optional_nulls(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> Any:
    """Drop ``null`` values of optional properties that do not accept null.

    OpenAI strict mode makes every property required and optional ones nullable, so a model in strict
    mode sends ``"b": null`` to mean "not given"; dropping the key lets the default apply. Walks
    objects, arrays and ``$ref``; unions are left alone (ambiguous)."""
    if isinstance(schema.get("$ref"), str):
        try:
            schema = {**resolve_ref(root, schema["$ref"]), **{k: v for k, v in schema.items() if k != "$ref"}}
        except Exception:
            return value
    if "properties" not in schema and "items" not in schema:
        # A union (Optional[Model] is anyOf [Model, null]): follow the one branch of the value's shape.
        shape = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else None
        branches = [b for key in ("anyOf", "oneOf") for b in schema.get(key, []) if isinstance(b, dict)]
        fitting = [b for b in branches if shape is not None and _shape(b, root) == shape]
        if len(fitting) == 1:
            return strip_optional_nulls(value, fitting[0], root)
        return value
    if isinstance(value, dict):
        props = schema.get("properties")
        if not isinstance(props, dict):
            return value
        required = set(schema.get("required", []))
        out = {}
        for key, item in value.items():
            sub = props.get(key)
            if not isinstance(sub, dict):
                out[key] = item
            elif item is None:
                if key in required or _accepts_null(sub, root):
                    out[key] = item
            else:
                out[key] = strip_optional_nulls(item, sub, root)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [strip_optional_nulls(v, schema["items"], root) for v in value]
    return value


def _shape(schema: dict[str, Any], root: dict[str, Any]) -> str | None:
    if isinstance(schema.get("$ref"), str):
        try:
            schema = resolve_ref(root, schema["$ref"])
        except Exception:
            return None
    t = schema.get("type")
    if t == "object" or "properties" in schema:
        return "object"
    if t == "array" or "items" in schema:
        return "array"
    return None


def _accepts_null(schema: dict[str, Any], root: dict[str, Any]) -> bool:
    if isinstance(schema.get("$ref"), str):
        try:
            schema = resolve_ref(root, schema["$ref"])
        except Exception:
            return True
    t = schema.get("type")
    if t is None and not any(k in schema for k in ("anyOf", "oneOf", "enum", "const", "allOf")):
        return True  # an unconstrained schema accepts null
    if t == "null" or (isinstance(t, list) and "null" in t) or schema.get("nullable") is True:
        return True
    if "enum" in schema and None in schema["enum"]:
        return True
    return any(isinstance(s, dict) and _accepts_null(s, root)
               for key in ("anyOf", "oneOf") for s in schema.get(key, []))


def has_none(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return any(has_none(v) for v in value.values())
    if isinstance(value, list):
        return any(has_none(v) for v in value)
    return False


__all__ = ["format_loc", "has_none", "pydantic_errors", "short_repr", "strip_optional_nulls"]
