"""Tools described by raw JSON Schema (as MCP servers describe theirs)."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest

from toolfork import Tool, ToolDefinitionError, ToolInputError

# An MCP-style schema: recursion through $defs, enums, anyOf/oneOf, nested arrays and objects,
# additionalProperties as a schema, bounds.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": "what to find"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
        "sort": {"enum": ["asc", "desc"]},
        "filter": {"$ref": "#/$defs/Filter"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "ids": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3,
                "uniqueItems": True},
        "when": {"anyOf": [{"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}, {"type": "null"}]},
        "shape": {"oneOf": [
            {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
             "required": ["kind", "r"], "additionalProperties": False},
            {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}},
             "required": ["kind", "side"], "additionalProperties": False},
        ]},
    },
    "required": ["query"],
    "additionalProperties": False,
    "$defs": {
        "Filter": {
            "type": "object",
            "properties": {
                "field": {"type": "string"},
                "op": {"type": "string", "enum": ["eq", "lt", "gt"]},
                "value": {"type": ["string", "number", "boolean"]},
                "and": {"type": "array", "items": {"$ref": "#/$defs/Filter"}},
            },
            "required": ["field", "op"],
            "additionalProperties": False,
        }
    },
}


def make() -> Tool:
    return Tool.from_json_schema("search", "Search documents.", SCHEMA, lambda **kw: kw)


def errors(arguments: Any) -> dict[str, str]:
    with pytest.raises(ToolInputError) as info:
        make().validate(arguments)
    return {e["loc"]: e["msg"] for e in info.value.errors}


def test_schema_is_exported_as_given() -> None:
    t = make()
    assert t.to_json_schema() == SCHEMA
    assert t.to_anthropic() == {"name": "search", "description": "Search documents.", "input_schema": SCHEMA}
    assert t.argument_names == list(SCHEMA["properties"])


def test_valid_nested_arguments_pass_and_defaults_fill_in() -> None:
    args = {
        "query": "x",
        "filter": {"field": "a", "op": "eq", "value": 1,
                   "and": [{"field": "b", "op": "lt", "value": "z", "and": [{"field": "c", "op": "gt"}]}]},
        "labels": {"k": "v"},
        "ids": [1, 2.0],
        "when": None,
        "shape": {"kind": "square", "side": 2},
    }
    out = make().invoke(args).data
    assert out == {**args, "limit": 10}


def test_every_nested_failure_is_reported_with_its_path() -> None:
    found = errors({
        "query": "",
        "limit": 0,
        "sort": "up",
        "filter": {"field": "a", "op": "eq", "and": [{"field": 1, "op": "ne"}, {"op": "eq"}], "x": 1},
        "labels": {"k": 3},
        "ids": [1, 1, 2, 3],
        "when": "yesterday",
        "extra": True,
    })
    assert found == {
        "query": "String should have at least 1 characters (got '')",
        "limit": "Input should be greater than or equal to 1 (got 0)",
        "sort": "Input should be 'asc' or 'desc' (got 'up')",
        "filter.and[0].field": "Input should be a string (got 1)",
        "filter.and[0].op": "Input should be 'eq', 'lt' or 'gt' (got 'ne')",
        "filter.and[1].field": "missing required field",
        "filter.x": "unexpected field",
        "labels.k": "Input should be a string (got 3)",
        "ids": "List should have at most 3 items (got 4)",
        "ids[1]": "duplicate item (got 1)",
        "when": "String should match pattern '^\\\\d{4}-\\\\d{2}-\\\\d{2}$' (got 'yesterday')",
        "extra": "unexpected argument (valid arguments: query, limit, sort, filter, labels, ids, when, shape)",
    }


def test_one_of_branches() -> None:
    # The const tag picks the branch, so the error is precise.
    assert errors({"query": "q", "shape": {"kind": "circle"}}) == {"shape.r": "missing required field"}
    found = errors({"query": "q", "shape": {"kind": "triangle"}})
    assert list(found) == ["shape"]
    assert found["shape"].startswith("Input does not match any allowed form")
    # Matching two oneOf branches is refused.
    both = Tool.from_json_schema("both", "", {"type": "object", "properties": {
        "v": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}})
    with pytest.raises(ToolInputError, match="more than one of the allowed forms"):
        both.validate({"v": 1})
    assert both.validate({"v": 1.5}) == {"v": 1.5}


def test_no_coercion_for_raw_schemas() -> None:
    found = errors({"query": 5, "limit": "3", "ids": [True]})
    assert found["query"] == "Input should be a string (got 5)"
    assert found["limit"] == "Input should be an integer (got '3')"
    assert found["ids[0]"] == "Input should be an integer (got True)"


def test_missing_required_and_wrong_top_level() -> None:
    assert errors({}) == {"query": "missing required argument"}
    assert "arguments must be a JSON object" in errors([1])[""]
    assert make().validate('{"query": "x"}') == {"query": "x", "limit": 10}  # type: ignore[arg-type]


def test_defaults_are_fresh_copies() -> None:
    t = Tool.from_json_schema("d", "", {"type": "object", "properties": {
        "tags": {"type": "array", "default": []}}})
    first = t.validate({})
    first["tags"].append(1)
    assert t.validate({}) == {"tags": []}


def test_draft4_and_openapi_keywords() -> None:
    t = Tool.from_json_schema("old", "", {
        "type": "object",
        "properties": {
            "n": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "multipleOf": 0.5},
            "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}],
                     "additionalItems": False},
            "maybe": {"type": "string", "nullable": True},
        },
        "definitions": {"unused": {"type": "string"}},
    })
    assert t.validate({"n": 1.5, "pair": ["a", 1], "maybe": None}) == {"n": 1.5, "pair": ["a", 1], "maybe": None}
    with pytest.raises(ToolInputError) as info:
        t.validate({"n": 0, "pair": ["a", 1, 2]})
    msgs = {e["loc"]: e["msg"] for e in info.value.errors}
    assert msgs == {"n": "Input should be greater than 0 (got 0)", "pair": "List should have at most 2 items (got 3)"}
    with pytest.raises(ToolInputError, match=r"multiple of 0\.5"):
        t.validate({"n": 0.7})


def test_combinators_all_of_not_and_if_then() -> None:
    t = Tool.from_json_schema("c", "", {
        "type": "object",
        "properties": {
            "x": {"allOf": [{"type": "integer"}, {"minimum": 2}]},
            "y": {"not": {"type": "string"}},
            "z": {"type": "object", "if": {"properties": {"unit": {"const": "c"}}},
                  "then": {"properties": {"t": {"maximum": 100}}}},
        },
    })
    assert t.validate({"x": 3, "y": 1, "z": {"unit": "c", "t": 50}})
    with pytest.raises(ToolInputError) as info:
        t.validate({"x": 1, "y": "s", "z": {"unit": "c", "t": 500}})
    assert [e["loc"] for e in info.value.errors] == ["x", "y", "z.t"]


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "array"}, "must be described by an object schema"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}, "points to nothing"),
        ({"type": "object", "properties": {"a": {"$ref": "http://x/schema"}}}, "only local references"),
        ({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}, "bad regular expression"),
        ({"type": "object", "properties": {"a": {"enum": "abc"}}}, "'enum' must be a list"),
        ({"type": "object", "properties": []}, "'properties' must be an object"),
        ({"type": "object", "properties": {"a": {"type": 5}}}, "'type' must be a string or a list"),
        ("not a schema", "the schema must be a JSON object"),
        ({"type": "object", "default": object()}, "not JSON serializable"),
    ],
)
def test_bad_schemas_fail_at_definition(schema: Any, message: str) -> None:
    with pytest.raises((ToolDefinitionError, TypeError), match=message):
        Tool.from_json_schema("bad", "", schema)


def test_description_defaults_to_the_schema_description_and_settings_apply() -> None:
    t = Tool.from_json_schema("d", None, {"type": "object", "description": "From the schema."}, lambda: 1,
                              timeout=3, visible=False, on_error="fail-run")
    assert t.description == "From the schema."
    assert (t.timeout, t.is_visible, t.on_error) == (3.0, False, "fail-run")
    assert t.invoke({}).data == 1


def test_callable_must_accept_the_schema_names() -> None:
    with pytest.raises(ToolDefinitionError, match="does not accept argument"):
        Tool.from_json_schema("d", "", {"type": "object", "properties": {"a": {"type": "string"}}},
                              lambda b: b)
    t = Tool.from_json_schema("d", "", {"type": "object", "properties": {"first-name": {"type": "string"}}},
                              lambda **kw: kw["first-name"])
    assert t.invoke({"first-name": "Ann"}).as_text() == "Ann"


# -- the specification's semantics (jsonschema-rs underneath, our messages) --------------------------------

def _errors(schema: dict[str, Any], arguments: Any) -> dict[str, str]:
    with pytest.raises(ToolInputError) as info:
        Tool.from_json_schema("t", "", schema).validate(arguments)
    return {e["loc"]: e["msg"] for e in info.value.errors}


def test_empty_enum_refuses_every_value_without_crashing() -> None:
    schema = {"type": "object", "properties": {"a": {"enum": []}}}
    assert _errors(schema, {"a": 1}) == {"a": "no value is allowed here: the schema's enum is empty (got 1)"}
    assert Tool.from_json_schema("t", "", schema).validate({}) == {}


def test_patterns_are_ecma_262_and_compiled_at_definition() -> None:
    schema = {"type": "object", "patternProperties": {"^\\p{L}+$": {"type": "integer"}},
              "properties": {"iso_2": {"type": "string", "pattern": "^(?<=)\\p{Lu}{2}$"}},
              "additionalProperties": False}
    t = Tool.from_json_schema("t", "", schema)
    assert t.validate({"héllo": 1, "iso_2": "ÉA"}) == {"héllo": 1, "iso_2": "ÉA"}
    assert _errors(schema, {"héllo": "x", "12": 1, "iso_2": "ab"}) == {
        "héllo": "Input should be an integer (got 'x')",
        "12": "unexpected argument (valid arguments: iso_2)",
        "iso_2": "String should match pattern '^(?<=)\\\\p{Lu}{2}$' (got 'ab')",
    }
    with pytest.raises(ToolDefinitionError, match=r"bad regular expression '\(' at patternProperties"):
        Tool.from_json_schema("t", "", {"type": "object", "patternProperties": {"(": {}}})


def test_ref_pointers_with_percent_escapes_and_empty_tokens() -> None:
    schema = {"type": "object",
              "properties": {"a": {"$ref": "#/$defs/a%25b"}, "b": {"$ref": "#/$defs//x"},
                             "c": {"$ref": "#/$defs/s~1l~0t"}},
              "$defs": {"a%b": {"type": "string"}, "": {"x": {"type": "integer"}}, "s/l~t": {"type": "boolean"}}}
    t = Tool.from_json_schema("t", "", schema)
    assert t.validate({"a": "s", "b": 1, "c": True}) == {"a": "s", "b": 1, "c": True}
    assert _errors(schema, {"a": 1, "b": "s", "c": 0}) == {
        "a": "Input should be a string (got 1)", "b": "Input should be an integer (got 's')",
        "c": "Input should be a boolean (got 0)"}
    assert t.to_json_schema(inline=True)["properties"] == {
        "a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}}


def test_id_anchor_and_urn_references() -> None:
    urn = "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed"
    schema = {"$id": urn, "type": "object",
              "properties": {"a": {"$ref": f"{urn}#/$defs/bar"}, "b": {"$ref": "#foo"},
                             "c": {"$ref": "http://example.com/item.json"}},
              "$defs": {"bar": {"type": "string"}, "f": {"$anchor": "foo", "type": "integer"},
                        "i": {"$id": "http://example.com/item.json", "type": "boolean"}}}
    t = Tool.from_json_schema("t", "", schema)
    assert t.validate({"a": "s", "b": 1, "c": True}) == {"a": "s", "b": 1, "c": True}
    assert _errors(schema, {"a": 1, "b": "x", "c": 1}) == {
        "a": "Input should be a string (got 1)", "b": "Input should be an integer (got 'x')",
        "c": "Input should be a boolean (got 1)"}
    assert t.to_json_schema(inline=True)["properties"]["a"] == {"type": "string"}
    with pytest.raises(ToolDefinitionError, match=r"\$ref '#nope' points to nothing.*no \$anchor 'nope'"):
        Tool.from_json_schema("t", "", {"type": "object", "properties": {"a": {"$ref": "#nope"}}})


def test_keywords_every_draft_knows_are_enforced() -> None:
    schema = {
        "type": "object",
        "properties": {
            "pair": {"type": "array", "prefixItems": [{"type": "string"}], "unevaluatedItems": False},
            "many": {"type": "array", "contains": {"type": "integer"}, "minContains": 2, "maxContains": 3},
            "names": {"type": "object", "propertyNames": {"maxLength": 3}},
            "card": {"type": "object", "dependentSchemas": {"cvv": {"required": ["number"]}},
                     "dependentRequired": {"number": ["expiry"]}},
        },
        "unevaluatedProperties": False,
    }
    assert _errors(schema, {"pair": ["a", 1], "many": [1, "x"], "names": {"long": 1}, "card": {"cvv": 1},
                            "other": 1}) == {
        "pair": "List has items that no schema here allows (got 1)",
        "many": "List should contain at least 2 matching items",
        "names.long": "property name not allowed: String should have at most 3 characters (got 4)",
        "card.number": "missing required field",
        "other": "unexpected argument (valid arguments: pair, many, names, card)",
    }
    assert _errors(schema, {"many": [1, 2, 3, 4], "card": {"number": 1}}) == {
        "many": "List should contain at most 3 matching items",
        "card.expiry": "missing required field (required with 'number')",
    }


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
          "properties": {"a": {"prefixItems": [{}]}}}, "keyword 'prefixItems' at properties.a is not part of draft 7"),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "unevaluatedProperties": False},
         "keyword 'unevaluatedProperties' is not part of draft 7"),
        ({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
          "dependencies": {"a": ["b"]}}, "keyword 'dependencies' is not part of draft 2020-12"),
        ({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
          "properties": {"a": {"items": [{}]}}}, "'items' as a list at properties.a is the draft-7 tuple form"),
        ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
          "properties": {"a": {"const": 1}}}, "keyword 'const' at properties.a is not part of draft 4"),
        ({"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"},
         "'http://json-schema.org/draft-03/schema#' is not a supported dialect"),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
          "properties": {"a": {"maximum": 1, "exclusiveMaximum": True}}},
         "invalid schema at properties.a.exclusiveMaximum: true is not of type"),
    ],
)
def test_keywords_outside_the_declared_dialect_are_refused_by_name(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolDefinitionError, match=re.escape(message)):
        Tool.from_json_schema("t", "", schema)


def test_schemas_without_dialect_keep_older_forms_and_openapi_nullable() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "string"},
        "c": {"type": "string", "enum": ["x"], "nullable": True},
        "d": {"type": "object", "dependencies": {"p": ["q"], "r": {"required": ["s"]}}},
    }, "dependencies": {"a": ["b"]}}
    t = Tool.from_json_schema("t", "", schema)
    assert t.validate({"a": 1, "b": "x", "c": None}) == {"a": 1, "b": "x", "c": None}
    assert _errors(schema, {"a": 1, "c": "y", "d": {"p": 1, "r": 2}}) == {
        "b": "missing required argument",
        "c": "Input should be 'x' or None (got 'y')",
        "d.q": "missing required field (required with 'p')",
        "d.s": "missing required field",
    }
    assert t.to_json_schema() == schema  # the model reads the schema as given


def test_a_value_json_cannot_hold_is_named() -> None:
    schema = {"type": "object", "properties": {"when": {"type": "string"}}}
    assert _errors(schema, {"when": datetime.date(2024, 1, 2)}) == {
        "when": "not a JSON value (got datetime.date(2024, 1, 2), a date)"}


def test_a_root_reference_gives_the_argument_names_and_defaults() -> None:
    # How zod-to-json-schema (many MCP servers) writes a tool: draft 7, the arguments behind a $ref.
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "$ref": "#/definitions/Args",
              "definitions": {"Args": {
                  "type": "object", "additionalProperties": False, "required": ["a"],
                  "properties": {"a": {"type": "string"}, "n": {"type": "integer", "default": 2}}}}}
    t = Tool.from_json_schema("t", "", schema, lambda a, n: a * n)
    assert t.argument_names == ["a", "n"]
    assert t.invoke({"a": "x"}).as_text() == "xx"
    assert _errors(schema, {"b": 1}) == {"b": "unexpected argument (valid arguments: a, n)",
                                         "a": "missing required argument"}


def test_an_object_key_that_looks_like_a_number_is_a_key_not_a_position() -> None:
    """The engine writes such a key as an int; the path must still say ``scores.0``, not ``scores[0]``
    (an array position), as the pydantic side says it (found by the Hypothesis suite)."""
    t = Tool.from_json_schema("t", "d", {"type": "object", "properties": {
        "scores": {"type": "object", "additionalProperties": {"type": "number"}},
        "tags": {"type": "array", "items": {"type": "string"}},
        "runs": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer"}}}}})
    cases = [({"scores": {"0": "x"}}, "scores.0"), ({"tags": ["a", 1]}, "tags[1]"),
             ({"runs": {"12": [1, "y"]}}, "runs.12[1]"), ({"scores": {"-1": "x"}}, "scores.-1")]
    for bad, loc in cases:
        with pytest.raises(ToolInputError) as info:
            t.validate(bad)
        assert [e["loc"] for e in info.value.errors] == [loc], bad
