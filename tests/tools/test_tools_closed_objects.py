"""The rule for nested objects: closed, whatever the pydantic version.

Every nested object that comes from a pydantic model, a dataclass or a TypedDict is closed: its
schema says ``additionalProperties: false`` in every export, and validation refuses an unknown key
inside it, naming the key. The one way to keep an object open is to say so on the type itself
(``extra="allow"``). The schema text is pinned byte for byte by the golden files, so the same test
run under the lowest and the newest pydantic proves the export does not depend on the version.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal, Optional, Union

import pytest
import tools_signatures as sigs
from pydantic import BaseModel, ConfigDict
from test_tools_schema_golden import exported
from typing_extensions import NotRequired, TypedDict

from toolfork import ObjectProperty, PropertyType, Tool, ToolDefinitionError, ToolInputError, ToolProperty, tool
from toolfork.tools.schema import canonical_schema, resolve_ref

GOLDEN = Path(__file__).parent / "golden"


# -- the three kinds, each nested two levels deep ---------------------------------------------------

class MInner(BaseModel):
    x: int


class MOuter(BaseModel):
    inner: MInner
    many: list[MInner] = []


@dataclasses.dataclass
class DInner:
    x: int


@dataclasses.dataclass
class DOuter:
    inner: DInner
    many: list[DInner] = dataclasses.field(default_factory=list)


class TInner(TypedDict):
    x: int


class TOuter(TypedDict):
    inner: TInner
    many: NotRequired[list[TInner]]


@tool
def with_model(outer: MOuter) -> int:
    """Model."""
    return outer.inner.x


@tool
def with_dataclass(outer: DOuter) -> int:
    """Dataclass."""
    return outer.inner.x


@tool
def with_typed_dict(outer: TOuter) -> int:
    """TypedDict."""
    return outer["inner"]["x"]


KINDS = [with_model, with_dataclass, with_typed_dict]
IDS = ["model", "dataclass", "typeddict"]


def object_nodes(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Every schema node with named properties, $defs included."""
    found: list[dict[str, Any]] = []

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("properties"), dict):
                found.append(node)
            for key, value in node.items():
                if key == "properties":
                    for sub in value.values():
                        visit(sub)
                elif key not in ("enum", "const", "default", "required"):
                    visit(value)
        elif isinstance(node, list):
            for item in node:
                visit(item)

    visit(schema)
    return found


@pytest.mark.parametrize("t", KINDS, ids=IDS)
def test_every_nested_object_is_closed_in_every_export(t: Tool) -> None:
    exports = {
        "plain": t.to_json_schema(),
        "inline": t.to_json_schema(inline=True),
        "anthropic": t.to_anthropic()["input_schema"],
        "openai": t.to_openai()["function"]["parameters"],
        "openai-responses": t.to_openai(api="responses")["parameters"],
        "openai-strict": t.to_openai(strict=True)["function"]["parameters"],
    }
    for name, schema in exports.items():
        nodes = object_nodes(schema)
        # the arguments, the outer object and the inner one (inline: inner twice, in inner and many)
        assert len(nodes) >= 3, name
        assert all(n.get("additionalProperties") is False for n in nodes), (name, schema)
    plain = exports["plain"]
    outer = resolve_ref(plain, plain["properties"]["outer"]["$ref"])
    inner = resolve_ref(plain, outer["properties"]["inner"]["$ref"])
    assert outer["additionalProperties"] is False and inner["additionalProperties"] is False


@pytest.mark.parametrize("t", KINDS, ids=IDS)
@pytest.mark.parametrize("arguments, loc", [
    ({"outer": {"inner": {"x": 1}, "bogus": 1}}, "outer.bogus"),
    ({"outer": {"inner": {"x": 1, "bogus": 1}}}, "outer.inner.bogus"),
    ({"outer": {"inner": {"x": 1}, "many": [{"x": 1}, {"x": 2, "bogus": 1}]}}, "outer.many[1].bogus"),
])
def test_an_unknown_nested_key_is_refused_naming_it(t: Tool, arguments: dict[str, Any], loc: str) -> None:
    with pytest.raises(ToolInputError) as info:
        t.validate(arguments)
    assert info.value.errors == [{"loc": loc, "msg": "unexpected field", "type": "extra_forbidden"}]
    assert f"{loc}: unexpected field" in str(info.value)
    with pytest.raises(ToolInputError):
        t.invoke(arguments)


@pytest.mark.parametrize("t", KINDS, ids=IDS)
def test_known_keys_pass_and_json_text_too(t: Tool) -> None:
    good = {"outer": {"inner": {"x": "1"}, "many": [{"x": 2}]}}
    assert t.invoke(good).data == 1
    assert t.invoke(json.dumps(good)).data == 1  # type: ignore[arg-type]
    with pytest.raises(ToolInputError, match=r"outer\.inner\.y: unexpected field"):
        t.validate(json.dumps({"outer": {"inner": {"x": 1, "y": 2}}}))  # type: ignore[arg-type]


@pytest.mark.parametrize("t", KINDS, ids=IDS)
def test_unknown_keys_are_reported_with_the_other_errors(t: Tool) -> None:
    with pytest.raises(ToolInputError) as info:
        t.validate({"outer": {"inner": {"x": "not a number", "bogus": 1}, "other": 2}, "extra_arg": 3})
    by_loc = {e["loc"]: e["msg"] for e in info.value.errors}
    assert by_loc["outer.inner.x"].startswith("Input should be a valid integer")
    assert by_loc["extra_arg"].startswith("unexpected argument (valid arguments: outer)")
    assert by_loc["outer.inner.bogus"] == "unexpected field"
    assert by_loc["outer.other"] == "unexpected field"
    assert len(info.value.errors) == 4


def test_a_model_instance_given_by_python_code_is_not_looked_into() -> None:
    outer = MOuter(inner=MInner(x=5))
    assert with_model.validate({"outer": outer})["outer"].inner.x == 5


# -- the override: extra="allow" keeps an object open ----------------------------------------------

class OpenModel(BaseModel):
    model_config = ConfigDict(extra="allow")
    x: int


@dataclasses.dataclass
class OpenDataclass:
    x: int


OpenDataclass.__pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[attr-defined]


class OpenTypedDict(TypedDict):
    x: int


OpenTypedDict.__pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[attr-defined]


class HoldsOpen(BaseModel):
    """A closed model holding an open one: each keeps its own rule."""

    open: OpenModel
    y: int = 0


@tool
def open_model(value: OpenModel, holder: Optional[HoldsOpen] = None) -> dict:  # noqa: UP045
    """Open."""
    return {"extra": value.model_extra, "holder": holder.open.model_extra if holder else None}


@tool
def open_dataclass(value: OpenDataclass) -> int:
    """Open dataclass."""
    return value.x


@tool
def open_typed_dict(value: OpenTypedDict) -> dict:
    """Open TypedDict."""
    return dict(value)


def test_extra_allow_keeps_a_model_open_in_schema_and_validation() -> None:
    schema = open_model.to_json_schema()
    assert schema["$defs"]["OpenModel"]["additionalProperties"] is True
    assert schema["$defs"]["HoldsOpen"]["additionalProperties"] is False
    out = open_model.invoke({"value": {"x": 1, "note": "kept"},
                             "holder": {"open": {"x": 2, "also": True}}}).data
    assert out == {"extra": {"note": "kept"}, "holder": {"also": True}}
    with pytest.raises(ToolInputError) as info:
        open_model.validate({"value": {"x": 1}, "holder": {"open": {"x": 2}, "bogus": 1}})
    assert info.value.errors == [{"loc": "holder.bogus", "msg": "unexpected field", "type": "extra_forbidden"}]


def test_extra_allow_keeps_dataclasses_and_typed_dicts_open() -> None:
    assert open_dataclass.to_json_schema()["$defs"]["OpenDataclass"]["additionalProperties"] is True
    assert open_dataclass.invoke({"value": {"x": 1, "more": 2}}).data == 1
    assert open_typed_dict.to_json_schema()["$defs"]["OpenTypedDict"]["additionalProperties"] is True
    assert open_typed_dict.invoke({"value": {"x": 1, "more": 2}}).data == {"x": 1, "more": 2}


def test_an_open_object_has_no_openai_strict_form() -> None:
    with pytest.raises(ToolDefinitionError, match=r"OpenModel: an object open to unknown keys"):
        open_model.to_openai(strict=True)


# -- unions, maps, optional values ------------------------------------------------------------------

class Circle(BaseModel):
    kind: Literal["circle"]
    radius: float


class Square(BaseModel):
    kind: Literal["square"]
    side: float


@tool
def shapes(shape: Union[Circle, Square], by_name: dict[str, Circle] | None = None) -> str:  # noqa: UP007
    """Undiscriminated union and a map of models."""
    return shape.kind


def test_unions_pick_the_branch_that_fits() -> None:
    assert shapes.invoke({"shape": {"kind": "square", "side": 2}}).as_text() == "square"
    with pytest.raises(ToolInputError) as info:
        shapes.validate({"shape": {"kind": "square", "side": 2, "radius": 1}})
    assert info.value.errors == [{"loc": "shape.radius", "msg": "unexpected field", "type": "extra_forbidden"}]
    # the discriminated union of the golden signatures: the tag picks the branch
    with pytest.raises(ToolInputError, match=r"shape\.side: unexpected field"):
        sigs.unions.validate({"value": 1, "shape": {"kind": "circle", "radius": 1, "side": 2}})
    assert sigs.unions.validate({"value": 1, "shape": {"kind": "circle", "radius": 1}})["shape"].radius == 1


def test_maps_and_optional_values_are_looked_into() -> None:
    with pytest.raises(ToolInputError, match=r"by_name\.a\.bogus: unexpected field"):
        shapes.validate({"shape": {"kind": "circle", "radius": 1},
                         "by_name": {"a": {"kind": "circle", "radius": 1, "bogus": 0}}})
    with pytest.raises(ToolInputError, match=r"tree\.children\[0\]\.bogus: unexpected field"):
        sigs.nested.validate({"person": {"name": "a", "age": 1},
                              "tree": {"value": 1, "children": [{"value": 2, "bogus": 3}]}})
    # OpenAI strict mode sends null for an omitted optional field; that still works inside models.
    assert sigs.nested.validate({"person": {"name": "a", "age": 1, "addresses": None}, "tree": None})[
        "person"].addresses == []


# -- explicit properties and raw schemas ------------------------------------------------------------

def test_object_properties_refuse_unknown_nested_keys_like_signatures() -> None:
    t = (Tool.make("place", "Place.")
         .add_property(ObjectProperty("address", required=True, model=MOuter))
         .add_property(ObjectProperty("meta", properties=[ToolProperty("k", PropertyType.STRING)]))
         .set_callable(lambda address, meta=None: address.inner.x))
    schema = t.to_json_schema()
    assert schema["properties"]["address"]["additionalProperties"] is False
    assert schema["$defs"]["MInner"]["additionalProperties"] is False
    assert t.invoke({"address": {"inner": {"x": 3}}}).data == 3
    with pytest.raises(ToolInputError) as info:
        t.validate({"address": {"inner": {"x": 3, "bogus": 1}}, "meta": {"k": "v", "other": 1}})
    assert {e["loc"]: e["msg"] for e in info.value.errors} == {
        "address.inner.bogus": "unexpected field", "meta.other": "unexpected field"}


def test_raw_json_schemas_are_the_callers_and_stay_as_written() -> None:
    raw = {"type": "object", "properties": {"o": {"type": "object", "properties": {"a": {"type": "string"}}}}}
    t = Tool.from_json_schema("raw", "Raw.", raw, lambda o: o)
    assert "additionalProperties" not in t.to_json_schema()["properties"]["o"]
    assert t.invoke({"o": {"a": "x", "b": 1}}).data == {"a": "x", "b": 1}


# -- version independence --------------------------------------------------------------------------

@pytest.mark.parametrize("t", sigs.ALL, ids=[t.name for t in sigs.ALL])
def test_golden_files_match_byte_for_byte(t: Tool) -> None:
    """Not only equal as data: the same text, key order included, under every pydantic version."""
    text = json.dumps(exported(t), indent=2, ensure_ascii=False) + "\n"
    assert text == (GOLDEN / f"{t.name}.json").read_text()


def test_canonical_schema_normalises_what_old_pydantic_versions_write() -> None:
    old = {"type": "object", "title": "T",
           "properties": {"a": {"allOf": [{"$ref": "#/$defs/A"}], "description": "d"},
                          "k": {"const": "x"}, "n": {"const": 1}},
           "$defs": {"Z": {"properties": {}, "type": "object"}, "A": {"type": "string", "enum": ["p"]}}}
    out = canonical_schema(old)
    assert out["properties"]["a"] == {"$ref": "#/$defs/A", "description": "d"}
    assert out["properties"]["k"] == {"const": "x", "type": "string"}
    assert out["properties"]["n"] == {"const": 1, "type": "integer"}
    assert out["additionalProperties"] is False and out["$defs"]["Z"]["additionalProperties"] is False
    assert list(out) == sorted(out) and list(out["$defs"]) == ["A", "Z"]
    assert list(out["properties"]) == ["a", "k", "n"]  # declaration order kept
    assert old["properties"]["a"] == {"allOf": [{"$ref": "#/$defs/A"}], "description": "d"}  # a copy
