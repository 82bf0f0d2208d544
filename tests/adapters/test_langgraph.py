"""ToolforkToolNode in a real LangGraph StateGraph (tools_condition, a scripted fake chat model)."""

from __future__ import annotations

import asyncio
import os
import time

import psutil
import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from tests.adapters.adapter_tools import ALL, add, nap, naps, where
from tests.adapters.fakes import langgraph_graph, tool_messages
from tests.adapters.lc_tools import lc_command_in_disguise, lc_count_messages, lc_goto, lc_where
from tests.procs import all_gone
from toolfork.adapters.langchain import ToolCallCrashed
from toolfork.adapters.langgraph import ToolforkToolNode, report_tool_errors

NAPS = [("nap", {"seconds": 0.5})] * 3


def test_the_calls_of_one_message_run_side_by_side_in_workers_and_come_back_in_order() -> None:
    with ToolforkToolNode(ALL, workers=4) as node:
        graph = langgraph_graph(node, [*NAPS, ("where", {"tag": "w"})])
        start = time.monotonic()
        out = graph.invoke({"messages": [HumanMessage("go")]})
        elapsed = time.monotonic() - start
        msgs = tool_messages(out)
        assert [m.tool_call_id for m in msgs] == ["t0c0", "t0c1", "t0c2", "t0c3"]
        assert all(m.status == "success" for m in msgs)
        pids, together = naps([m.content for m in msgs[:3]])
        assert os.getpid() not in pids and len(pids) == 3  # three workers, none of them the host
        assert together, "the three calls were never all running at once"
        assert '"tag": "w"' in msgs[3].content
        assert out["messages"][-1].content == "done"
        assert elapsed < 1.4, f"three 0.5 s calls took {elapsed:.2f} s: not well under 1.5 s"


def test_a_failing_crashing_or_hung_call_is_an_error_message_and_the_others_are_unaffected() -> None:
    with ToolforkToolNode(ALL, workers=4, handle_tool_errors=report_tool_errors) as node:
        graph = langgraph_graph(node, [("crash", {}), ("add", {"a": 2, "b": 3}), ("hang", {}), ("boom", {}),
                                       ("add", {"a": 1, "b": "x"})])
        start = time.monotonic()
        out = graph.invoke({"messages": [HumanMessage("go")]})
        elapsed = time.monotonic() - start
        crash, ok, hung, boom, bad = tool_messages(out)
        assert ok.status == "success" and ok.content == "5"
        assert [m.status for m in (crash, hung, boom, bad)] == ["error"] * 4
        assert "crashed" in crash.content and "exited with code 3" in crash.content
        assert "timeout of 1.0s" in hung.content
        assert "ValueError: boom from the tool" in boom.content
        assert "ToolInputError" in bad.content and "'add'" in bad.content
        assert 0.9 < elapsed < 6, f"the hung call should end at its 1 s timeout, the run took {elapsed:.2f} s"


def test_ainvoke_runs_the_calls_side_by_side_too() -> None:
    with ToolforkToolNode([nap], workers=3) as node:
        graph = langgraph_graph(node, NAPS)

        async def main() -> tuple[dict, float]:
            start = time.monotonic()
            out = await graph.ainvoke({"messages": [HumanMessage("go")]})
            return out, time.monotonic() - start

        out, elapsed = asyncio.run(main())
        msgs = tool_messages(out)
        assert [m.tool_call_id for m in msgs] == ["t0c0", "t0c1", "t0c2"]
        pids, together = naps([m.content for m in msgs])
        assert os.getpid() not in pids and together
        assert elapsed < 1.4, f"three 0.5 s calls took {elapsed:.2f} s under ainvoke"


def test_tools_by_name_are_langchain_tools_that_bind_with_the_toolfork_schema() -> None:
    with ToolforkToolNode([add, lc_where], workers=2) as node:
        tools = node.tools_by_name
        assert set(tools) == {"add", "lc_where"} and all(isinstance(t, BaseTool) for t in tools.values())
        spec = convert_to_openai_tool(tools["add"])["function"]
        assert spec["name"] == "add" and spec["description"] == "Add two integers."
        assert spec["parameters"]["required"] == ["a", "b"]
        assert spec["parameters"]["properties"]["a"]["type"] == "integer"
        graph = langgraph_graph(node, [("add", {"a": 4, "b": 5})])
        assert [t.name for t in graph.model.bound] == ["add", "lc_where"]  # what bind_tools received
        assert tool_messages(graph.invoke({"messages": [HumanMessage("go")]}))[0].content == "9"


def test_langchain_tools_with_injected_state_or_a_command_run_in_workers_too() -> None:
    with ToolforkToolNode([lc_where, lc_count_messages, lc_goto], workers=2) as node:
        graph = langgraph_graph(node, [("lc_where", {"tag": "a"}), ("lc_count_messages", {"label": "n"}),
                                       ("lc_goto", {"note": "x"})])
        out = graph.invoke({"messages": [HumanMessage("go")]})
        by_id = {m.tool_call_id: m.content for m in tool_messages(out)}
        tag, pid = by_id["t0c0"].split(":")
        assert tag == "a" and int(pid) != os.getpid()  # a plain LangChain tool: in a worker
        label, count, pid = by_id["t0c1"].split(":")
        assert (label, count) == ("n", "2") and int(pid) != os.getpid()  # the state went with the call
        note, pid = by_id["t0c2"].split(" in ")
        assert note == "noted x" and int(pid) != os.getpid()  # the worker's Command updated the graph


def test_a_command_returned_without_the_annotation_is_applied_and_checked_as_stock() -> None:
    with ToolforkToolNode([lc_command_in_disguise, add], workers=2) as node:
        graph = langgraph_graph(node, [("lc_command_in_disguise", {"note": "n"}), ("add", {"a": 1, "b": 1})])
        # The stock node refuses a Command whose update has no ToolMessage for its call: so does ours,
        # which means the Command came back from the worker as a Command.
        with pytest.raises(ValueError, match="Expected to have a matching ToolMessage"):
            graph.invoke({"messages": [HumanMessage("go")]})


def test_by_default_a_failed_call_is_raised_out_of_the_graph_as_by_the_stock_node() -> None:
    with ToolforkToolNode(ALL, workers=2) as node:
        with pytest.raises(ToolCallCrashed, match="exited with code 3"):
            langgraph_graph(node, [("crash", {})]).invoke({"messages": [HumanMessage("go")]})


def test_handle_tool_errors_false_raises_the_failure_out_of_the_graph() -> None:
    with ToolforkToolNode(ALL, workers=2, handle_tool_errors=False) as node:
        with pytest.raises(ToolCallCrashed, match="exited with code 3"):
            langgraph_graph(node, [("crash", {})]).invoke({"messages": [HumanMessage("go")]})


def test_the_executor_exists_from_construction_and_close_ends_it() -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}  # other tests' servers in this worker
    node = ToolforkToolNode([where], workers=2)
    pids = [p.pid for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert node.executor.mode == "fork" and pids  # forked before any graph (or its threads) ran
    node.close()
    assert node.executor.closed and not all_gone(pids, 5)
