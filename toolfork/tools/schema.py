"""JSON Schema plumbing: cleaning pydantic's output, provider formats and OpenAI strict mode.

Every tool keeps one canonical (non-strict) schema; provider formats are views computed from it, so
all three ways of defining a tool look the same on the wire.
"""

from __future__ import annotations

import copy
import json
import re
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

from toolfork.tools.errors import ToolDefinitionError

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

# Keywords whose value is one sub-schema / a list of sub-schemas / a dict of named sub-schemas.
_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else", "propertyNames",
        "additionalItems", "unevaluatedProperties", "unevaluatedItems")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_DICT = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def check_name(name: object) -> str:
    """Providers refuse other names with an opaque 400; refusing them at definition time is kinder."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ToolDefinitionError(
            f"invalid tool name {name!r}: names must match ^[a-zA-Z0-9_-]{{1,64}}$ "
            "(letters, digits, '_' and '-', at most 64 characters)"
        )
    return name


def subschemas(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The direct sub-schemas of ``schema`` (structure-aware: a property named "title" is not a keyword)."""
    for key in _ONE:
        sub = schema.get(key)
        if isinstance(sub, dict):
            yield sub
    for key in _LIST:
        subs = schema.get(key)
        if isinstance(subs, list):
            yield from (s for s in subs if isinstance(s, dict))
    items = schema.get("items")
    if isinstance(items, list):  # draft-4 tuple form
        yield from (s for s in items if isinstance(s, dict))
    for key in _DICT:
        subs = schema.get(key)
        if isinstance(subs, dict):
            yield from (s for s in subs.values() if isinstance(s, dict))


def walk(schema: dict[str, Any], fn: Callable[[dict[str, Any]], None]) -> None:
    fn(schema)
    for sub in subschemas(schema):
        walk(sub, fn)


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop the titles pydantic generates everywhere: they repeat the property names and cost tokens."""
    schema = copy.deepcopy(schema)
    walk(schema, lambda s: s.pop("title", None))
    return schema


_CONST_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (type(None), "null"))


def canonical_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The canonical form of a schema pydantic generated, the same text from pydantic 2.6 to 2.14.

    1. **Nested objects are closed.** Every object with named properties (a pydantic model, dataclass
       or TypedDict) gets ``additionalProperties: false`` unless it says otherwise itself
       (``additionalProperties: true`` or a schema, which pydantic writes for ``extra="allow"``: the
       one way to keep an object open). Older pydantic versions leave nested dataclasses and
       TypedDicts unmarked, newer ones mark them; models with the default ``extra="ignore"`` are never
       marked. Argument validation enforces the same rule (``schema_validator.ClosedObjects``), so
       what the model reads and what the tool accepts cannot disagree.
    2. ``{"allOf": [{"$ref": R}], ...}`` (how pydantic < 2.9 gave a reference a description) becomes
       ``{"$ref": R, ...}``, as newer versions write it.
    3. A ``const`` gets its JSON ``type`` (newer versions add it, older ones do not).
    4. The keys of every schema node and the ``$defs`` names are sorted (``properties`` keep their
       declaration order), so the key order does not depend on the version either.

    Returns a copy."""
    schema = copy.deepcopy(schema)

    def fix(node: dict[str, Any]) -> None:
        all_of = node.get("allOf")
        if (isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict)
                and set(all_of[0]) == {"$ref"} and "$ref" not in node):
            del node["allOf"]
            node["$ref"] = all_of[0]["$ref"]
        if "const" in node and "type" not in node:
            for py_type, json_type in _CONST_TYPES:
                if isinstance(node["const"], py_type):
                    node["type"] = json_type
                    break
        if isinstance(node.get("properties"), dict) and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for key in ("$defs", "definitions"):
            defs = node.get(key)
            if isinstance(defs, dict):
                node[key] = dict(sorted(defs.items()))
        ordered = sorted(node.items())
        node.clear()
        node.update(ordered)

    walk(schema, fix)
    return schema


def resolve_ref(root: dict[str, Any], ref: str) -> dict[str, Any]:
    """Resolve a local JSON pointer (``#``, ``#/$defs/X``, ``#/definitions/X``, any ``#/a/b``).

    The fragment is URI-encoded (``%25`` is ``%``) and then a JSON pointer (``~1`` is ``/``, ``~0`` is
    ``~``, an empty token is the key ``""``). Other references (``$id``, ``$anchor``, URNs) go through
    jsonschema-rs's resolver, relative to the root's ``$id``: what validation resolves, the schema
    views (inlining, strict mode, labels) resolve the same way."""
    pointer = urllib.parse.unquote(ref[1:]) if ref.startswith("#") else None
    if pointer is None or (pointer and not pointer.startswith("/")):
        return _resolve_by_uri(root, ref)
    node: Any = root
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ToolDefinitionError(f"$ref {ref!r} points to nothing in the schema")
    if not isinstance(node, (dict, bool)):
        raise ToolDefinitionError(f"$ref {ref!r} does not point to a schema")
    return node if isinstance(node, dict) else ({} if node else {"not": {}})


def _no_fetch(uri: str) -> Any:
    raise ValueError(f"remote schemas are not fetched ({uri})")


def _resolve_by_uri(root: dict[str, Any], ref: str) -> dict[str, Any]:
    import jsonschema_rs  # here: only schemas with $id/$anchor references need it

    root_id = root.get("$id")
    base = urllib.parse.urljoin("json-schema:///", root_id) if isinstance(root_id, str) else "json-schema:///"
    try:
        registry = jsonschema_rs.Registry([(base, root)], retriever=_no_fetch)
        found = registry.resolver(base).lookup(ref).contents
    except (jsonschema_rs.ReferencingError, ValueError) as exc:
        where = "points to nothing in the schema" if ref.startswith("#") or "does not exist" in str(exc) else \
            "leaves the schema: only local references (JSON pointers, $id and $anchor inside it) are supported"
        raise ToolDefinitionError(f"$ref {ref!r} {where}") from None
    if not isinstance(found, (dict, bool)):
        raise ToolDefinitionError(f"$ref {ref!r} does not point to a schema")
    return found if isinstance(found, dict) else ({} if found else {"not": {}})


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy with every non-recursive ``$ref`` replaced by its target, for consumers without ``$ref``
    support. Recursive references cannot be inlined and are kept (with their ``$defs``)."""
    root = copy.deepcopy(schema)

    def expand(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [expand(n, stack) for n in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref not in stack:
            target = expand(copy.deepcopy(resolve_ref(root, ref)), (*stack, ref))
            siblings = {k: expand(v, stack) for k, v in node.items() if k != "$ref"}
            return {**target, **siblings}
        return {k: (v if k in ("enum", "const", "default", "examples") else expand(v, stack))
                for k, v in node.items()}

    out = expand(root, ())
    remaining: set[str] = set()
    walk(out, lambda s: remaining.add(s["$ref"]) if isinstance(s.get("$ref"), str) else None)
    for key in ("$defs", "definitions"):
        defs = out.get(key)
        if isinstance(defs, dict):
            kept = {n: d for n, d in defs.items() if f"#/{key}/{n}" in remaining}
            if kept:
                out[key] = kept
            else:
                del out[key]
    return out


# -- OpenAI strict mode ---------------------------------------------------------------------------------

def _accepts_null(schema: dict[str, Any]) -> bool:
    t = schema.get("type")
    if t == "null" or (isinstance(t, list) and "null" in t):
        return True
    for key in ("anyOf", "oneOf"):
        if any(isinstance(s, dict) and _accepts_null(s) for s in schema.get(key, [])):
            return True
    return False


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if _accepts_null(schema):
        return schema
    if isinstance(schema.get("anyOf"), list):
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    t = schema.get("type")
    if isinstance(t, str) and "$ref" not in schema and "const" not in schema:
        out = {**schema, "type": [t, "null"]}
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out
    # A $ref or a complex schema: wrap it, keeping the description where the model reads it.
    inner = {k: v for k, v in schema.items() if k != "description"}
    wrapped: dict[str, Any] = {"anyOf": [inner, {"type": "null"}]}
    if "description" in schema:
        wrapped["description"] = schema["description"]
    return wrapped


def _with_default_in_description(schema: dict[str, Any]) -> dict[str, Any]:
    # Strict mode refuses "default"; the model still deserves to know it, so it moves into the text.
    if "default" not in schema:
        return schema
    schema = dict(schema)
    default = schema.pop("default")
    if default is not None:
        note = f"Default: {json.dumps(default, ensure_ascii=False)}."
        desc = schema.get("description")
        if desc and desc.rstrip()[-1:] not in ".!?":
            desc = desc.rstrip() + "."
        schema["description"] = f"{desc.rstrip()} {note}" if desc else note
    return schema


def to_strict(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` acceptable to OpenAI strict function calling: every object closed
    (``additionalProperties: false``) with all properties required, optional ones made nullable
    (a null then means "use the default": ``Tool.validate`` drops it), no ``default`` keywords, no
    ``$ref`` with siblings, ``oneOf`` as ``anyOf``. Free-form objects (``dict[str, X]``) have no strict
    form and raise ``ToolDefinitionError`` naming the path."""
    root = copy.deepcopy(schema)

    def fix(node: dict[str, Any], path: str) -> dict[str, Any]:
        node = _with_default_in_description(node)
        ref = node.get("$ref")
        if isinstance(ref, str) and len(node) > 1:
            target = resolve_ref(root, ref)
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return fix(node, path)
        if "oneOf" in node:
            node = dict(node)
            node["anyOf"] = [*node.pop("oneOf"), *node.get("anyOf", [])]
            node.pop("discriminator", None)
        if node.get("type") == "object" or "properties" in node:
            extra = node.get("additionalProperties", False)
            props = node.get("properties")
            if isinstance(props, dict) and extra not in (False, None):
                raise ToolDefinitionError(
                    f"{path or 'the arguments'}: an object open to unknown keys (a model with "
                    "extra=\"allow\") cannot be expressed in OpenAI strict mode; close it or use strict=False"
                )
            if extra not in (False, None) or not isinstance(props, dict):
                raise ToolDefinitionError(
                    f"{path or 'the arguments'}: a free-form object (dict) cannot be expressed in OpenAI "
                    "strict mode; give it named fields (a pydantic model, dataclass or TypedDict) "
                    "or use strict=False"
                )
            required = set(node.get("required", []))
            new_props = {}
            for key, sub in props.items():
                sub = fix(sub, f"{path}.{key}" if path else key)
                new_props[key] = sub if key in required else _nullable(sub)
            node = {**node, "type": "object", "properties": new_props, "required": list(props),
                    "additionalProperties": False}
        if isinstance(node.get("items"), dict):
            node = {**node, "items": fix(node["items"], f"{path}[]")}
        for key in ("anyOf", "allOf", "prefixItems"):
            if isinstance(node.get(key), list):
                node = {**node, key: [fix(s, path) if isinstance(s, dict) else s for s in node[key]]}
        return node

    for key in ("$defs", "definitions"):
        defs = root.get(key)
        if isinstance(defs, dict):
            root[key] = {name: fix(d, name) for name, d in defs.items()}
    return fix(root, "")


# -- provider formats -----------------------------------------------------------------------------------

def anthropic_definition(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": description, "input_schema": schema}


def openai_definition(
    name: str, description: str, schema: dict[str, Any], strict: bool = False, api: str = "chat"
) -> dict[str, Any]:
    """Chat Completions nests the function under ``function``; the Responses API flattens it and
    defaults ``strict`` to true, so ``strict`` is always sent explicitly there."""
    parameters = to_strict(schema) if strict else schema
    if api == "chat":
        function: dict[str, Any] = {"name": name, "description": description, "parameters": parameters}
        if strict:
            function["strict"] = True
        return {"type": "function", "function": function}
    if api == "responses":
        return {"type": "function", "name": name, "description": description,
                "parameters": parameters, "strict": strict}
    raise ValueError(f"api must be 'chat' or 'responses', got {api!r}")


# -- human-readable types (to_string) -------------------------------------------------------------------

def type_label(schema: Any, root: dict[str, Any] | None = None) -> str:
    """A compact type name for prompt-based tool use: ``integer``, ``array[string]``, ``'a'|'b'``..."""
    if not isinstance(schema, dict) or not schema:
        return "any"
    if "$ref" in schema and isinstance(schema["$ref"], str):
        return schema["$ref"].rsplit("/", 1)[-1]
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(type_label(s, root) for s in schema[key])
    t = schema.get("type")
    if isinstance(t, list):
        return " | ".join(type_label({**schema, "type": x}, root) for x in t)
    if t == "array":
        if isinstance(schema.get("prefixItems"), list):
            return "[" + ", ".join(type_label(s, root) for s in schema["prefixItems"]) + "]"
        return f"array[{type_label(schema['items'], root)}]" if "items" in schema else "array"
    extra = schema.get("additionalProperties")
    if t == "object" and isinstance(extra, dict) and not schema.get("properties"):
        return f"object[string, {type_label(extra, root)}]"
    if isinstance(t, str):
        return t
    return "any"


__all__ = [
    "NAME_PATTERN",
    "anthropic_definition",
    "canonical_schema",
    "check_name",
    "clean_schema",
    "inline_refs",
    "openai_definition",
    "resolve_ref",
    "to_strict",
    "type_label",
]
