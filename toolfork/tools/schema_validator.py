"""A small JSON Schema validator for tools described by raw schemas (MCP servers, other SDKs).

Why not pydantic: a raw schema has no Python types to build a model from faithfully (anyOf/oneOf,
``$ref`` cycles, ``additionalProperties`` schemas), and the ``jsonschema`` package is not a core
dependency. This covers the vocabulary tool schemas use in practice (types, enum/const, objects,
arrays, combinators, local ``$ref``, string/number/array bounds) and reports every failing path in the
same words as the pydantic-backed tools. It does not coerce: ``"5"`` is not an integer here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from toolfork.tools.errors import ToolDefinitionError
from toolfork.tools.schema import resolve_ref, subschemas
from toolfork.tools.validation import format_loc, short_repr

Path = tuple[str | int, ...]

_ARTICLE = {"integer": "an integer", "object": "an object", "array": "an array"}


def _is_type(value: Any, t: str) -> bool:
    if t == "string":
        return isinstance(value, str)
    if t == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "null":
        return value is None
    if t == "array":
        return isinstance(value, (list, tuple))
    if t == "object":
        return isinstance(value, Mapping)
    return True  # unknown type names do not constrain


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, [1] equals (1,)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _one_of_words(values: list[Any]) -> str:
    shown = [short_repr(v) for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


class JsonSchemaValidator:
    """Checks values against one raw schema; built once per tool, every ``$ref`` checked up front."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.root: dict[str, Any] = dict(schema)
        self._patterns: dict[str, re.Pattern[str]] = {}
        self._check_definition(self.root)

    def _check_definition(self, schema: dict[str, Any]) -> None:
        stack = [schema]
        while stack:
            node = stack.pop()
            ref = node.get("$ref")
            if ref is not None:
                if not isinstance(ref, str):
                    raise ToolDefinitionError(f"$ref must be a string, got {ref!r}")
                resolve_ref(self.root, ref)
            t = node.get("type")
            if t is not None and not isinstance(t, (str, list)):
                raise ToolDefinitionError(f"'type' must be a string or a list, got {t!r}")
            for key in ("pattern",):
                if isinstance(node.get(key), str):
                    try:
                        self._pattern(node[key])
                    except re.error as exc:
                        raise ToolDefinitionError(f"bad regular expression {node[key]!r}: {exc}") from None
            if "enum" in node and not isinstance(node["enum"], list):
                raise ToolDefinitionError(f"'enum' must be a list, got {node['enum']!r}")
            stack.extend(subschemas(node))

    def _pattern(self, pattern: str) -> re.Pattern[str]:
        compiled = self._patterns.get(pattern)
        if compiled is None:
            compiled = self._patterns[pattern] = re.compile(pattern)
        return compiled

    # -- public ---------------------------------------------------------------------------------
    def errors(self, value: Any, argument_names: list[str] | None = None) -> list[dict[str, Any]]:
        out: list[tuple[Path, str, str]] = []
        self._check(value, self.root, (), out)
        result = []
        for path, msg, kind in out:
            if kind == "extra" and len(path) == 1:
                msg = "unexpected argument"
                if argument_names is not None:
                    msg += f" (valid arguments: {', '.join(argument_names) or 'none'})"
            elif kind == "missing" and len(path) == 1:
                msg = "missing required argument"
            result.append({"loc": format_loc(path), "msg": msg, "type": kind})
        return result

    def is_valid(self, value: Any) -> bool:
        out: list[tuple[Path, str, str]] = []
        self._check(value, self.root, (), out)
        return not out

    # -- the walk -------------------------------------------------------------------------------
    def _check(self, value: Any, schema: Any, path: Path, out: list[tuple[Path, str, str]]) -> None:
        if schema is True or schema == {}:
            return
        if schema is False:
            out.append((path, f"no value is allowed here (got {short_repr(value)})", "false"))
            return
        if not isinstance(schema, dict):
            return
        ref = schema.get("$ref")
        if isinstance(ref, str):
            self._check(value, resolve_ref(self.root, ref), path, out)
        if value is None and schema.get("nullable") is True:
            return
        t = schema.get("type")
        if t is not None:
            types = t if isinstance(t, list) else [t]
            if not any(_is_type(value, x) for x in types):
                words = " or ".join(_ARTICLE.get(x, f"a {x}" if x != "null" else "null") for x in types)
                out.append((path, f"Input should be {words} (got {short_repr(value)})", "type"))
                return
        if "enum" in schema and not any(_json_equal(value, e) for e in schema["enum"]):
            out.append((path, f"Input should be {_one_of_words(schema['enum'])} (got {short_repr(value)})",
                        "enum"))
            return
        if "const" in schema and not _json_equal(value, schema["const"]):
            out.append((path, f"Input should be {short_repr(schema['const'])} (got {short_repr(value)})",
                        "const"))
            return
        if isinstance(value, str):
            self._check_string(value, schema, path, out)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self._check_number(value, schema, path, out)
        elif isinstance(value, (list, tuple)):
            self._check_array(value, schema, path, out)
        elif isinstance(value, Mapping):
            self._check_object(value, schema, path, out)
        self._check_combinators(value, schema, path, out)

    def _check_string(self, value: str, s: dict[str, Any], path: Path, out: list[Any]) -> None:
        if isinstance(s.get("minLength"), int) and len(value) < s["minLength"]:
            out.append((path, f"String should have at least {s['minLength']} characters "
                              f"(got {short_repr(value)})", "min_length"))
        if isinstance(s.get("maxLength"), int) and len(value) > s["maxLength"]:
            out.append((path, f"String should have at most {s['maxLength']} characters "
                              f"(got {len(value)})", "max_length"))
        if isinstance(s.get("pattern"), str) and not self._pattern(s["pattern"]).search(value):
            out.append((path, f"String should match pattern {s['pattern']!r} (got {short_repr(value)})",
                        "pattern"))

    def _check_number(self, value: float, s: dict[str, Any], path: Path, out: list[Any]) -> None:
        got = f" (got {short_repr(value)})"
        lo, hi = s.get("minimum"), s.get("maximum")
        xlo, xhi = s.get("exclusiveMinimum"), s.get("exclusiveMaximum")
        if xlo is True:  # draft 4: a flag on minimum
            xlo, lo = lo, None
        if xhi is True:
            xhi, hi = hi, None
        if lo is not None and _num(lo) and value < lo:
            out.append((path, f"Input should be greater than or equal to {lo}{got}", "minimum"))
        if hi is not None and _num(hi) and value > hi:
            out.append((path, f"Input should be less than or equal to {hi}{got}", "maximum"))
        if xlo is not None and _num(xlo) and value <= xlo:
            out.append((path, f"Input should be greater than {xlo}{got}", "exclusive_minimum"))
        if xhi is not None and _num(xhi) and value >= xhi:
            out.append((path, f"Input should be less than {xhi}{got}", "exclusive_maximum"))
        m = s.get("multipleOf")
        if m is not None and _num(m) and m > 0:
            q = value / m
            if not math.isfinite(q) or abs(q - round(q)) > 1e-9:
                out.append((path, f"Input should be a multiple of {m}{got}", "multiple_of"))

    def _check_array(self, value: list[Any] | tuple[Any, ...], s: dict[str, Any], path: Path,
                     out: list[Any]) -> None:
        n = len(value)
        if isinstance(s.get("minItems"), int) and n < s["minItems"]:
            out.append((path, f"List should have at least {s['minItems']} items (got {n})", "min_items"))
        if isinstance(s.get("maxItems"), int) and n > s["maxItems"]:
            out.append((path, f"List should have at most {s['maxItems']} items (got {n})", "max_items"))
        prefix = s.get("prefixItems")
        items = s.get("items")
        if isinstance(items, list):  # draft-4 tuple form
            prefix, items = items, s.get("additionalItems", True)
        start = 0
        if isinstance(prefix, list):
            for i, sub in enumerate(prefix[:n]):
                self._check(value[i], sub, (*path, i), out)
            start = len(prefix)
        if items is False and n > start:
            out.append((path, f"List should have at most {start} items (got {n})", "max_items"))
        elif isinstance(items, dict):
            for i in range(start, n):
                self._check(value[i], items, (*path, i), out)
        if s.get("uniqueItems") is True:
            for i in range(n):
                if any(_json_equal(value[i], value[j]) for j in range(i)):
                    out.append(((*path, i), f"duplicate item (got {short_repr(value[i])})", "unique"))
                    break
        if "contains" in s and not any(self._valid(v, s["contains"]) for v in value):
            out.append((path, "List should contain at least one matching item", "contains"))

    def _check_object(self, value: Mapping[str, Any], s: dict[str, Any], path: Path, out: list[Any]) -> None:
        props: dict[str, Any] = s["properties"] if isinstance(s.get("properties"), dict) else {}
        for key in s.get("required", []) or []:
            if key not in value:
                out.append(((*path, key), "missing required field", "missing"))
        raw_patterns = s.get("patternProperties")
        patterns: dict[str, Any] = raw_patterns if isinstance(raw_patterns, dict) else {}
        extra = s.get("additionalProperties", True)
        for key, item in value.items():
            matched = False
            if key in props:
                matched = True
                self._check(item, props[key], (*path, key), out)
            for pattern, sub in patterns.items():
                if self._pattern(pattern).search(str(key)):
                    matched = True
                    self._check(item, sub, (*path, key), out)
            if not matched:
                if extra is False:
                    out.append(((*path, key), "unexpected field", "extra"))
                elif isinstance(extra, dict):
                    self._check(item, extra, (*path, key), out)
        n = len(value)
        if isinstance(s.get("minProperties"), int) and n < s["minProperties"]:
            out.append((path, f"Object should have at least {s['minProperties']} fields (got {n})",
                        "min_properties"))
        if isinstance(s.get("maxProperties"), int) and n > s["maxProperties"]:
            out.append((path, f"Object should have at most {s['maxProperties']} fields (got {n})",
                        "max_properties"))
        deps = s.get("dependentRequired")
        if isinstance(deps, dict):
            for key, needed in deps.items():
                if key in value:
                    for other in needed:
                        if other not in value:
                            out.append(((*path, other), f"missing required field (required with {key!r})",
                                        "missing"))

    def _check_combinators(self, value: Any, s: dict[str, Any], path: Path, out: list[Any]) -> None:
        for sub in s.get("allOf", []) or []:
            self._check(value, sub, path, out)
        any_of = s.get("anyOf")
        if isinstance(any_of, list) and any_of:
            self._check_union(value, any_of, path, out, exactly_one=False)
        one_of = s.get("oneOf")
        if isinstance(one_of, list) and one_of:
            self._check_union(value, one_of, path, out, exactly_one=True)
        if "not" in s and self._valid(value, s["not"]):
            out.append((path, f"Input should not match the excluded schema (got {short_repr(value)})", "not"))
        if "if" in s:
            branch = s.get("then") if self._valid(value, s["if"]) else s.get("else")
            if branch is not None:
                self._check(value, branch, path, out)

    def _check_union(self, value: Any, options: list[Any], path: Path, out: list[Any],
                     exactly_one: bool) -> None:
        results: list[list[Any]] = []
        for sub in options:
            errs: list[Any] = []
            self._check(value, sub, path, errs)
            results.append(errs)
        valid = [i for i, errs in enumerate(results) if not errs]
        if exactly_one and len(valid) > 1:
            out.append((path, f"Input matches more than one of the allowed forms ({len(valid)}); "
                              "it must match exactly one", "one_of"))
            return
        if valid:
            return
        # Options refused outright (wrong type, or a mismatched const/enum tag one level down, as in a
        # discriminated union) are not what the caller meant; if one option remains, report its details.
        def ruled_out(errs: list[Any]) -> bool:
            return any((p == path and kind == "type") or (len(p) == len(path) + 1 and kind in ("const", "enum"))
                       for p, _, kind in errs)

        fitting = [errs for errs in results if not ruled_out(errs)]
        if len(fitting) == 1:
            out.extend(fitting[0])
            return
        reasons = []
        for errs in results:
            reasons.append("; ".join(f"{format_loc(p) or 'value'}: {m}" if p != path else m
                                     for p, m, _ in errs))
        out.append((path, "Input does not match any allowed form: " + " | ".join(dict.fromkeys(reasons)),
                    "any_of"))

    def _valid(self, value: Any, schema: Any) -> bool:
        errs: list[Any] = []
        self._check(value, schema, (), errs)
        return not errs


class ClosedObjects:
    """Refuses keys that a closed nested object does not declare, in arguments pydantic has validated.

    The schema says which objects are closed (``schema.canonical_schema`` closes every model, dataclass
    and TypedDict that does not say ``extra="allow"``); this check makes validation say the same,
    whatever pydantic itself does with unknown keys (it drops them silently for models, its default
    ``extra="ignore"``, and its handling of dataclasses and TypedDicts changed between versions). Only
    keys are checked here: values are pydantic's job. Top-level arguments are the caller's job too
    (the arguments model forbids unknown ones, with the valid names listed).

    A value that is not plain JSON (a model instance passed by Python code) is not looked into. For a
    union, a discriminator picks the branch; otherwise a branch that fits the value's shape (its
    required keys present, its ``const``/``enum`` tags matching) and accepts every key wins, and if
    none does, the fitting branch with the fewest unknown keys is reported."""

    _MAX_REF_HOPS = 64

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.root: dict[str, Any] = dict(schema)
        props = self.root.get("properties")
        self.properties: dict[str, dict[str, Any]] = {
            key: sub for key, sub in (props.items() if isinstance(props, dict) else ())
            if isinstance(sub, dict) and self._reaches_closed(sub, set())
        }

    @property
    def needed(self) -> bool:
        """False when no argument can hold a closed object: the per-call check is skipped entirely."""
        return bool(self.properties)

    def _reaches_closed(self, schema: dict[str, Any], seen: set[str]) -> bool:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            if ref in seen:
                return False
            seen.add(ref)
            try:
                if self._reaches_closed(resolve_ref(self.root, ref), seen):
                    return True
            except ToolDefinitionError:
                return False
        if schema.get("additionalProperties") is False and "properties" in schema:
            return True
        return any(self._reaches_closed(sub, seen) for sub in subschemas(schema))

    def errors(self, arguments: Mapping[str, Any]) -> list[dict[str, Any]]:
        out: list[Path] = []
        for key, sub in self.properties.items():
            if key in arguments:
                self._walk(arguments[key], sub, (key,), out, 0)
        return [{"loc": format_loc(path), "msg": "unexpected field", "type": "extra_forbidden"}
                for path in out]

    def _walk(self, value: Any, schema: Any, path: Path, out: list[Path], hops: int) -> None:
        if not isinstance(schema, dict) or hops > self._MAX_REF_HOPS:
            return
        ref = schema.get("$ref")
        if isinstance(ref, str):
            self._walk(value, resolve_ref(self.root, ref), path, out, hops + 1)
        for sub in schema.get("allOf", []) or []:
            self._walk(value, sub, path, out, hops + 1)
        if not isinstance(value, (Mapping, list, tuple)):
            return
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                self._union(value, schema, branches, path, out, hops)
        if isinstance(value, Mapping):
            self._object(value, schema, path, out)
        else:
            self._array(value, schema, path, out)

    def _object(self, value: Mapping[str, Any], s: dict[str, Any], path: Path, out: list[Path]) -> None:
        props = s.get("properties")
        extra = s.get("additionalProperties", True)
        if not isinstance(props, dict):
            if not isinstance(extra, dict):
                return
            props = {}
        patterns = s.get("patternProperties")
        for key, item in value.items():
            if key in props:
                self._walk(item, props[key], (*path, key), out, 0)
                continue
            if isinstance(patterns, dict):
                matched = [sub for pattern, sub in patterns.items() if re.search(pattern, str(key))]
                if matched:
                    for sub in matched:
                        self._walk(item, sub, (*path, key), out, 0)
                    continue
            if extra is False:
                out.append((*path, key))
            elif isinstance(extra, dict):
                self._walk(item, extra, (*path, key), out, 0)

    def _array(self, value: list[Any] | tuple[Any, ...], s: dict[str, Any], path: Path,
               out: list[Path]) -> None:
        prefix = s.get("prefixItems")
        start = 0
        if isinstance(prefix, list):
            for i, sub in enumerate(prefix[: len(value)]):
                self._walk(value[i], sub, (*path, i), out, 0)
            start = len(prefix)
        items = s.get("items")
        if isinstance(items, dict):
            for i in range(start, len(value)):
                self._walk(value[i], items, (*path, i), out, 0)

    def _union(self, value: Any, schema: dict[str, Any], branches: list[Any], path: Path,
               out: list[Path], hops: int) -> None:
        disc = schema.get("discriminator")
        if isinstance(value, Mapping) and isinstance(disc, dict) and isinstance(disc.get("mapping"), dict):
            tag = value.get(disc.get("propertyName", ""))
            target = disc["mapping"].get(tag) if isinstance(tag, str) else None
            if isinstance(target, str):
                self._walk(value, {"$ref": target}, path, out, hops + 1)
                return
        fitting: list[list[Path]] = []
        for branch in branches:
            if not isinstance(branch, dict) or not self._fits(value, branch, hops):
                continue
            errs: list[Path] = []
            self._walk(value, branch, path, errs, hops + 1)
            if not errs:
                return
            fitting.append(errs)
        if fitting:
            fewest: list[Path] = min(fitting, key=len)
            out.extend(fewest)

    def _fits(self, value: Any, s: dict[str, Any], hops: int) -> bool:
        while isinstance(s.get("$ref"), str) and hops <= self._MAX_REF_HOPS:
            s = resolve_ref(self.root, s["$ref"])
            hops += 1
        if any(isinstance(s.get(k), list) for k in ("anyOf", "oneOf", "allOf")):
            return True  # a nested union decides for itself
        t = s.get("type")
        types = t if isinstance(t, list) else [t] if isinstance(t, str) else []
        if isinstance(value, Mapping):
            if types and "object" not in types:
                return False
            if any(key not in value for key in s.get("required", []) or []):
                return False
            props = s.get("properties")
            for key, sub in (props.items() if isinstance(props, dict) else ()):
                if key in value and isinstance(sub, dict):
                    if "const" in sub and not _json_equal(value[key], sub["const"]):
                        return False
                    if isinstance(sub.get("enum"), list) and not any(_json_equal(value[key], e)
                                                                     for e in sub["enum"]):
                        return False
            return True
        return not types or "array" in types


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


__all__ = ["ClosedObjects", "JsonSchemaValidator"]
