"""Property tests: values generated from a tool's own JSON Schema validate; values that violate it
are refused. Run against the pydantic-backed tools and, with the same schema, the raw-schema tools, so
the exported schema and both validators are checked against one another."""

from __future__ import annotations

import math
from typing import Any

import pytest
import tools_signatures as sigs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolfork import Tool, ToolInputError
from toolfork.tools.schema import resolve_ref
from toolfork.tools.validation import format_loc

JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))


def from_schema(schema: dict[str, Any], root: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """A strategy for values valid under ``schema`` (the subset tool schemas use)."""
    if "$ref" in schema:
        target = resolve_ref(root, schema["$ref"])
        if depth > 2 and target.get("type") == "object":
            # Recursion: only the required fields, and no recursive lists below this depth.
            target = {**target, "properties": {k: v for k, v in target.get("properties", {}).items()
                                               if k in target.get("required", [])}}
        return from_schema({**target, **{k: v for k, v in schema.items() if k != "$ref"}}, root, depth + 1)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(s, root, depth + 1) for s in schema[key]])
    t = schema.get("type")
    if isinstance(t, list):
        return st.one_of([from_schema({**schema, "type": x}, root, depth) for x in t])
    if t == "string":
        return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 8))
    if t == "integer":
        return st.integers(min_value=schema.get("minimum", -10**6), max_value=schema.get("maximum", 10**6))
    if t == "number":
        return st.floats(min_value=schema.get("minimum", -1e6), max_value=schema.get("maximum", 1e6),
                         allow_nan=False, allow_infinity=False)
    if t == "boolean":
        return st.booleans()
    if t == "null":
        return st.none()
    if t == "array":
        if "prefixItems" in schema:
            return st.tuples(*[from_schema(s, root, depth + 1) for s in schema["prefixItems"]]).map(list)
        items = from_schema(schema.get("items", {}), root, depth + 1) if schema.get("items") else JSON_SCALARS
        max_size = 0 if depth > 4 else schema.get("maxItems", 3)
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=max_size)
    if t == "object":
        props: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        extra = schema.get("additionalProperties")
        if not props and isinstance(extra, dict):
            return st.dictionaries(st.text(max_size=4), from_schema(extra, root, depth + 1), max_size=3)
        return st.fixed_dictionaries(
            {k: from_schema(v, root, depth + 1) for k, v in props.items() if k in required},
            optional={k: from_schema(v, root, depth + 1) for k, v in props.items() if k not in required},
        )
    return JSON_SCALARS


def accepted_types(schema: dict[str, Any], root: dict[str, Any]) -> set[str]:
    if "$ref" in schema:
        return accepted_types(resolve_ref(root, schema["$ref"]), root)
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return {json_type(v) for v in values} | {"enum"}
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return set().union(*(accepted_types(s, root) for s in schema[key]))
    t = schema.get("type")
    if t is None:
        return {"any"}
    return set(t) if isinstance(t, list) else {t}


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


# Candidate wrong values, with the JSON types a lax validator might coerce them into.
WRONG = [
    ("not-a-valid-value", {"string"}),
    ({"unexpected": [1]}, {"object"}),
    ([["nested"]], {"array"}),
    (12345.5, {"number"}),
    (None, {"null"}),
]


def wrong_value_for(schema: dict[str, Any], root: dict[str, Any]) -> Any:
    accepted = accepted_types(schema, root)
    if "any" in accepted:
        return None
    for value, kinds in WRONG:
        if "enum" in accepted and kinds == {"string"}:
            return value  # not one of the listed values
        if not kinds & accepted:
            return value
    return None


def _object_branch(schema: dict[str, Any], root: dict[str, Any], value: Any) -> dict[str, Any] | None:
    """The sub-schema that describes ``value`` (a dict or list), following $ref and unions."""
    if "$ref" in schema:
        return _object_branch(resolve_ref(root, schema["$ref"]), root, value)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            for branch in schema[key]:
                found = _object_branch(branch, root, value)
                if found is not None and all(
                    found.get("properties", {}).get(k, {}).get("const", v) == v
                    for k, v in (value.items() if isinstance(value, dict) else [])
                ):
                    return found
            return None
    kind = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else None
    return schema if kind and schema.get("type") == kind else None


def breakable_paths(value: Any, schema: dict[str, Any], root: dict[str, Any],
                    path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """(path, wrong value) pairs for every place in ``value``, at any depth, that can be made invalid."""
    out: list[tuple[tuple[Any, ...], Any]] = []
    node = _object_branch(schema, root, value)
    if node is None:
        return out
    if isinstance(value, dict):
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is None:
                continue
            wrong = wrong_value_for(sub, root)
            if wrong is not None:
                out.append(((*path, key), wrong))
            out.extend(breakable_paths(item, sub, root, (*path, key)))
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            wrong = wrong_value_for(node["items"], root)
            if wrong is not None:
                out.append(((*path, i), wrong))
            out.extend(breakable_paths(item, node["items"], root, (*path, i)))
    return out


def set_at(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = set_at(value[path[0]], path[1:], new)
    return copy


TOOLS = [sigs.scalars, sigs.defaults, sigs.choices, sigs.nested, sigs.structures, sigs.unions,
         sigs.constrained, sigs.awkward_names, sigs.collections_]


def raw_twin(t: Tool) -> Tool:
    return Tool.from_json_schema(t.name, t.description, t.to_json_schema(), lambda **kw: kw)


@pytest.mark.parametrize("t", TOOLS, ids=[t.name for t in TOOLS])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_values_generated_from_the_schema_validate(t: Tool, data: st.DataObject) -> None:
    schema = t.to_json_schema()
    value = data.draw(from_schema(schema, schema))
    t.validate(value)
    raw_twin(t).validate(value)
    # Strict-mode style (every optional property sent as null) also validates.
    strict_value = {**{k: None for k in schema["properties"]}, **value}
    t.validate(strict_value)


@pytest.mark.parametrize("t", TOOLS, ids=[t.name for t in TOOLS])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_values_violating_the_schema_are_refused(t: Tool, data: st.DataObject) -> None:
    schema = t.to_json_schema()
    value = data.draw(from_schema(schema, schema))
    required = schema.get("required", [])
    candidates = ["unknown"]
    if required:
        candidates.append("missing")
    breakable = breakable_paths(value, schema, schema)
    if breakable:
        candidates.append("wrong")
    how = data.draw(st.sampled_from(candidates))
    bad = dict(value)
    if how == "unknown":
        key = data.draw(st.text(min_size=1, max_size=6).filter(lambda k: k not in schema["properties"]))
        bad[key] = 1
        expected_loc = key
    elif how == "missing":
        expected_loc = data.draw(st.sampled_from(required))
        bad.pop(expected_loc, None)
    else:
        path, wrong = data.draw(st.sampled_from(breakable))
        bad = set_at(value, path, wrong)
        expected_loc = format_loc(path)
    for validator in (t, raw_twin(t)):
        with pytest.raises(ToolInputError) as info:
            validator.validate(bad)
        locs = [e["loc"] for e in info.value.errors]
        # At the broken place, or at an enclosing union that the broken value no longer selects
        # (a wrong discriminator tag makes the whole "shape" invalid).
        assert any(loc == expected_loc or (loc and expected_loc.startswith((f"{loc}.", f"{loc}[")))
                   for loc in locs), (how, bad, info.value.errors)


@settings(max_examples=60, deadline=None)
@given(st.integers(), st.integers())
def test_lax_integer_coercion_matches_int(a: int, b: int) -> None:
    from test_tools_validation import add

    assert add.validate({"a": str(a), "b": float(b) if abs(b) < 2**53 else b}) == {"a": a, "b": b}
    assert add.invoke({"a": a, "b": b}).data == a + b


@settings(max_examples=60, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not float(f).is_integer()))
def test_fractional_floats_are_not_integers(x: float) -> None:
    from test_tools_validation import add

    assert not math.isnan(x)
    with pytest.raises(ToolInputError, match="a:"):
        add.validate({"a": x, "b": 1})


@pytest.mark.parametrize("bad", [
    {"00": "x"},
    {"0": 1.0, "00": "x"},
    {"00": "x", "0": 2.0},
    {"+1": "x", "1": 3.0},
])
def test_a_number_like_key_is_named_by_its_text(bad: dict[str, Any]) -> None:
    # The JSON Schema engine reads "00" and "+1" as the positions 0 and 1; the error still names the
    # key the caller wrote, next to a valid "0" or "1".
    for validator in (sigs.collections_, raw_twin(sigs.collections_)):
        with pytest.raises(ToolInputError) as info:
            validator.validate({"tags": [], "scores": bad, "pair": [1, "a"]})
        wrong = next(k for k, v in bad.items() if isinstance(v, str))
        assert [e["loc"] for e in info.value.errors] == [f"scores.{wrong}"]


@pytest.mark.timeout(30)  # without a bound, the search takes 6**10 steps
def test_keys_ambiguous_at_every_level_are_named_quickly() -> None:
    from toolfork.tools.schema_messages import keyed_path

    # Ten levels with six keys each that all read as 0: the search stops early and names a path.
    def level(depth: int) -> Any:  # one object per level, under six keys: built in linear time
        if depth == 0:
            return "x"
        below = level(depth - 1)
        return {"0" * n: below for n in range(1, 7)}
    path = keyed_path([0] * 10, level(10), "not there")
    assert len(path) == 10 and all(p == "0" for p in path)
