"""function_tools in the OpenAI Agents SDK's Runner, driven by a scripted Model (no network)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, FunctionTool, RunConfig, Runner

from tests.adapters.adapter_tools import ALL, naps
from tests.adapters.fakes import openai_agents_model
from toolfork import tool
from toolfork.adapters.openai_agents import function_tools
from toolfork.executor import Executor

NAPS = [("nap", {"seconds": 0.5})] * 3
NO_TRACING = RunConfig(tracing_disabled=True)


@tool
def greet(name: str, greeting: str = "hello", times: int | None = None) -> str:
    """Greet someone.

    Args:
        name: who
        greeting: how
        times: how often (default once)
    """
    return " ".join([f"{greeting} {name}"] * (times or 1))


def run(calls: list[tuple[str, dict[str, Any]]], tools: list[FunctionTool]) -> tuple[dict[str, str], float, Any]:
    model = openai_agents_model(calls)
    start = time.monotonic()
    result = Runner.run_sync(Agent(name="t", model=model, tools=tools), "go", run_config=NO_TRACING)
    return json.loads(result.final_output), time.monotonic() - start, model


def test_the_calls_of_one_response_run_side_by_side_in_workers() -> None:
    with Executor(ALL, workers=4) as ex:
        outs, _, _ = run([*NAPS, ("add", {"a": 2, "b": 3})], function_tools(ALL, ex))
    pids, together = naps([outs[f"c{i}"] for i in range(3)])
    assert os.getpid() not in pids and len(pids) == 3
    assert together, "the three calls were never all running at once"
    assert outs["c3"] == "5"


def say(ctx: Any, error: Exception) -> str:
    return f"Error: {type(error).__name__}: {error}"


def test_a_failing_crashing_or_hung_call_fails_alone() -> None:
    with Executor(ALL, workers=4) as ex:
        outs, elapsed, _ = run([("crash", {}), ("add", {"a": 2, "b": 3}), ("hang", {}), ("boom", {}),
                                ("add", {"a": 1, "b": "x"})], function_tools(ALL, ex, failure_error_function=say))
    assert outs["c1"] == "5"
    assert outs["c0"].startswith("Error: PoolCallFailed: ") and "crashed" in outs["c0"]
    assert "timeout of 1.0s" in outs["c2"]
    assert outs["c3"] == "Error: PoolCallFailed: ValueError: boom from the tool"
    assert outs["c4"].startswith("Error: ModelBehaviorError: Invalid JSON input for tool add: ToolInputError: "
                                 "Invalid arguments for tool 'add'")
    assert 0.9 < elapsed < 6, f"the hung call should end at its 1 s timeout, the run took {elapsed:.2f} s"


def test_schemas_are_strict_and_a_null_optional_means_its_default() -> None:
    with Executor([greet], workers=1) as ex:
        [ft] = function_tools([greet], ex)
        assert ft.strict_json_schema is True
        schema = ft.params_json_schema
        assert schema["additionalProperties"] is False and schema["required"] == ["name", "greeting", "times"]
        outs, _, model = run([("greet", {"name": "Ann", "greeting": None, "times": 2})], [ft])
    assert outs["c0"] == "hello Ann hello Ann"
    assert [t.name for t in model.tools] == ["greet"]  # the SDK offered the model our tool


def test_by_default_the_model_reads_the_sdks_failure_message() -> None:
    with Executor(ALL, workers=1) as ex:
        outs, _, _ = run([("boom", {}), ("add", {"a": 1, "b": 2})], function_tools(ALL, ex))
    assert outs == {"c0": _sdk_default_error(), "c1": "3"}


def _sdk_default_error() -> str:
    """The SDK's own default failure text (its wording changed across releases: 0.25 dropped "Please
    try again."), so the tests hold against the lowest and the newest SDK alike."""
    from agents.tool import default_tool_error_function

    return default_tool_error_function(None, Exception("boom"))  # type: ignore[arg-type]
