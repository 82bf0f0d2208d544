"""Rewording JSON Schema validation errors (from ``jsonschema-rs``) into messages a model can act on.

The engine decides validity; this module only says why, in the same words as the pydantic-backed
tools (``Input should be a string (got 1)``, ``missing required field``, ``unexpected field``), at the
path of the offending value. For ``anyOf``/``oneOf`` the engine reports each branch's errors; a
branch ruled out by its shape (wrong type, or a mismatched ``const``/``enum`` tag one level down, as in
a discriminated union) is dropped, and when one branch remains its own errors are reported, so a
tagged union says ``shape.r: missing required field`` rather than "matches no form".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from toolfork.tools.validation import format_loc, short_repr

Path = tuple[str | int, ...]
# (instance path, message, kind, schema location of the failing keyword's schema object)
Found = tuple[Path, str, str, tuple[Any, ...]]

_ARTICLE = {"integer": "an integer", "object": "an object", "array": "an array", "null": "null"}


def _type_words(types: Sequence[str]) -> str:
    return " or ".join(_ARTICLE.get(t, f"a {t}") for t in types)


def _one_of_words(values: Sequence[Any]) -> str:
    shown = [short_repr(v) for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, 1 is 1.0, [1] equals (1,)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def node_at(root: Any, path: Sequence[Any]) -> Any:
    """The part of ``root`` at ``path`` (keys and indexes), or None when the path leaves it."""
    node = root
    for part in path:
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return None
    return node


# Errors said in one line from the error's own fields: keyword -> (message template, error code). The
# template may use ``k`` (the error kind: its limit, pattern, ...), ``got`` (" (got <value>)") and ``n``
# (how many items or fields the value has).
_PLAIN: dict[str, tuple[str, str]] = {
    "minLength": ("String should have at least {k.limit} characters{got}", "min_length"),
    "pattern": ("String should match pattern {k.pattern!r}{got}", "pattern"),
    "minimum": ("Input should be greater than or equal to {k.limit}{got}", "minimum"),
    "maximum": ("Input should be less than or equal to {k.limit}{got}", "maximum"),
    "exclusiveMinimum": ("Input should be greater than {k.limit}{got}", "exclusive_minimum"),
    "exclusiveMaximum": ("Input should be less than {k.limit}{got}", "exclusive_maximum"),
    "multipleOf": ("Input should be a multiple of {k.multiple_of}{got}", "multiple_of"),
    "minItems": ("List should have at least {k.limit} items (got {n})", "min_items"),
    "maxItems": ("List should have at most {k.limit} items (got {n})", "max_items"),
    "minProperties": ("Object should have at least {k.limit} fields (got {n})", "min_properties"),
    "maxProperties": ("Object should have at most {k.limit} fields (got {n})", "max_properties"),
    "not": ("Input should not match the excluded schema{got}", "not"),
    "format": ("String should be a valid {k.format}{got}", "format"),
}



_ENGINE_NUMBER = re.compile(r"\+?[0-9]+")  # the keys the engine reads as a position (Rust's usize)
_NOWHERE = object()
_SEARCH_STEPS = 500


def _keys_read_as(part: int, node: Mapping[Any, Any]) -> list[str]:
    """The keys of ``node`` that the engine could have written as ``part``: ``"0"``, and also ``"00"``
    or ``"+0"``, which it reads as the same number. The exact text comes first."""
    exact = str(part)
    found = [exact] if exact in node else []
    return found + [k for k in node if isinstance(k, str) and k != exact and _ENGINE_NUMBER.fullmatch(k)
                    and int(k) == part]


def keyed_path(path: Any, instance: Any, found: Any = _NOWHERE) -> Path:
    """The engine's path with object keys as str and array positions as int.

    The engine writes a key that looks like a number as an int (``{"0": ...}`` gives ``0``), which
    would print as ``[0]``, an array position; walking the instance tells the two apart. It also loses
    the key's text: ``"00"`` and ``"0"`` both come back as ``0``. When more than one key could be
    meant, the one whose value is ``found`` (the failing value the engine reports) is named; the
    search gives up after a few hundred steps (arguments built to be ambiguous at every level), naming
    the exact text first."""
    parts = list(path)
    steps = _SEARCH_STEPS

    def walk(i: int, node: Any) -> tuple[Path, Any]:
        """(the path from ``parts[i]`` on, the value it leads to: None once it leaves the instance)."""
        nonlocal steps
        if i == len(parts):
            return (), node
        part = parts[i]
        steps -= 1
        if isinstance(node, Mapping):
            keys = _keys_read_as(part, node) if type(part) is int else []
            first: tuple[Path, Any] | None = None
            for key in (keys if steps > 0 else keys[:1]) or [str(part)]:
                rest, value = walk(i + 1, node.get(key))
                if found is _NOWHERE or json_equal(value, found):
                    return (key, *rest), value
                first = first or ((key, *rest), value)
            assert first is not None  # the loop ran at least once
            return first
        if isinstance(node, (list, tuple)) and type(part) is int and -len(node) <= part < len(node):
            rest, value = walk(i + 1, node[part])
            return (part, *rest), value
        return tuple(parts[i:]), None

    return walk(0, instance)[0]


class Translator:
    """Turns one call's engine errors into ``(path, message, kind)``; ``root`` is the compiled schema
    (to read a bound the error does not carry), ``value`` the arguments (to count an array's items)."""

    def __init__(self, root: Any, value: Any) -> None:
        self.root = root
        self.value = value

    def all(self, errors: Any) -> list[tuple[Path, str, str]]:
        found: list[Found] = []
        for err in errors:
            found.extend(self.one(err))
        # dict: the same complaint reached twice (two $ref paths to one schema) is said once.
        return list(dict.fromkeys((p, m, k) for p, m, k, _ in _drop_shadowed(found)))

    def one(self, err: Any) -> list[Found]:
        kind = err.kind
        name = kind.name
        path: Path = keyed_path(err.instance_path, self.value, err.instance)
        spath = tuple(err.schema_path)
        where = spath[:-1]
        inst = err.instance
        got = f" (got {short_repr(inst)})"

        def one_error(msg: str, code: str, at: Path = path) -> list[Found]:
            return [(at, msg, code, where)]

        plain = _PLAIN.get(name)
        if plain is not None:
            template, code = plain
            count = len(inst) if isinstance(inst, (list, Mapping)) else 0
            return one_error(template.format(k=kind, got=got, n=count), code)
        if name == "type":
            return one_error(f"Input should be {_type_words(list(kind.types))}{got}", "type")
        if name == "enum":
            options = list(kind.options)
            if not options:
                return one_error(f"no value is allowed here: the schema's enum is empty{got}", "enum")
            return one_error(f"Input should be {_one_of_words(options)}{got}", "enum")
        if name == "const":
            return one_error(f"Input should be {short_repr(kind.expected_value)}{got}", "const")
        if name == "required":
            return self._required(kind.property, path, spath, inst)
        if name in ("additionalProperties", "unevaluatedProperties"):
            return [((*path, key), "unexpected field", "extra", where) for key in kind.unexpected]
        if name == "unevaluatedItems":
            shown = ", ".join(str(x) for x in kind.unexpected)  # the items themselves, as JSON text
            return one_error(f"List has items that no schema here allows (got {shown})", "extra_items")
        if name == "additionalItems":
            n = len(inst) if isinstance(inst, list) else "more"
            return one_error(f"List should have at most {kind.limit} items (got {n})", "max_items")
        if name == "falseSchema":
            return self._false(path, spath, inst, got)
        if name == "maxLength":
            n = len(inst) if isinstance(inst, str) else inst
            return one_error(f"String should have at most {kind.limit} characters (got {n})", "max_length")
        if name == "uniqueItems":
            return self._unique(path, inst, where)
        if name == "contains":
            return self._contains(path, spath, where)
        if name == "propertyNames":
            inner = kind.error
            key = inner.instance
            reasons = "; ".join(m for _, m, _, _ in self.one(inner)) or str(inner.message)
            at = (*path, key) if isinstance(key, str) else path
            return one_error(f"property name not allowed: {reasons}", "property_name", at)
        if name in ("anyOf", "oneOf"):
            branches = [[f for e in branch for f in self.one(e)] for branch in kind.context]
            return self._union(path, branches, where, multiple=type(kind).__name__ == "OneOfMultipleValid")
        return one_error(str(err.message), name or "invalid")

    # -- the cases that need more than the error itself -------------------------------------------
    def _required(self, prop: str, path: Path, spath: tuple[Any, ...], inst: Any) -> list[Found]:
        msg = "missing required field"
        if spath and spath[-1] in ("dependentRequired", "dependencies"):
            deps = node_at(self.root, spath)
            if isinstance(deps, Mapping) and isinstance(inst, Mapping):
                for key, needed in deps.items():
                    if key in inst and isinstance(needed, list) and prop in needed:
                        msg += f" (required with {key!r})"
                        break
        return [((*path, prop), msg, "missing", spath[:-1])]

    def _false(self, path: Path, spath: tuple[Any, ...], inst: Any, got: str) -> list[Found]:
        if path and isinstance(path[-1], int) and spath and spath[-1] in ("items", "additionalItems"):
            # ``items: false`` after ``prefixItems``: the list is too long, said once at the list.
            array = node_at(self.value, path[:-1])
            parent = node_at(self.root, spath[:-1])
            prefix = parent.get("prefixItems", parent.get("items")) if isinstance(parent, Mapping) else None
            if isinstance(array, (list, tuple)) and isinstance(prefix, list):
                return [(path[:-1], f"List should have at most {len(prefix)} items (got {len(array)})",
                         "max_items", spath[:-1])]
        return [(path, f"no value is allowed here{got}", "false", spath[:-1])]

    def _unique(self, path: Path, inst: Any, where: tuple[Any, ...]) -> list[Found]:
        if isinstance(inst, list):
            for i in range(len(inst)):
                if any(json_equal(inst[i], inst[j]) for j in range(i)):
                    return [((*path, i), f"duplicate item (got {short_repr(inst[i])})", "unique", where)]
        return [(path, "List should have unique items", "unique", where)]

    def _contains(self, path: Path, spath: tuple[Any, ...], where: tuple[Any, ...]) -> list[Found]:
        keyword = spath[-1] if spath else "contains"
        parent = node_at(self.root, spath[:-1])
        bound = parent.get(keyword) if isinstance(parent, Mapping) else None
        if keyword == "minContains" and isinstance(bound, int):
            msg = f"List should contain at least {bound} matching item{'s' if bound != 1 else ''}"
        elif keyword == "maxContains" and isinstance(bound, int):
            msg = f"List should contain at most {bound} matching item{'s' if bound != 1 else ''}"
        else:
            msg = "List should contain at least one matching item"
        return [(path, msg, "contains", where)]

    def _union(self, path: Path, branches: list[list[Found]], where: tuple[Any, ...],
               multiple: bool) -> list[Found]:
        if multiple:
            n = sum(1 for b in branches if not b)
            return [(path, f"Input matches more than one of the allowed forms ({n}); it must match exactly one",
                     "one_of", where)]

        def ruled_out(found: list[Found]) -> bool:
            return any((p == path and kind == "type") or (len(p) == len(path) + 1 and kind in ("const", "enum"))
                       for p, _, kind, _ in found)

        fitting = [b for b in branches if not ruled_out(b)]
        if len(fitting) == 1 and fitting[0]:
            return _drop_shadowed(fitting[0])
        reasons = []
        for found in branches:
            reasons.append("; ".join(f"{format_loc(p) or 'value'}: {m}" if p != path else m
                                     for p, m, _, _ in _drop_shadowed(found)))
        return [(path, "Input does not match any allowed form: " + " | ".join(dict.fromkeys(reasons)),
                 "any_of", where)]


def _drop_shadowed(found: list[Found]) -> list[Found]:
    """A wrong type says it all: other complaints of the same schema object about the same value
    (``enum``, ``const``, bounds) are dropped, as a person would not list them."""
    typed = {(p, w) for p, _, kind, w in found if kind == "type"}
    if not typed:
        return found
    return [f for f in found if f[2] == "type" or (f[0], f[3]) not in typed]


def non_json_path(value: Any, path: Path = ()) -> tuple[Path, Any] | None:
    """Where ``value`` holds something JSON cannot (a date, a set, an object), for a clear message."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return (*path, str(key)), key
            found = non_json_path(item, (*path, key))
            if found is not None:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = non_json_path(item, (*path, i))
            if found is not None:
                return found
        return None
    return path, value


__all__ = ["Translator", "json_equal", "keyed_path", "node_at", "non_json_path"]
