"""Argument validation: every failing field is named, in words a model can act on."""

from __future__ import annotations

import pickle

import pytest
import tools_signatures as sigs
from pydantic import BaseModel

from toolfork import Tool, ToolInputError, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b


def errors_of(t: Tool, arguments: object) -> list[dict[str, object]]:
    with pytest.raises(ToolInputError) as info:
        t.validate(arguments)  # type: ignore[arg-type]
    assert info.value.tool_name == t.name
    return info.value.errors


def test_valid_arguments_are_coerced_like_pydantic_lax_mode() -> None:
    assert add.validate({"a": 1, "b": "2"}) == {"a": 1, "b": 2}
    assert add.validate({"a": 1.0, "b": 2}) == {"a": 1, "b": 2}


def test_message_lists_every_failing_field_with_the_bad_value() -> None:
    with pytest.raises(ToolInputError) as info:
        add.validate({"b": "x", "c": 3})
    message = str(info.value)
    assert message.startswith("Invalid arguments for tool 'add': ")
    assert "a: missing required argument" in message
    assert "b: Input should be a valid integer" in message and "(got 'x')" in message
    assert "c: unexpected argument (valid arguments: a, b)" in message
    assert [e["loc"] for e in info.value.errors] == ["a", "b", "c"]


def test_unknown_arguments_are_refused() -> None:
    errors = errors_of(add, {"a": 1, "b": 2, "verbose": True})
    assert errors == [{"loc": "verbose", "msg": "unexpected argument (valid arguments: a, b)",
                       "type": "extra_forbidden"}]


def test_nested_paths_use_dots_and_indexes() -> None:
    errors = errors_of(sigs.nested, {
        "person": {"name": "Ann", "age": 200, "addresses": [{"street": "s", "city": "c"}, {"street": 5}]},
    })
    locs = {e["loc"]: e["msg"] for e in errors}
    assert set(locs) == {"person.age", "person.addresses[1].street", "person.addresses[1].city"}
    assert locs["person.age"] == "Input should be less than or equal to 150 (got 200)"
    assert locs["person.addresses[1].city"] == "missing required field"


def test_union_member_tags_are_merged_into_one_message() -> None:
    errors = errors_of(sigs.unions, {"value": [1], "shape": {"kind": "circle", "radius": 1}})
    assert errors == [{
        "loc": "value",
        "msg": "Input should be a valid integer or Input should be a valid string (got [1])",
        "type": "int_type",
    }]


def test_union_of_models_reports_the_inner_field() -> None:
    errors = errors_of(sigs.unions, {"value": 1, "shape": {"kind": "square", "side": "wide"}})
    assert [e["loc"] for e in errors] == ["shape.side"]


def test_enum_and_literal_errors_name_the_allowed_values() -> None:
    errors = errors_of(sigs.choices, {"color": "purple", "priority": 3, "mode": "medium"})
    msgs = {e["loc"]: e["msg"] for e in errors}
    assert msgs["color"] == "Input should be 'red', 'green' or 'blue' (got 'purple')"
    assert msgs["priority"] == "Input should be 1 or 2 (got 3)"
    assert msgs["mode"] == "Input should be 'fast' or 'slow' (got 'medium')"


def test_long_bad_values_are_shortened_in_messages() -> None:
    errors = errors_of(add, {"a": "x" * 500, "b": 1})
    assert len(errors[0]["msg"]) < 200  # type: ignore[arg-type]
    assert "..." in errors[0]["msg"]  # type: ignore[operator]


def test_arguments_as_json_text_are_accepted() -> None:
    assert add.validate('{"a": 1, "b": 2}') == {"a": 1, "b": 2}  # type: ignore[arg-type]
    assert sigs.no_arguments.validate("") == {}  # type: ignore[arg-type]
    errors = errors_of(add, "{not json")
    assert errors[0]["loc"] == "" and "not JSON" in errors[0]["msg"]  # type: ignore[operator]


def test_non_object_arguments_are_refused_clearly() -> None:
    for bad in ([1, 2], 3, "[1, 2]"):
        errors = errors_of(add, bad)
        assert "arguments must be a JSON object" in errors[0]["msg"]  # type: ignore[operator]
    assert sigs.no_arguments.validate(None) == {}  # type: ignore[arg-type]


def test_a_mapping_that_is_not_a_dict_is_accepted() -> None:
    from types import MappingProxyType

    assert add.validate(MappingProxyType({"a": 1, "b": 2})) == {"a": 1, "b": 2}


def test_structured_input_gives_the_tool_model_instances() -> None:
    values = sigs.nested.validate({"person": {"name": "Ann", "age": "30"},
                                   "tree": {"value": 1, "children": [{"value": 2}]}})
    assert isinstance(values["person"], sigs.Person) and values["person"].age == 30
    assert isinstance(values["tree"].children[0], sigs.Tree)
    shaped = sigs.unions.validate({"value": 7, "shape": {"kind": "circle", "radius": 2}})
    assert isinstance(shaped["shape"], sigs.Circle)
    assert sigs.structures.validate({"size": {"width": 1, "height": 2}, "filters": {"query": "q"}})["size"] \
        == sigs.Size(1, 2)


def test_parameter_names_clashing_with_pydantic_work() -> None:
    assert sigs.awkward_names.validate({"schema": "s", "model_name": "m", "json": "4"}) == {
        "schema": "s", "model_name": "m", "json": 4}
    errors = errors_of(sigs.awkward_names, {"schema": 1, "model_name": "m", "copy": 1})
    assert {e["loc"] for e in errors} == {"schema", "copy"}
    assert sigs.awkward_names.invoke({"schema": "s", "model_name": "m"}).as_text() == "s m 0"


def test_constraints_from_annotated_fields_are_enforced() -> None:
    errors = errors_of(sigs.constrained, {"name": "", "n": 11})
    msgs = {e["loc"]: e["msg"] for e in errors}
    assert msgs["name"].startswith("String should have at least 1 character")
    assert msgs["n"].startswith("Input should be less than or equal to 10")


def test_tool_input_error_pickles_with_its_fields() -> None:
    try:
        add.validate({"a": "x"})
    except ToolInputError as exc:
        copy = pickle.loads(pickle.dumps(exc))
        assert isinstance(copy, ToolInputError)
        assert copy.tool_name == "add" and copy.errors == exc.errors and str(copy) == str(exc)
    else:
        pytest.fail("no error")


def test_model_validators_messages_reach_the_model() -> None:
    from pydantic import model_validator

    class Span(BaseModel):
        start: int
        end: int

        @model_validator(mode="after")
        def ordered(self) -> Span:
            if self.end < self.start:
                raise ValueError("end must not be before start")
            return self

    @tool
    def span(s: Span) -> int:
        """Length of a span."""
        return s.end - s.start

    errors = errors_of(span, {"s": {"start": 5, "end": 1}})
    assert errors[0]["loc"] == "s"
    assert "end must not be before start" in errors[0]["msg"]  # type: ignore[operator]
