"""The ways to define a tool, their equivalence on the wire, and definition-time errors."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from toolfork import (
    ArrayProperty,
    ObjectProperty,
    PropertyType,
    Tool,
    ToolDefinitionError,
    ToolInputError,
    ToolOutput,
    ToolProperty,
    ToolRuntime,
    tool,
)

# -- three ways, one wire format --------------------------------------------------------------------


@tool
def forecast(city: str, days: int, unit: Literal["c", "f"], hours: list[int]) -> str:
    """Forecast the weather.

    Args:
        city: the city
        days: days ahead
        unit: the unit
        hours: hours of the day
    """
    return f"{city} {days} {unit} {hours}"


class ForecastTool(Tool):
    name = "forecast"
    description = "Forecast the weather."

    def properties(self) -> list[ToolProperty]:
        return [
            ToolProperty("city", PropertyType.STRING, "the city", required=True),
            ToolProperty("days", PropertyType.INTEGER, "days ahead", required=True),
            ToolProperty("unit", PropertyType.STRING, "the unit", required=True, enum=["c", "f"]),
            ArrayProperty("hours", "hours of the day", required=True,
                          items=ToolProperty("hour", PropertyType.INTEGER)),
        ]

    def __call__(self, city: str, days: int, unit: str, hours: list[int]) -> str:
        return f"{city} {days} {unit} {hours}"


class TypedForecastTool(Tool):
    name = "forecast"

    def __call__(self, city: str, days: int, unit: Literal["c", "f"], hours: list[int]) -> str:
        """Forecast the weather.

        Args:
            city: the city
            days: days ahead
            unit: the unit
            hours: hours of the day
        """
        return f"{city} {days} {unit} {hours}"


def fluent_forecast() -> Tool:
    return (
        Tool.make("forecast", "Forecast the weather.")
        .add_property(ToolProperty("city", PropertyType.STRING, "the city", required=True))
        .add_property(ToolProperty("days", "integer", "days ahead", required=True))
        .add_property(ToolProperty("unit", PropertyType.STRING, "the unit", required=True, enum=["c", "f"]))
        .add_property(ArrayProperty("hours", "hours of the day", required=True,
                                    items=ToolProperty("hour", PropertyType.INTEGER)))
        .set_callable(lambda city, days, unit, hours: f"{city} {days} {unit} {hours}")
    )


def all_forecasts() -> list[Tool]:
    raw = Tool.from_json_schema("forecast", "Forecast the weather.", forecast.to_json_schema(),
                                lambda **kw: f"{kw['city']} {kw['days']} {kw['unit']} {kw['hours']}")
    return [forecast, ForecastTool(), TypedForecastTool(), fluent_forecast(), raw]


def test_all_ways_are_equivalent_on_the_wire() -> None:
    tools = all_forecasts()
    expected = forecast.to_anthropic()
    for t in tools:
        assert t.to_anthropic() == expected, type(t).__name__
        assert t.to_openai(strict=True) == forecast.to_openai(strict=True)
        # Same arguments and description; only signature-based tools know their return type.
        assert t.to_string().replace("-> any", "-> string") == forecast.to_string()


def test_all_ways_validate_and_invoke_alike() -> None:
    for t in all_forecasts():
        assert t.invoke({"city": "Oslo", "days": 2, "unit": "c", "hours": [1, 2]}).as_text() == "Oslo 2 c [1, 2]"
        with pytest.raises(ToolInputError) as info:
            t.invoke({"city": "Oslo", "days": 2, "unit": "k", "hours": [1, "x"], "extra": 1})
        assert {e["loc"] for e in info.value.errors} == {"unit", "hours[1]", "extra"}, type(t).__name__


# -- the decorator ------------------------------------------------------------------------------------

def test_decorated_tool_is_still_callable_like_the_function() -> None:
    assert forecast("a", 1, "c", []) == "a 1 c []"
    assert forecast.__wrapped__.__name__ == "forecast"
    assert forecast.__doc__ is not None and forecast.__doc__.startswith("Forecast")


def test_decorator_with_settings_and_name() -> None:
    @tool(name="lookup", timeout=5, max_runs=2, on_error="fail-run", retries=1, inline=True,
          track_by_inputs=True, max_output_chars=100, visible=False, description="Look it up.")
    def find(q: str) -> str:
        return q

    assert (find.name, find.timeout, find.max_runs, find.on_error, find.retries) == ("lookup", 5.0, 2,
                                                                                     "fail-run", 1)
    assert find.inline and find.track_by_inputs and not find.is_visible
    assert find.description == "Look it up." and find.max_output_chars == 100

    @tool("named")
    def other(q: str) -> str:
        return q

    assert other.name == "named"


def test_one_configured_decorator_wraps_several_functions_alike() -> None:
    shared = tool(description="Shared.", timeout=3)

    def first(q: str) -> str:
        return q

    def second(q: str) -> str:
        return q

    made = [shared(first), shared(second)]
    assert [(t.name, t.description, t.timeout) for t in made] == [("first", "Shared.", 3.0), ("second", "Shared.", 3.0)]


def test_default_settings() -> None:
    assert (forecast.timeout, forecast.max_runs, forecast.on_error, forecast.inline, forecast.retries) == (
        None, None, "fail-run", False, 0)
    assert forecast.is_visible and not forecast.track_by_inputs and forecast.approval_policy is None
    assert forecast.visible(False) is forecast and not forecast.is_visible
    forecast.visible(True)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(*args: int) -> None: ...", r"\*args cannot be described"),
        ("def f(**kwargs: int) -> None: ...", r"\*\*kwargs cannot be described"),
        ("def f(a) -> None: ...", r"parameter 'a' has no type hint; add one"),
        ("def f(a: int, /) -> None: ...", "positional-only"),
        ("def f(self, a: int) -> None: ...", r"decorate the bound method"),
        ('def f(a: int) -> None:\n    """F.\n\n    Args:\n        b: typo\n    """', "documents b"),
        ("def f(a: 'Missing') -> None: ...", r"cannot resolve a type hint"),
        ("def f(a: object()) -> None: ...", r"unsupported parameter type for parameter 'a'"),
    ],
)
def test_bad_functions_fail_at_decoration_time(source: str, message: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(ToolDefinitionError, match=message):
        tool(namespace["f"])


@pytest.mark.parametrize("name", ["has space", "a" * 65, "dot.name", "ünïcode", 5])
def test_bad_names_are_refused(name: Any) -> None:
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        tool(name=name)(lambda x: x)
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        Tool.make(name)
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        Tool.from_json_schema(name, "d", {"type": "object"})


def test_a_lambda_needs_a_name() -> None:
    with pytest.raises(ToolDefinitionError, match=r"the function name '<lambda>' is not a valid tool name.*name="):
        tool(lambda x: x)
    with pytest.raises(ToolDefinitionError, match="a tool needs a name"):
        Tool.make("")


def test_good_names_up_to_64_characters() -> None:
    assert Tool.make("a" * 64).name == "a" * 64
    assert Tool.make("get-weather_2").name == "get-weather_2"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"timeout": "5"}, "timeout must be a positive number"),
        ({"max_runs": -1}, "max_runs must be an integer >= 0"),
        ({"retries": 1.5}, "retries must be a non-negative integer"),
        ({"on_error": "ignore"}, "on_error must be one of"),
        ({"output_model": dict}, "output_model must be a pydantic BaseModel"),
        ({"approval_policy": 3}, "approval_policy must be True"),
        ({"on_tool_called": 3}, "on_tool_called must be callable or None"),
        ({"max_output_chars": 0}, "max_output_chars must be an integer >= 1"),
    ],
)
def test_bad_settings_are_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolDefinitionError, match=message):
        tool(name="t", **settings)(lambda x: x)


def test_configure_refuses_unknown_settings() -> None:
    with pytest.raises(ToolDefinitionError, match="unknown setting 'timout'"):
        Tool.make("t").configure(timout=3)


def test_functions_without_names_need_one() -> None:
    def base(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ToolDefinitionError, match="pass name="):
        tool(functools.partial(base, b=1))
    t = tool(name="inc")(functools.partial(base, b=1))
    assert t.invoke({"a": 1}).data == 2


def test_bound_methods_and_callable_objects() -> None:
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        def bump(self, by: int) -> int:
            """Bump the counter.

            Args:
                by: the increment
            """
            self.n += by
            return self.n

    c = Counter()
    t = tool(c.bump)
    assert t.to_json_schema()["properties"]["by"]["description"] == "the increment"
    assert t.invoke({"by": 2}).data == 2 and c.n == 2


def test_local_classes_resolve_under_postponed_annotations() -> None:
    class Local(BaseModel):
        x: int

    @tool
    def uses_local(item: Local) -> int:
        """Use a local model."""
        return item.x

    assert uses_local.invoke({"item": {"x": 3}}).data == 3


# -- subclasses ------------------------------------------------------------------------------------

def test_subclass_name_defaults_to_snake_case_and_description_to_docstrings() -> None:
    class SearchWebTool(Tool):
        """Search the web for a query."""

        def __call__(self, query: str) -> str:
            return query

    t = SearchWebTool()
    assert t.name == "search_web_tool"
    assert t.description == "Search the web for a query."


def test_subclass_with_constructor_state_and_class_settings() -> None:
    class Greeter(Tool):
        name = "greet"
        description = "Greet someone."
        timeout = 2.5
        max_runs = 1

        def __init__(self, greeting: str) -> None:
            self.greeting = greeting
            super().__init__()

        def __call__(self, who: str) -> str:
            return f"{self.greeting}, {who}"

    g = Greeter("Hello")
    assert g.invoke({"who": "Ann"}).as_text() == "Hello, Ann"
    assert (g.timeout, g.max_runs) == (2.5, 1)
    g2 = Greeter("Hi").set_timeout(1).set_max_runs(3)
    assert (g2.timeout, g2.max_runs, Greeter.timeout) == (1.0, 3, 2.5)


def test_subclass_cannot_also_take_a_function() -> None:
    class T(Tool):
        def __call__(self, a: int) -> int:
            return a

    with pytest.raises(ToolDefinitionError, match="defines __call__"):
        T(fn=lambda a: a)
    with pytest.raises(ToolDefinitionError, match="defines __call__ already"):
        T().set_callable(lambda a: a)


# -- properties ------------------------------------------------------------------------------------

def test_optional_properties_absent_use_the_callable_default() -> None:
    t = (Tool.make("p", "P.")
         .add_property(ToolProperty("a", PropertyType.STRING, "a", required=True))
         .add_property(ToolProperty("b", PropertyType.INTEGER, "b"))
         .set_callable(lambda a, b=7: f"{a}{b}"))
    assert t.validate({"a": "x"}) == {"a": "x"}
    assert t.invoke({"a": "x"}).as_text() == "x7"
    assert t.to_json_schema()["required"] == ["a"]


def test_object_property_with_sub_properties_gives_a_dict() -> None:
    t = (Tool.make("geo", "Geo.")
         .add_property(ObjectProperty("point", "a point", required=True, properties=[
             ToolProperty("lat", PropertyType.NUMBER, "latitude", required=True),
             ToolProperty("label", PropertyType.STRING, "label"),
             ArrayProperty("tags", "tags", items=ToolProperty("t", PropertyType.STRING), min_items=1),
         ]))
         .set_callable(lambda point: point))
    schema = t.to_json_schema()["properties"]["point"]
    assert schema == {
        "type": "object", "description": "a point",
        "properties": {"lat": {"type": "number", "description": "latitude"},
                       "label": {"type": "string", "description": "label"},
                       "tags": {"type": "array", "description": "tags", "items": {"type": "string"},
                                "minItems": 1}},
        "required": ["lat"], "additionalProperties": False,
    }
    assert t.invoke({"point": {"lat": "1.5"}}).data == {"lat": 1.5}
    with pytest.raises(ToolInputError) as info:
        t.validate({"point": {"label": 3, "tags": [], "x": 1}})
    assert {e["loc"] for e in info.value.errors} == {"point.lat", "point.label", "point.tags", "point.x"}


def test_object_property_with_a_model_gives_an_instance_and_hoists_defs() -> None:
    class Item(BaseModel):
        sku: str
        qty: int = 1

    class Order(BaseModel):
        """An order."""

        items: list[Item]
        note: str | None = None

    seen: list[Any] = []
    t = (Tool.make("order", "Place an order.")
         .add_property(ObjectProperty("order", "the order", required=True, model=Order))
         .set_callable(lambda order: seen.append(order) or "ok"))
    schema = t.to_json_schema()
    assert schema["properties"]["order"]["description"] == "the order"
    assert schema["properties"]["order"]["properties"]["items"]["items"] == {"$ref": "#/$defs/Item"}
    assert set(schema["$defs"]) == {"Item"}
    t.invoke({"order": {"items": [{"sku": "a"}]}})
    assert isinstance(seen[0], Order) and seen[0].items[0] == Item(sku="a", qty=1)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ToolProperty("x", "text"), "unknown type 'text'"),
        (lambda: ToolProperty("", PropertyType.STRING), "non-empty string name"),
        (lambda: ToolProperty("x", PropertyType.STRING, enum=[]), "enum must list"),
        (lambda: ArrayProperty("x", min_items=3, max_items=1), "min_items 3 > max_items 1"),
        (lambda: ObjectProperty("x", model=dict), "must be a pydantic BaseModel"),  # type: ignore[arg-type]
        (lambda: ObjectProperty("x", properties=[ToolProperty("a", "string")] * 2), "two properties"),
        (lambda: Tool.make("t").add_property(ToolProperty("a", "string")).add_property(
            ToolProperty("a", "integer")), "two properties are named 'a'"),
        (lambda: Tool.make("t").add_property(ToolProperty("a", "string")).set_callable(lambda b: b),
         "does not accept argument"),
        (lambda: forecast.add_property(ToolProperty("a", "string")), "takes its parameters from its signature"),
    ],
)
def test_property_definition_errors(build: Any, message: str) -> None:
    with pytest.raises(ToolDefinitionError, match=message):
        build()


def test_invoking_without_a_callable_is_a_clear_error() -> None:
    with pytest.raises(ToolDefinitionError, match="has no callable"):
        Tool.make("t").invoke({})


# -- runtime, async, output ---------------------------------------------------------------------------

def test_runtime_is_injected_and_defaulted() -> None:
    seen: list[ToolRuntime] = []

    @tool
    def probe(x: int, runtime: ToolRuntime) -> int:
        """Probe."""
        seen.append(runtime)
        runtime.set_context({"x": x})
        return x

    rt = ToolRuntime("call-1", "probe", context={})
    probe.invoke({"x": 1}, rt)
    probe.invoke({"x": 2})
    assert seen[0] is rt and rt.context == {"x": 1}
    assert seen[1].tool_name == "probe" and seen[1].call_id == ""
    # A model cannot pass the runtime itself.
    with pytest.raises(ToolInputError, match="runtime: unexpected argument"):
        probe.validate({"x": 1, "runtime": {}})


def test_runtime_in_property_and_subclass_tools() -> None:
    class Prog(Tool):
        def properties(self) -> list[ToolProperty]:
            return [ToolProperty("n", PropertyType.INTEGER, required=True)]

        def __call__(self, n: int, runtime: ToolRuntime) -> str:
            return f"{n} {runtime.call_id}"

    assert Prog().uses_runtime
    assert Prog().invoke({"n": 1}, ToolRuntime("c9")).as_text() == "1 c9"


def test_async_tools_run_to_completion_even_inside_a_running_loop() -> None:
    @tool
    async def later(x: int) -> int:
        """Later."""
        await asyncio.sleep(0)
        return x * 2

    assert later.invoke({"x": 2}).data == 4

    async def inside() -> int:
        return later.invoke({"x": 5}).data  # type: ignore[no-any-return]

    assert asyncio.run(inside()) == 10


def test_exceptions_from_the_tool_propagate_unchanged() -> None:
    class Boom(RuntimeError):
        pass

    @tool
    def explode(x: int) -> None:
        """Explode."""
        raise Boom(f"bad {x}")

    with pytest.raises(Boom, match="bad 3"):
        explode.invoke({"x": 3})


def test_max_output_chars_is_a_setting_for_the_agent_not_applied_by_invoke() -> None:
    @tool(max_output_chars=10)
    def long(n: int) -> str:
        """Long."""
        return "x" * n

    assert long.max_output_chars == 10
    assert long.invoke({"n": 100}).as_text() == "x" * 100


def test_approval_policy_is_kept_as_given() -> None:
    def policy(inputs: dict[str, Any]) -> bool | str:
        return inputs.get("x") == 1 or "only x=1"

    @tool(approval_policy=policy)
    def t(x: int) -> int:
        return x

    assert t.approval_policy is policy
    assert t.approval_policy({"x": 2}) == "only x=1"  # type: ignore[misc]

    class Guarded(Tool):
        def approval_policy(self, inputs: dict[str, Any]) -> bool | str:  # type: ignore[override]
            return True

        def __call__(self, x: int) -> int:
            return x

    assert Guarded().approval_policy({"x": 1}) is True  # type: ignore[misc]


def test_tool_returning_tool_output_is_passed_through() -> None:
    @tool
    def refuse(x: str) -> ToolOutput:
        """Refuse."""
        return ToolOutput.error(f"no {x}")

    out = refuse.invoke({"x": "a"})
    assert out.is_error and out.as_text() == "no a"
