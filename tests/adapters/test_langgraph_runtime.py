"""ToolforkToolNode carries LangGraph's runtime into the worker: interrupts with a checkpointer (pause,
resume, several in one turn, sync and async), the stream writer, the store, and the tool's own
exception types. Each scenario runs with the stock ToolNode too: ours must give the same outcome, from
another process."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Annotated, Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedStore, ToolNode
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, interrupt

from toolfork.adapters.langchain import ToolCallTimedOut, UnrebuiltError
from toolfork.adapters.langgraph import ToolforkToolNode

HOST = os.getpid()


@tool
def ask_twice(topic: str) -> str:
    """Ask a person two questions about a topic, one after the other."""
    first = interrupt(f"first question about {topic}")
    second = interrupt(f"second question about {topic}")
    return f"{first}+{second}@{os.getpid()}"


@tool
async def ask_async(topic: str) -> str:
    """Ask a person about a topic (an async tool)."""
    answer = interrupt(f"question about {topic}")
    return f"{answer}@{os.getpid()}"


@tool
def count_aloud(n: int) -> str:
    """Write n custom stream events."""
    writer = get_stream_writer()
    for i in range(n):
        writer({"i": i, "pid": os.getpid()})
    return "counted"


@tool
def remember(key: str, value: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
    """Keep a value in the graph's store and read it back."""
    store.put(("notes",), key, {"value": value})
    item = store.get(("notes",), key)
    return f"{item.value['value'] if item else None}@{os.getpid()}"


class Refused(ValueError):
    """The tool's own exception type (a ValueError)."""


class Unpicklable(Exception):
    def __init__(self, message: str, handle: Any) -> None:
        super().__init__(message)
        self.handle = handle

    def __reduce__(self) -> Any:
        raise TypeError("this exception will not be pickled")


@tool
def refuse(reason: str) -> str:
    """Refuse with the tool's own exception type."""
    raise Refused(f"refused: {reason}")


@tool
def refuse_oddly(reason: str) -> str:
    """Refuse with an exception that cannot leave the process."""
    raise Unpicklable(f"odd: {reason}", lambda: None)


@tool
def hang(seconds: float) -> str:
    """Sleep far past the node's timeout."""
    time.sleep(seconds)
    return "woke"


def _call(name: str, args: dict[str, Any], cid: str = "c1") -> dict[str, Any]:
    return {"messages": [AIMessage("", tool_calls=[{"name": name, "args": args, "id": cid}])]}


def _graph(node: Any, **compile_options: Any) -> Any:
    return StateGraph(MessagesState).add_node("tools", node).add_edge(START, "tools").compile(**compile_options)


def _human_in_the_loop(node: Any) -> tuple[list[Any], str]:
    """Run ask_twice to the end, answering each interrupt: the interrupt values seen, the final answer."""
    graph = _graph(node, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    seen = []
    out = graph.invoke(_call("ask_twice", {"topic": "tea"}), config)
    for answer in ("yes", "no"):
        [pending] = out["__interrupt__"]
        seen.append(pending.value)
        assert [i.id for i in graph.get_state(config).interrupts] == [pending.id]  # saved by the checkpointer
        out = graph.invoke(Command(resume=answer), config)
    assert "__interrupt__" not in out
    return seen, out["messages"][-1].content


def test_an_interrupt_in_a_worker_pauses_the_graph_and_resume_answers_it_as_with_the_stock_node() -> None:
    stock_seen, stock_answer = _human_in_the_loop(ToolNode([ask_twice]))
    with ToolforkToolNode([ask_twice], workers=1) as node:
        seen, answer = _human_in_the_loop(node)
    assert seen == stock_seen == ["first question about tea", "second question about tea"]
    assert stock_answer == f"yes+no@{HOST}"
    text, pid = answer.split("@")
    assert text == "yes+no" and int(pid) != HOST  # the tool ran (each time) in a worker


def test_an_interrupt_in_an_async_tool_under_ainvoke_pauses_and_resumes() -> None:
    async def run(node: Any) -> tuple[Any, str]:
        graph = _graph(node, checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "a"}}
        out = await graph.ainvoke(_call("ask_async", {"topic": "rain"}), config)
        [pending] = out["__interrupt__"]
        out = await graph.ainvoke(Command(resume={pending.id: "umbrella"}), config)
        return pending.value, out["messages"][-1].content

    if sys.version_info < (3, 11):
        # LangGraph's interrupt() cannot reach its config in an async tool before 3.11 (contextvars do not
        # follow asyncio tasks): the stock node fails, and ours must fail the same way.
        failures = []
        for node in (ToolNode([ask_async]), ToolforkToolNode([ask_async], workers=1)):
            with pytest.raises(RuntimeError) as excinfo:
                asyncio.run(run(node))
            failures.append(str(excinfo.value))
            if isinstance(node, ToolforkToolNode):
                node.close()
        assert failures[0] == failures[1] and "outside of a runnable context" in failures[0]
        return
    stock = asyncio.run(run(ToolNode([ask_async])))
    with ToolforkToolNode([ask_async], workers=1) as node:
        value, answer = asyncio.run(run(node))
    assert value == stock[0] == "question about rain"
    text, pid = answer.split("@")
    assert text == "umbrella" and int(pid) != HOST


def test_stream_writer_events_from_a_worker_arrive_in_order() -> None:
    with ToolforkToolNode([count_aloud], workers=1) as node:
        events = list(_graph(node).stream(_call("count_aloud", {"n": 20}), stream_mode="custom"))
    assert [e["i"] for e in events] == list(range(20))
    assert {e["pid"] for e in events} != {HOST} and len({e["pid"] for e in events}) == 1


def test_an_injected_store_in_a_worker_is_the_graphs_store() -> None:
    store = InMemoryStore()
    with ToolforkToolNode([remember], workers=1) as node:
        out = _graph(node, store=store).invoke(_call("remember", {"key": "k", "value": "v1"}))
    text, pid = out["messages"][-1].content.split("@")
    assert text == "v1" and int(pid) != HOST
    item = store.get(("notes",), "k")
    assert item is not None and item.value == {"value": "v1"}  # written into the host's store


def test_handle_tool_errors_sees_the_tools_own_exception_type() -> None:
    with ToolforkToolNode([refuse], workers=1, handle_tool_errors=(Refused,)) as node:
        msg = _graph(node).invoke(_call("refuse", {"reason": "no"}))["messages"][-1]
    stock = _graph(ToolNode([refuse], handle_tool_errors=(Refused,))).invoke(_call("refuse", {"reason": "no"}))
    assert isinstance(msg, ToolMessage) and msg.status == "error"
    assert msg.content == stock["messages"][-1].content and "Refused('refused: no')" in msg.content
    with ToolforkToolNode([refuse], workers=1) as node:  # the default re-raises it, as stock
        with pytest.raises(Refused, match="refused: no"):
            _graph(node).invoke(_call("refuse", {"reason": "no"}))


def test_an_exception_that_cannot_be_rebuilt_says_what_it_was_and_why() -> None:
    with ToolforkToolNode([refuse_oddly], workers=1) as node:
        with pytest.raises(UnrebuiltError, match=r"Unpicklable: odd: x .*cannot rebuild.*will not be pickled"):
            _graph(node).invoke(_call("refuse_oddly", {"reason": "x"}))


def test_a_hung_tool_is_killed_at_the_timeout_and_the_default_raises_it() -> None:
    with ToolforkToolNode([hang], workers=1, timeout=1) as node:
        with pytest.raises(ToolCallTimedOut, match="timeout"):
            _graph(node).invoke(_call("hang", {"seconds": 60}))
        # the worker was replaced: the node still works
        assert _graph(node).invoke(_call("hang", {"seconds": 0}))["messages"][-1].content == "woke"
