"""The agent's parallel tool calls honour the tools' limits, caps and rate limits, and its own
executor settings, as they are: real forked workers, the real Anthropic SDK against the scripted
model server."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import pytest

from tests.agent.conftest import make_provider
from tests.modelserver import ScriptedModelServer, ToolCallSpec, Turn
from toolfork import Limits, LimitsNotEnforceable, tool
from toolfork.agent import Agent


@tool(limits=Limits(memory_mb=64), on_error="return-to-model")
def hog(mb: int) -> int:
    """Allocate memory.

    Args:
        mb: how many MiB
    """
    return len(bytearray(mb * 1024 * 1024))


@tool(on_error="return-to-model")
def plain_hog(mb: int) -> int:
    """Allocate memory (no limits of its own).

    Args:
        mb: how many MiB
    """
    return len(bytearray(mb * 1024 * 1024))


@tool(max_concurrency=1)
def one_at_a_time(tag: str) -> dict[str, float]:
    """Hold the only slot for a moment.

    Args:
        tag: a label
    """
    start = time.time()
    time.sleep(0.4)
    return {"start": start, "end": time.time()}


def results_of(server: ScriptedModelServer, index: int) -> dict[str, str]:
    return {r.call_id: r.content for r in server.requests[index].tool_results}


def test_parallel_calls_keep_a_tools_limit_and_cap(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("h", "hog", {"mb": 1024}),
                                          *(ToolCallSpec(f"s{i}", "one_at_a_time", {"tag": str(i)})
                                            for i in range(3))]),
                         Turn(text="done")])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[hog, one_at_a_time], parallel=True,
               workers=4) as agent:
        agent.chat("go")
    seen = results_of(model_server, 1)
    assert "memory limit of 64 MB exceeded" in seen["h"]
    spans = sorted((json.loads(seen[f"s{i}"])["start"], json.loads(seen[f"s{i}"])["end"]) for i in range(3))
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end - 0.05, f"two calls of a max_concurrency=1 tool overlapped: {spans}"


def test_the_agents_default_limits_reach_tools_without_their_own(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("big", "plain_hog", {"mb": 1024}),
                                          ToolCallSpec("small", "plain_hog", {"mb": 8})]),
                         Turn(text="done")])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[plain_hog], parallel=True,
               limits=Limits(memory_mb=128), max_calls_per_worker=1) as agent:
        agent.chat("go")
        assert agent.executor.governance.max_calls_per_worker == 1
    seen = results_of(model_server, 1)
    assert "memory limit of 128 MB exceeded" in seen["big"]
    assert seen["small"] == str(8 * 1024 * 1024)


def test_limits_with_parallel_calls_off_are_refused_not_ignored(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("h", "hog", {"mb": 1})]), Turn(text="done")])
    agent: Any = Agent(provider=make_provider(model_server, "anthropic"), tools=[hog])
    with agent, pytest.raises(LimitsNotEnforceable, match=r"tool 'hog': memory_mb=64 cannot be enforced here: "
                                                          r"sequential mode"):
        agent.chat("go")
