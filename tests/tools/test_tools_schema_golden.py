"""Schema export over many signatures, pinned by golden JSON files.

A golden mismatch means the wire format a model sees changed: review the diff, then regenerate with
TOOLFORK_UPDATE_GOLDEN=1 if the change is intended.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import tools_signatures as sigs

from toolfork import Tool, ToolDefinitionError

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("TOOLFORK_UPDATE_GOLDEN") == "1"


def exported(t: Tool) -> dict[str, Any]:
    out: dict[str, Any] = {"anthropic": t.to_anthropic(), "to_string": t.to_string()}
    try:
        out["openai_strict"] = t.to_openai(strict=True)
    except ToolDefinitionError as exc:
        out["openai_strict"] = {"error": str(exc)}
    return out


@pytest.mark.parametrize("t", sigs.ALL, ids=[t.name for t in sigs.ALL])
def test_schema_matches_golden(t: Tool) -> None:
    path = GOLDEN / f"{t.name}.json"
    actual = exported(t)
    if UPDATE:
        path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n")
    assert path.exists(), f"no golden file {path.name}; run with TOOLFORK_UPDATE_GOLDEN=1 and review it"
    assert actual == json.loads(path.read_text())


def test_golden_files_have_no_orphans() -> None:
    names = {f"{t.name}.json" for t in sigs.ALL}
    assert {p.name for p in GOLDEN.glob("*.json")} == names


def test_schema_basics_hold_for_every_signature() -> None:
    for t in sigs.ALL:
        schema = t.to_json_schema()
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        # pydantic's generated titles are noise for a model and must be gone everywhere.
        assert '"title"' not in json.dumps(schema), t.name
        assert set(schema.get("required", [])) <= set(schema["properties"])
        assert t.to_anthropic() == {"name": t.name, "description": t.description, "input_schema": schema}


def test_descriptions_come_from_docstrings() -> None:
    assert sigs.defaults.description == (
        "Forecast the weather.\n\nA longer paragraph that explains when to use the tool."
    )
    props = sigs.defaults.to_json_schema()["properties"]
    assert props["days"] == {"default": 3, "description": "how many days ahead", "type": "integer"}
    assert props["unit"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert sigs.defaults.to_json_schema()["required"] == ["city"]
    numpy_props = sigs.numpy_doc.to_json_schema()["properties"]
    assert numpy_props["alpha"]["description"] == "the weight"
    assert numpy_props["beta"]["description"] == "the offset"
    # Annotated[str, "text"] is a description too.
    assert sigs.constrained.to_json_schema()["properties"]["note"]["description"] == "a free-form note"


def test_runtime_parameter_is_not_in_the_schema() -> None:
    assert list(sigs.with_runtime.to_json_schema()["properties"]) == ["query"]
    assert sigs.with_runtime.uses_runtime
    assert not sigs.scalars.uses_runtime


def test_json_schema_is_a_copy() -> None:
    schema = sigs.scalars.to_json_schema()
    schema["properties"].clear()
    assert sigs.scalars.to_json_schema()["properties"]


def test_inline_refs_removes_defs_except_recursive_ones() -> None:
    inlined = sigs.choices.to_json_schema(inline=True)
    assert "$defs" not in inlined
    assert inlined["properties"]["color"] == {"description": "a color", "enum": ["red", "green", "blue"],
                                              "type": "string"}
    recursive = sigs.nested.to_json_schema(inline=True)
    # Tree refers to itself: it keeps its $defs entry, everything else is inlined.
    assert set(recursive["$defs"]) == {"Tree"}
    assert "$ref" not in json.dumps(recursive["properties"]["person"])


def test_to_string_is_one_line_with_types_and_defaults() -> None:
    line = sigs.defaults.to_string()
    assert "\n" not in line
    assert line.startswith("defaults(city: string, days: integer = 3, unit: string | null = null, "
                           "verbose: boolean = false) -> object: Forecast the weather.")
    assert "city: the city name" in line
    assert sigs.no_arguments.to_string() == "no_arguments() -> string: Return the time of day."
