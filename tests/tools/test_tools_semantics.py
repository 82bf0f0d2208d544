"""Tool-level semantics of issue 12 §2: generator tools (progress across processes, the result),
the runtime's fields under a bare Executor, ``make()`` on a Tool subclass, manual tools and
interactive hooks as settings, static approval, and the warning for a tool with no description."""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import AsyncIterator, Generator
from typing import Any

import pytest

from toolfork import Tool, ToolDefinitionError, ToolRuntime, tool
from toolfork.executor import Executor
from toolfork.executor.types import CallFinished, CallProgress, ToolCall
from toolfork.tools import MissingDescriptionWarning


@tool
def ticks(n: int) -> Generator[dict[str, int], None, str]:
    """Yield n ticks as progress, then return a summary.

    Args:
        n: how many ticks
    """
    for i in range(n):
        yield {"tick": i, "pid": os.getpid()}
    return f"{n} ticks"


@tool
async def waves(n: int) -> AsyncIterator[str]:
    """Yield n waves; the last one is the result.

    Args:
        n: how many waves
    """
    for i in range(n):
        await asyncio.sleep(0)
        yield f"wave {i}"


@tool
def bare_runtime(runtime: ToolRuntime) -> list[Any]:
    """What a bare Executor's runtime carries."""
    call = runtime.tool_call
    return [runtime.run_id, runtime.agent_id, runtime.step_index, call.id, call.name, call.arguments]


@pytest.mark.parametrize("mode", ["fork", "sequential"])
def test_generator_yields_are_progress_and_the_result_is_the_return_value(mode: str) -> None:
    calls = [ToolCall("t", "ticks", {"n": 3}), ToolCall("w", "waves", {"n": 2}), ToolCall("r", "bare_runtime")]
    with Executor([ticks, waves, bare_runtime], mode=mode, workers=2) as ex:
        events = list(ex.stream(calls))
    progress: dict[str, list[Any]] = {}
    results = {}
    for event in events:
        if isinstance(event, CallProgress):
            progress.setdefault(event.call_id, []).append(event.value)
        elif isinstance(event, CallFinished):
            results[event.call_id] = event.result
    assert [p["tick"] for p in progress["t"]] == [0, 1, 2]
    assert (progress["t"][0]["pid"] != os.getpid()) is (mode == "fork"), "yields cross the process boundary"
    assert results["t"].status == "ok" and results["t"].output.as_text() == "3 ticks"
    assert progress["w"] == ["wave 0", "wave 1"] and results["w"].output.as_text() == "wave 1"
    assert "generator object" not in results["t"].output.as_text()
    # A bare Executor has no agent: no run, agent or step; the call itself is known.
    assert results["r"].output.data == [None, None, None, "r", "bare_runtime", {}]


def test_a_generator_called_directly_still_gives_its_result() -> None:
    assert ticks.invoke({"n": 2}).as_text() == "2 ticks"
    assert waves.invoke({"n": 3}).as_text() == "wave 2"
    assert ticks.uses_runtime and waves.uses_runtime


class WeatherTool(Tool):
    """Look up the weather with an API key."""

    name = "weather"

    def __init__(self, api_key: str) -> None:
        super().__init__()
        self.api_key = api_key

    def __call__(self, city: str) -> str:
        return f"{city}: sunny ({len(self.api_key)}-char key)"


class NoInitTool(Tool):
    """A subclass that takes no constructor arguments."""

    def __call__(self, x: int) -> int:
        return x


def test_make_on_a_subclass_builds_the_subclass_or_refuses() -> None:
    made = WeatherTool.make("API_KEY")
    assert type(made) is WeatherTool and made.name == "weather" and made.api_key == "API_KEY"
    assert made.invoke({"city": "Oslo"}).as_text() == "Oslo: sunny (7-char key)"
    with pytest.raises(ToolDefinitionError, match=r"NoInitTool.make\(\.\.\.\) passes its arguments to "
                                                  r"NoInitTool.__init__, which NoInitTool does not define: "
                                                  r"Tool.__init__ would take 'API_KEY' as the tool's name"):
        NoInitTool.make("API_KEY")
    assert NoInitTool.make().name == "no_init_tool"
    fluent = Tool.make("plain", "A plain fluent tool.", timeout=3)
    assert type(fluent) is Tool and fluent.timeout == 3.0 and not fluent.has_callable


def test_manual_tools_hooks_and_static_approval_are_settings() -> None:
    manual = Tool.make("sign", "A person signs.", manual=True)
    assert manual.manual and not manual.has_callable
    with pytest.raises(ToolDefinitionError, match="tool 'sign': manual=True means the tool has no callable"):
        manual.set_callable(lambda: "x")
    with pytest.raises(ToolDefinitionError, match="manual=True means the tool has no callable"):
        tool(manual=True, description="d")(_identity)
    assert tool(approval_policy=True, description="d")(_identity).approval_policy is True
    assert tool(approval_policy=False, description="d")(_identity).approval_policy is False
    hooked = Tool("h", "Hooked.", _identity, on_tool_called=lambda i: None, on_response_received=str)
    assert hooked.on_response_received is str


def _identity(x: int) -> int:
    return x


def test_a_tool_without_description_warns_naming_it_at_the_users_line() -> None:
    with pytest.warns(MissingDescriptionWarning, match="tool 'nameless' has no description") as record:
        Tool.make("nameless")
    assert record[0].filename == __file__, "the warning points at the definition, not at toolfork"
    with pytest.warns(MissingDescriptionWarning, match="tool '_identity' has no description"):
        tool(_identity)
    with pytest.warns(MissingDescriptionWarning, match="tool 'raw'"):
        Tool.from_json_schema("raw", None, {"type": "object"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingDescriptionWarning)
        Tool.make("described", "Has one.")
        assert ticks.description.startswith("Yield n ticks")


def test_next_turn_params_are_checked_where_the_tool_asks() -> None:
    runtime = ToolRuntime("c1", "t")
    runtime.set_next_turn_params(model="m", temperature=0)
    runtime.set_next_turn_params(tool_choice="required")
    assert runtime.context_updates == {"__toolfork_next_turn__": {"model": "m", "temperature": 0,
                                                                  "tool_choice": "required"}}
    with pytest.raises(ValueError, match=r"unknown parameter.*top_p.*valid: model, temperature"):
        runtime.set_next_turn_params(top_p=0.5)
    with pytest.raises(ValueError, match="temperature must be a number or None, got 'hot'"):
        runtime.set_next_turn_params(temperature="hot")
    with pytest.raises(ValueError, match="model must be a non-empty string"):
        runtime.set_next_turn_params(model="")
    # The reserved keys never show in what a tool reads.
    inside = ToolRuntime("c2", "t", context={"user": "ana", "__toolfork_agent__": {"run_id": "r", "step_index": 2},
                                             "__toolfork_next_turn__": {"model": "m"}})
    assert inside.context == {"user": "ana"} and (inside.run_id, inside.step_index, inside.agent_id) == ("r", 2, None)
