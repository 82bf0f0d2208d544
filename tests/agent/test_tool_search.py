"""ToolSearch: hundreds of tools, a handful sent; found tools are offered from the next turn."""

from __future__ import annotations

import json

import pytest

from tests.agent.agent_tools import add
from tests.agent.conftest import make_provider
from tests.modelserver import ScriptedModelServer, ToolCallSpec, Turn
from toolfork import Tool, tool
from toolfork.agent import Agent, ApprovalRequest, ToolSearch


def catalog() -> list[Tool]:
    def make(name: str, description: str) -> Tool:
        def fn(city: str) -> str:
            return f"{name}:{city}"

        return tool(name=name, description=description)(fn)

    tools = [make(f"tool_{i:03d}", f"Does unrelated thing number {i}.") for i in range(200)]
    tools.append(make("get_weather", "Current weather for a city."))
    tools.append(make("get_forecast", "Weather forecast for the next days in a city."))
    return tools


def test_search_then_call_from_the_next_turn(model_server: ScriptedModelServer, provider) -> None:
    model_server.script([
        Turn(tool_calls=[ToolCallSpec("s1", "search_tools", {"query": "weather"}),
                         ToolCallSpec("w0", "get_weather", {"city": "Oslo"})]),
        Turn(tool_calls=[ToolCallSpec("w1", "get_weather", {"city": "Oslo"})]),
        Turn(text="cold"),
    ])
    with Agent(provider=provider, tools=[add, ToolSearch(catalog())]) as agent:
        assert agent.chat("weather in Oslo?").text == "cold"
        assert agent.discovered_tools == ["get_forecast", "get_weather"]
    first, second, third = model_server.requests
    assert first.tools == ["add", "search_tools"]
    assert sorted(second.tools) == ["add", "get_forecast", "get_weather", "search_tools"]
    found = second.tool_results[0].content
    assert found.startswith("Found 2 tool(s)")
    assert "- get_weather: Current weather for a city." in found
    # Called in the same turn as the search: not offered yet, so not run.
    early = json.loads(second.tool_results[1].content)["error"]
    assert early.startswith("Tool 'get_weather' is not available yet: find it with search_tools first")
    assert third.tool_results[-1].content == "get_weather:Oslo"


def test_a_search_with_no_match_says_so(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("s1", "search_tools", {"query": "quantum teleport"})]),
                         Turn(text="none")])
    with Agent(provider=make_provider(model_server, "openai-chat"), tools=[ToolSearch(catalog())]) as agent:
        agent.chat("x")
        assert agent.discovered_tools == []
    assert model_server.requests[1].tool_results[0].content == "No tool matches 'quantum teleport'. Try other keywords."


def test_discovered_tools_survive_a_paused_run(model_server: ScriptedModelServer) -> None:
    def delete(city: str) -> str:
        return f"deleted {city}"

    guarded = tool(name="delete_city", description="Delete a city from the database.",
                   approval_policy=lambda inputs: "destructive")(delete)
    model_server.script([Turn(tool_calls=[ToolCallSpec("s1", "search_tools", {"query": "delete city"})]),
                         Turn(tool_calls=[ToolCallSpec("d1", "delete_city", {"city": "Oslo"})]),
                         Turn(text="gone")])
    provider = make_provider(model_server, "anthropic")
    with Agent(provider=provider, tools=[ToolSearch([*catalog(), guarded])]) as agent:
        with pytest.raises(ApprovalRequest) as info:
            agent.chat("delete Oslo")
        state = info.value.to_json()
    fresh = Agent.resume_from(state, provider=provider, tools=[ToolSearch([*catalog(), guarded])])
    assert "delete_city" in fresh.discovered_tools
    assert fresh.resume({"d1": "approve"}).text == "gone"
    assert model_server.requests[2].tool_results[-1].content == "deleted Oslo"
