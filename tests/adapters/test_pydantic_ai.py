"""ToolforkToolset in pydantic-ai's own agent loop, driven by its FunctionModel."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent

from tests.adapters.adapter_tools import ALL, add, naps
from tests.adapters.fakes import pydantic_ai_model, retried, returned
from toolfork.adapters.pydantic_ai import ToolCallError, ToolforkToolset

NAPS = [("nap", {"seconds": 0.5})] * 3


def test_the_calls_of_one_response_run_side_by_side_in_workers() -> None:
    model, seen = pydantic_ai_model([*NAPS, ("where", {"tag": "w"})])
    with ToolforkToolset(ALL, workers=4) as toolset:
        result = Agent(model, toolsets=[toolset]).run_sync("go")
    assert result.output == "done"
    got = returned(seen[0])
    pids, together = naps([got[f"t0c{i}"] for i in range(3)])
    assert os.getpid() not in pids and len(pids) == 3
    assert together, "the three calls were never all running at once"
    assert got["t0c3"]["tag"] == "w" and got["t0c3"]["pid"] != os.getpid()  # structured data stays data


def test_a_failing_crashing_or_hung_call_fails_alone() -> None:
    model, seen = pydantic_ai_model([("crash", {}), ("add", {"a": 2, "b": 3}), ("hang", {}), ("boom", {})])
    with ToolforkToolset(ALL, workers=4) as toolset:

        async def main() -> tuple[object, float]:
            start = time.monotonic()
            result = await Agent(model, toolsets=[toolset]).run("go")
            return result.output, time.monotonic() - start

        output, elapsed = asyncio.run(main())
    assert output == "done"
    got = returned(seen[0])
    assert got["t0c1"] == 5
    assert got["t0c0"].startswith("Error: ") and "crashed" in got["t0c0"]
    assert "timeout of 1.0s" in got["t0c2"]
    assert got["t0c3"] == "Error: ValueError: boom from the tool"
    assert 0.9 < elapsed < 6, f"the hung call should end at its 1 s timeout, the run took {elapsed:.2f} s"


def test_invalid_arguments_go_back_to_the_model_as_retry_feedback() -> None:
    model, seen = pydantic_ai_model([("add", {"a": 1, "b": "x"})], then=[("add", {"a": 1, "b": 2})])
    with ToolforkToolset([add], workers=1) as toolset:
        assert Agent(model, toolsets=[toolset]).run_sync("go").output == "done"
    [feedback] = seen[0]
    assert retried(feedback), f"expected pydantic-ai's retry feedback, got {feedback!r}"
    text = str(getattr(feedback, "content", ""))
    assert "Invalid arguments for tool 'add'" in text and "b:" in text  # toolfork's validator spoke
    assert returned(seen[1])["t1c0"] == 3  # the model fixed it


def test_failures_can_raise_out_of_the_run_instead() -> None:
    model, _ = pydantic_ai_model([("boom", {})])
    with ToolforkToolset(ALL, workers=1, failures="raise") as toolset:
        with pytest.raises(ToolCallError, match="boom from the tool"):
            Agent(model, toolsets=[toolset]).run_sync("go")


def test_the_model_sees_the_toolfork_schema() -> None:
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    offered: list[object] = []

    def respond(messages: list[object], info: object) -> ModelResponse:
        offered.extend(info.function_tools)  # type: ignore[attr-defined]
        return ModelResponse(parts=[TextPart("done")])

    with ToolforkToolset([add], workers=1) as toolset:
        Agent(FunctionModel(respond), toolsets=[toolset]).run_sync("go")
        assert toolset.executor.closed is False  # a run enters and leaves the toolset: the pool stays
    [tool_def] = offered
    assert tool_def.name == "add" and tool_def.description == "Add two integers."  # type: ignore[attr-defined]
    schema = tool_def.parameters_json_schema  # type: ignore[attr-defined]
    assert schema["required"] == ["a", "b"] and schema["properties"]["b"]["description"] == "second addend"
    assert toolset.executor.closed  # close() (the with block) ended the Executor it created


def test_failures_can_be_retry_feedback_instead() -> None:
    model, seen = pydantic_ai_model([("boom", {})])
    with ToolforkToolset(ALL, workers=1, failures="retry", max_retries=2) as toolset:
        assert Agent(model, toolsets=[toolset]).run_sync("go").output == "done"
    [feedback] = seen[0]
    assert retried(feedback) and "Error: ValueError: boom from the tool" in str(feedback.content)
