"""One Executor serving a LangGraph node, a pydantic-ai toolset and Agents SDK tools at the same time."""

from __future__ import annotations

import asyncio
import json
import os

import psutil
import pytest

pytest.importorskip("langgraph")
pytest.importorskip("pydantic_ai")
pytest.importorskip("agents")

from agents import Agent as SdkAgent
from agents import RunConfig, Runner
from langchain_core.messages import HumanMessage
from pydantic_ai import Agent

from tests.adapters.adapter_tools import ALL, naps
from tests.adapters.fakes import (
    langgraph_graph,
    openai_agents_model,
    pydantic_ai_model,
    returned,
    tool_messages,
)
from tests.procs import all_gone
from toolfork.adapters.langgraph import ToolforkToolNode, report_tool_errors
from toolfork.adapters.openai_agents import function_tools
from toolfork.adapters.pydantic_ai import ToolforkToolset
from toolfork.executor import Executor

NAPS = [("nap", {"seconds": 2.0})] * 2  # seconds of overlap, so a loaded machine still starts all six in time


def test_three_frameworks_share_one_executor_at_once_and_close_leaves_nothing() -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}  # other tests' servers in this worker
    ex = Executor(ALL, workers=6)
    node = ToolforkToolNode(ALL, executor=ex, handle_tool_errors=report_tool_errors)
    toolset = ToolforkToolset(ALL, executor=ex)
    sdk_tools = function_tools(ALL, ex)
    graph = langgraph_graph(node, [*NAPS, ("crash", {})])
    pa_model, pa_seen = pydantic_ai_model(NAPS)
    sdk_model = openai_agents_model(NAPS)

    async def everything() -> list[object]:
        outs = await asyncio.gather(
            graph.ainvoke({"messages": [HumanMessage("go")]}),
            Agent(pa_model, toolsets=[toolset]).run("go"),
            Runner.run(SdkAgent(name="t", model=sdk_model, tools=sdk_tools), "go",
                       run_config=RunConfig(tracing_disabled=True)),
        )
        return list(outs)

    try:
        lg_out, _, sdk_out = asyncio.run(everything())
        lg = tool_messages(lg_out)  # type: ignore[arg-type]
        pa = returned(pa_seen[0])
        sdk = json.loads(sdk_out.final_output)  # type: ignore[attr-defined]
        pids, together = naps([m.content for m in lg[:2]] + [pa["t0c0"], pa["t0c1"], *sdk.values()])
        assert os.getpid() not in pids and len(pids) == 6  # six naps: one per worker
        assert together, "the six calls of three frameworks were never all running at once"
        assert lg[2].status == "error" and "crashed" in lg[2].content  # LangGraph's crash touched nobody else
        node.close()
        toolset.close()
        assert not ex.closed  # adapters given an executor leave it to its owner
    finally:
        workers = [p.pid for p in psutil.Process().children(recursive=True) if p.pid not in before]
        ex.close()
    assert workers and not all_gone(workers, 5)
