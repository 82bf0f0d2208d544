"""Validating arguments against a raw JSON Schema (MCP servers, OpenAPI, other SDKs), as the
specification says.

Why an engine and not our own walker: ``Tool.from_json_schema`` is how other frameworks' tools come
in, so "valid" must mean what the specification means, every keyword included (``unevaluated*``,
``$dynamicRef``, ``$id``/``$anchor`` scopes...). ``jsonschema-rs`` (Rust) passes the official test
suite and checks a valid call in about a microsecond; we keep the error messages our own
(``schema_messages``), so a model reads the same words as for the pydantic-backed tools.

The dialect is the schema's ``$schema`` (draft 2020-12, 2019-09, 7, 6 or 4). A schema without one is
read as 2020-12, after translating the older forms tool schemas still use (``items`` as a list with
``additionalItems``, boolean ``exclusiveMinimum``/``exclusiveMaximum``, ``dependencies``) and
OpenAPI 3.0's ``nullable``. Refused at definition time, naming the keyword and where it is: a keyword
of another draft than the schema's (it would be silently ignored), a ``$ref`` leaving the schema
(nothing is fetched), a pattern that is not an ECMA 262 regular expression, an unknown ``$schema``.
``format`` is an annotation (not asserted), as 2020-12 says by default.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from toolfork.tools.errors import ToolDefinitionError
from toolfork.tools.schema_messages import Translator, keyed_path, non_json_path
from toolfork.tools.validation import format_loc, short_repr

Path = tuple[str | int, ...]

# $schema (scheme and trailing '#' ignored) -> dialect; 2019 and 2020 stand for 2019-09 and 2020-12.
_DIALECTS = {
    "json-schema.org/draft/2020-12/schema": 2020,
    "json-schema.org/draft/2019-09/schema": 2019,
    "json-schema.org/draft-07/schema": 7,
    "json-schema.org/draft-06/schema": 6,
    "json-schema.org/draft-04/schema": 4,
}
DIALECT_NAMES = {2020: "draft 2020-12", 2019: "draft 2019-09", 7: "draft 7", 6: "draft 6", 4: "draft 4"}
# The engine's validator class per dialect (a name: jsonschema_rs is imported with the first raw-schema
# tool, so `import toolfork` and the worker stay lean).
_VALIDATORS = {2020: "Draft202012Validator", 2019: "Draft201909Validator", 7: "Draft7Validator",
               6: "Draft6Validator", 4: "Draft4Validator"}
# Keywords that exist only from (first) / up to (last) some dialect: elsewhere they would be ignored.
_FIRST = {
    "const": 6, "contains": 6, "propertyNames": 6, "if": 7, "then": 7, "else": 7,
    "$anchor": 2019, "dependentRequired": 2019, "dependentSchemas": 2019, "unevaluatedProperties": 2019,
    "unevaluatedItems": 2019, "minContains": 2019, "maxContains": 2019, "$recursiveRef": 2019,
    "$recursiveAnchor": 2019, "prefixItems": 2020, "$dynamicRef": 2020, "$dynamicAnchor": 2020,
}
_LAST = {"dependencies": 7, "additionalItems": 2019, "$recursiveRef": 2019, "$recursiveAnchor": 2019}

# Where sub-schemas sit (structure-aware: a property named "not" is not a keyword).
_ONE = ("items", "additionalItems", "additionalProperties", "not", "contains", "if", "then", "else",
        "propertyNames", "unevaluatedProperties", "unevaluatedItems", "contentSchema")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_DICT = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")


def schema_nodes(schema: Any, path: Path = ()) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every schema object in ``schema`` with its location; a node may be changed before its
    sub-schemas are visited (they are read after the node is yielded)."""
    stack: list[tuple[Path, Any]] = [(path, schema)]
    while stack:
        where, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield where, node
        for key in _ONE:
            if isinstance(node.get(key), dict):
                stack.append(((*where, key), node[key]))
        for key in _LIST:
            subs = node.get(key)
            if isinstance(subs, list):
                stack.extend(((*where, key, i), sub) for i, sub in enumerate(subs))
        for key in _DICT:
            subs = node.get(key)
            if isinstance(subs, dict):
                stack.extend(((*where, key, name), sub) for name, sub in subs.items())


def dialect_of(schema: Mapping[str, Any]) -> int | None:
    uri = schema.get("$schema")
    if uri is None:
        return None
    if not isinstance(uri, str):
        raise ToolDefinitionError(f"$schema must be a string, got {uri!r}")
    key = uri.split("://", 1)[-1].rstrip("#")
    if key not in _DIALECTS:
        raise ToolDefinitionError(
            f"$schema {uri!r} is not a supported dialect (supported: {', '.join(DIALECT_NAMES.values())})")
    return _DIALECTS[key]


def _legacy_to_2020(node: dict[str, Any]) -> None:
    """Rewrite the draft-4/7 and OpenAPI forms of one node (of a schema without ``$schema``) in place."""
    for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if isinstance(node.get(flag), bool):
            if node.pop(flag) and bound in node:
                node[flag] = node.pop(bound)
    if isinstance(node.get("items"), list):
        node["prefixItems"] = node.pop("items")
        if "additionalItems" in node:
            node["items"] = node.pop("additionalItems")
    node.pop("additionalItems", None)  # without a list of items it never applied
    deps = node.get("dependencies")
    if isinstance(deps, dict):
        del node["dependencies"]
        for key, dep in deps.items():
            target = "dependentRequired" if isinstance(dep, list) else "dependentSchemas"
            node.setdefault(target, {})[key] = dep
    if "nullable" in node:
        if node.pop("nullable") is True:
            _allow_null(node)


def _allow_null(node: dict[str, Any]) -> None:
    """OpenAPI 3.0 ``nullable: true``: null is accepted besides what the node's type says."""
    t = node.get("type")
    if isinstance(t, str) and t != "null":
        node["type"] = [t, "null"]
    elif isinstance(t, list) and "null" not in t:
        node["type"] = [*t, "null"]
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        node["enum"] = [*node["enum"], None]
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list):
            node[key] = [*node[key], {"type": "null"}]
    if "const" in node and node["const"] is not None:
        node["anyOf"] = [*node.get("anyOf", []), {"const": node.pop("const")}, {"type": "null"}]


def _check_node(node: dict[str, Any], where: Path, dialect: int) -> None:
    at = f" at {format_loc(where)}" if where else ""
    ref = node.get("$ref")
    if ref is not None and not isinstance(ref, str):
        raise ToolDefinitionError(f"$ref must be a string, got {ref!r}{at}")
    t = node.get("type")
    if t is not None and not isinstance(t, (str, list)):
        raise ToolDefinitionError(f"'type' must be a string or a list, got {t!r}{at}")
    if "enum" in node and not isinstance(node["enum"], list):
        raise ToolDefinitionError(f"'enum' must be a list, got {node['enum']!r}{at}")
    name = DIALECT_NAMES[dialect]
    if dialect >= 2020 and isinstance(node.get("items"), list):
        raise ToolDefinitionError(f"'items' as a list{at} is the draft-7 tuple form; {name} uses 'prefixItems' "
                                  "(or declare draft 7 in $schema)")
    for keyword in node:
        first, last = _FIRST.get(keyword, 0), _LAST.get(keyword, 9999)
        if not first <= dialect <= last:
            raise ToolDefinitionError(
                f"keyword {keyword!r}{at} is not part of {name} (the schema's $schema), so it would be silently "
                "ignored: declare the draft that has it, or rewrite it")


def _no_fetch(uri: str) -> Any:
    raise ValueError(f"remote schemas are not fetched ({uri})")


def _definition_error(exc: Exception, root: Any) -> ToolDefinitionError:
    """A clear message for a schema the engine refuses (its own words otherwise, with the location)."""
    msg = str(getattr(exc, "message", None) or exc)
    where: Path = keyed_path(getattr(exc, "instance_path", ()) or (), root)
    at = f" at {format_loc(where)}" if where else ""
    kind = getattr(exc, "kind", None)
    if kind is not None and getattr(kind, "name", "") == "format" and getattr(kind, "format", "") == "regex":
        # A patternProperties key is the pattern (older engines report the value under it instead).
        pattern = where[-1] if len(where) >= 2 and where[-2] == "patternProperties" else getattr(exc, "instance", None)
        return ToolDefinitionError(f"bad regular expression {pattern!r}{at}: patterns are ECMA 262 regular "
                                   "expressions and this one does not compile")
    if "does not exist" in msg and msg.startswith("Pointer"):
        pointer = msg.split("'")[1] if msg.count("'") >= 2 else msg
        return ToolDefinitionError(f"$ref '#{pointer}' points to nothing in the schema")
    if msg.startswith("Anchor ") and "does not exist" in msg:
        anchor = msg.split("'")[1] if msg.count("'") >= 2 else msg
        return ToolDefinitionError(f"$ref '#{anchor}' points to nothing in the schema (no $anchor {anchor!r})")
    if "is not present in a registry" in msg or "remote schemas are not fetched" in msg:
        uri = msg.split("'")[1] if msg.count("'") >= 2 else msg
        return ToolDefinitionError(
            f"$ref {uri!r} leaves the schema: only local references (JSON pointers, $id and $anchor inside this "
            "schema) are supported; remote schemas are not fetched")
    return ToolDefinitionError(f"invalid schema{at}: {msg}")


class JsonSchemaValidator:
    """Checks values against one raw schema; compiled once per tool, every ``$ref`` resolved up front."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        root: dict[str, Any] = copy.deepcopy(dict(schema))
        declared = dialect_of(root)
        self.dialect = declared if declared is not None else 2020
        for where, node in schema_nodes(root):
            if declared is None:
                _legacy_to_2020(node)
            _check_node(node, where, self.dialect)
        self.root = root
        import jsonschema_rs

        try:
            engine = getattr(jsonschema_rs, _VALIDATORS[self.dialect])
            self._engine = engine(root, validate_formats=False, retriever=_no_fetch)
        except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
            raise _definition_error(exc, root) from None
        self._is_valid = self._engine.is_valid

    def is_valid(self, value: Any) -> bool:
        try:
            return bool(self._is_valid(value))
        except ValueError:  # a value JSON cannot hold (a date, a set): reported by errors()
            return False

    def errors(self, value: Any, argument_names: list[str] | None = None) -> list[dict[str, Any]]:
        """Every failure as ``{"loc", "msg", "type"}``; never empty for a value ``is_valid`` refuses."""
        try:
            raw = list(self._engine.iter_errors(value))
        except ValueError as exc:
            bad = non_json_path(value)
            if bad is not None:
                found = [(bad[0], f"not a JSON value (got {short_repr(bad[1])}, a {type(bad[1]).__name__})",
                          "not_json")]
            else:
                found = [((), f"not a JSON value: {exc}", "not_json")]
        else:
            found = Translator(self.root, value).all(raw)
        if not found:
            found = [((), f"Input does not match the schema (got {short_repr(value)})", "invalid")]
        result = []
        for path, msg, kind in found:
            if kind == "extra" and len(path) == 1:
                msg = "unexpected argument"
                if argument_names is not None:
                    msg += f" (valid arguments: {', '.join(argument_names) or 'none'})"
            elif kind == "missing" and len(path) == 1:
                msg = "missing required argument"
            result.append({"loc": format_loc(path), "msg": msg, "type": kind})
        return result


__all__ = ["DIALECT_NAMES", "JsonSchemaValidator", "dialect_of", "schema_nodes"]
