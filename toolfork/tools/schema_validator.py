"""Closing the nested objects of pydantic-backed tools (``ClosedObjects``).

Raw JSON Schema tools are validated by ``schema_engine`` (the specification's semantics); this module
only makes pydantic's handling of unknown keys in nested objects match the schema the model reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from toolfork.tools.errors import ToolDefinitionError
from toolfork.tools.schema import resolve_ref, subschemas
from toolfork.tools.schema_messages import json_equal as _json_equal
from toolfork.tools.validation import format_loc

Path = tuple[str | int, ...]


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


__all__ = ["ClosedObjects"]
