"""OpenAI strict mode: the rewritten schema obeys strict's rules everywhere, and what a model sends in
strict mode (nulls for omitted optionals) still validates to the tool's defaults."""

from __future__ import annotations

import json
from typing import Any

import pytest
import tools_signatures as sigs
from pydantic import BaseModel

from toolfork import Tool, ToolDefinitionError, ToolInputError, tool
from toolfork.tools.schema import subschemas

STRICT_OK = [t for t in sigs.ALL if t.name != "collections_"]


def strict_violations(schema: dict[str, Any]) -> list[str]:
    problems: list[str] = []

    def visit(node: dict[str, Any], path: str) -> None:
        if "default" in node:
            problems.append(f"{path}: default")
        if "oneOf" in node:
            problems.append(f"{path}: oneOf")
        if "$ref" in node and len(node) > 1:
            problems.append(f"{path}: $ref with siblings {sorted(node)}")
        if node.get("type") == "object" or "properties" in node:
            if node.get("additionalProperties") is not False:
                problems.append(f"{path}: additionalProperties is {node.get('additionalProperties')!r}")
            if sorted(node.get("required", [])) != sorted(node.get("properties", {})):
                problems.append(f"{path}: not every property is required")
        for i, sub in enumerate(subschemas(node)):
            visit(sub, f"{path}/{i}")

    visit(schema, "#")
    return problems


@pytest.mark.parametrize("t", STRICT_OK, ids=[t.name for t in STRICT_OK])
def test_strict_schema_obeys_the_rules_recursively(t: Tool) -> None:
    params = t.to_openai(strict=True)["function"]["parameters"]
    assert strict_violations(params) == []
    # Non-strict output is untouched (defaults kept, optional properties not required).
    assert t.to_openai()["function"]["parameters"] == t.to_json_schema()
    assert "strict" not in t.to_openai()["function"]


def test_the_checker_catches_a_non_strict_schema() -> None:
    # Guard against a checker that passes everything.
    assert strict_violations(sigs.defaults.to_json_schema())


def test_optional_properties_become_nullable_and_keep_their_default_in_words() -> None:
    params = sigs.defaults.to_openai(strict=True)["function"]["parameters"]
    assert params["required"] == ["city", "days", "unit", "verbose"]
    assert params["properties"]["city"] == {"description": "the city name", "type": "string"}
    assert params["properties"]["days"] == {
        "description": "how many days ahead. Default: 3.", "type": ["integer", "null"]}
    assert params["properties"]["unit"]["anyOf"] == [{"type": "string"}, {"type": "null"}]


def test_strict_nulls_mean_defaults_including_nested_models() -> None:
    # What a model sends in strict mode when it wants the defaults: every key, optional ones null.
    args = {"city": "Oslo", "days": None, "unit": None, "verbose": None}
    assert sigs.defaults.validate(args) == {"city": "Oslo", "days": 3, "unit": None, "verbose": False}
    out = sigs.nested.validate({"person": {"name": "Ann", "age": 3, "addresses": None}, "tree": None})
    assert out["person"].addresses == [] and out["tree"] is None
    sized = sigs.structures.validate({"size": {"width": 1, "height": 2, "unit": None},
                                      "filters": {"query": "q", "limit": None}})
    assert sized["size"].unit == "px"
    assert sized["filters"] == {"query": "q"}


def test_null_for_a_required_argument_is_still_refused() -> None:
    with pytest.raises(ToolInputError) as info:
        sigs.defaults.validate({"city": None})
    assert info.value.errors[0]["loc"] == "city"


def test_free_form_objects_are_refused_in_strict_mode_naming_the_path() -> None:
    class Holder(BaseModel):
        extra: dict[str, int]

    @tool
    def f(holder: Holder) -> None:
        """F."""

    with pytest.raises(ToolDefinitionError, match=r"tool 'f': Holder.extra: a free-form object"):
        f.to_openai(strict=True)
    with pytest.raises(ToolDefinitionError, match="scores: a free-form object"):
        sigs.collections_.to_openai(strict=True)
    assert f.to_openai(strict=False)["function"]["name"] == "f"


def test_responses_api_format_is_flat_and_always_says_strict() -> None:
    responses = sigs.scalars.to_openai(api="responses")
    assert responses == {"type": "function", "name": "scalars", "description": sigs.scalars.description,
                         "parameters": sigs.scalars.to_json_schema(), "strict": False}
    strict = sigs.defaults.to_openai(strict=True, api="responses")
    assert strict["strict"] is True
    assert strict["parameters"] == sigs.defaults.to_openai(strict=True)["function"]["parameters"]
    with pytest.raises(ValueError, match="api must be"):
        sigs.scalars.to_openai(api="assistants")  # type: ignore[arg-type]


def test_strict_mode_of_a_raw_json_schema_tool() -> None:
    schema = {
        "type": "object",
        "properties": {
            "q": {"type": "string", "default": "x"},
            "node": {"$ref": "#/$defs/Node", "description": "a node"},
            "pick": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
        },
        "required": ["node"],
        "$defs": {"Node": {"type": "object", "properties": {"v": {"type": "integer"}}}},
    }
    t = Tool.from_json_schema("raw", "Raw.", schema, lambda **kw: kw)
    params = t.to_openai(strict=True)["function"]["parameters"]
    assert strict_violations(params) == []
    assert params["properties"]["q"] == {"type": ["string", "null"], "description": 'Default: "x".'}
    assert params["properties"]["pick"]["anyOf"][-1] == {"type": "null"}
    # The original schema is left as it was.
    assert t.to_json_schema()["properties"]["q"] == {"type": "string", "default": "x"}


def test_optional_model_parameter_in_strict_mode_round_trip() -> None:
    class Opts(BaseModel):
        depth: int = 1
        label: str | None = None

    @tool
    def g(opts: Opts | None = None) -> int:
        """G."""
        return (opts or Opts()).depth

    params = g.to_openai(strict=True)["function"]["parameters"]
    assert strict_violations(params) == []
    assert json.loads(g.invoke({"opts": {"depth": None, "label": None}}).as_text()) == 1
    assert g.invoke({"opts": {"depth": 4, "label": None}}).data == 4
