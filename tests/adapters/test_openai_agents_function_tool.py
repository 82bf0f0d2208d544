"""toolfork's ``function_tool`` (the SDK's decorator, the function in a worker) in a real Agents SDK run:
the SDK's OpenAI Responses model talks over HTTP to the scripted model server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psutil
import pytest

pytest.importorskip("agents")

from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, Runner, UserError
from agents.models.openai_responses import OpenAIResponsesModel
from agents.tool import invoke_function_tool
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from tests.modelserver import ScriptedModelServer, ToolCallSpec, Turn
from tests.procs import gone
from toolfork.adapters.openai_agents import function_tool, function_tools
from toolfork.executor import Executor

NO_TRACING = RunConfig(tracing_disabled=True)


@dataclass
class Shop:
    """The app's typed run context: plain data, so it goes to the worker with the call."""

    user: str
    discount: float


@function_tool
def price(ctx: RunContextWrapper[Shop], item: str, amount: int) -> str:
    """Price some items for the current user.

    Args:
        item: what to buy
        amount: how many
    """
    total = amount * 10 * (1 - ctx.context.discount)
    return f"{ctx.context.user} pays {total:.2f} for {amount} {item} (pid {os.getpid()})"


@dataclass
class LiveShop:
    """A context holding a live host object (a socket): it cannot be copied to a worker."""

    user: str
    conn: socket.socket


@function_tool
def who(ctx: RunContextWrapper[LiveShop]) -> str:
    """Say who asks and which process answers."""
    return f"{ctx.context.user} {os.getpid()} {ctx.context.conn.fileno() >= 0}"


def model(srv: ScriptedModelServer) -> OpenAIResponsesModel:
    # No kept-alive connection: Runner.run_sync leaves the client open on its loop, and an async client
    # the garbage collector meets later schedules its close on whatever loop runs then (another test's),
    # where a kept socket of a closed loop fails that other test.
    limits = sys.modules[DefaultAsyncHttpxClient.__mro__[1].__module__.split(".")[0]].Limits  # httpx or httpx2
    http = DefaultAsyncHttpxClient(limits=limits(max_connections=4, max_keepalive_connections=0))
    client = AsyncOpenAI(api_key="test", base_url=srv.openai_base_url, max_retries=0, http_client=http)
    return OpenAIResponsesModel(model="gpt-test", openai_client=client)


@pytest.fixture
def srv() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def ex() -> Iterator[Executor]:
    with Executor([], workers=2) as executor:
        yield executor


def pid_of(text: str) -> int:
    return int(text.rsplit("pid ", 1)[1].rstrip(")"))


def test_a_typed_context_tool_runs_in_a_worker(srv: ScriptedModelServer, ex: Executor) -> None:
    srv.script([
        Turn(tool_calls=[ToolCallSpec("c1", "price", {"item": "pens", "amount": 3}),
                         ToolCallSpec("c2", "price", {"item": "cups", "amount": 1})]),
        Turn(text="done"),
    ])
    tool = function_tool(price.__wrapped__, executor=ex)  # the same function, on this test's Executor
    agent = Agent[Shop](name="shop", model=model(srv), tools=[tool])
    result = Runner.run_sync(agent, "price them", context=Shop(user="ann", discount=0.5), run_config=NO_TRACING)
    assert result.final_output == "done"
    outputs = {call_id: text for call_id, text, _ in srv.requests[1].tool_results}
    assert outputs["c1"].startswith("ann pays 15.00 for 3 pens")
    assert outputs["c2"].startswith("ann pays 5.00 for 1 cups")
    pids = {pid_of(outputs["c1"]), pid_of(outputs["c2"])}
    assert os.getpid() not in pids
    assert pids <= {c.pid for c in psutil.Process().children(recursive=True)}  # the Executor's workers
    schema = srv.requests[0].body["tools"][0]["parameters"]
    assert sorted(schema["properties"]) == ["amount", "item"]  # the context is not the model's argument
    srv.assert_exhausted()


def test_a_context_that_cannot_be_copied_runs_the_tool_in_the_host(srv: ScriptedModelServer,
                                                                   ex: Executor) -> None:
    srv.script([Turn(tool_calls=[ToolCallSpec("c1", "who", {})]), Turn(text="done")])
    agent = Agent[LiveShop](name="shop", model=model(srv), tools=[function_tool(who.__wrapped__, executor=ex)])
    with socket.socket() as conn:
        Runner.run_sync(agent, "who?", context=LiveShop(user="bo", conn=conn), run_config=NO_TRACING)
    [(_, text, _)] = srv.requests[1].tool_results
    assert text == f"bo {os.getpid()} True"


def test_an_exception_keeps_its_type_for_the_failure_function(ex: Executor) -> None:
    seen: list[Exception] = []

    def failure(ctx: RunContextWrapper[Any], error: Exception) -> str:
        seen.append(error)
        return f"failed: {error}"

    @function_tool(executor=ex, failure_error_function=failure)
    def lookup(key: str) -> str:
        """Look a key up."""
        raise KeyError(key)

    out = asyncio.run(lookup.on_invoke_tool(_ctx(lookup, '{"key": "k1"}'), '{"key": "k1"}'))
    assert out == "failed: 'k1'"
    assert type(seen[0]) is KeyError and seen[0].args == ("k1",)


def test_the_sdk_timeout_kills_the_call_in_its_worker(tmp_path: Any, ex: Executor) -> None:
    marker = tmp_path / "pid"

    @function_tool(executor=ex, timeout=1.0)
    async def stuck() -> str:
        """Block the worker (a stuck C call would do the same: no await point)."""
        marker.write_text(str(os.getpid()))
        while True:
            time.sleep(60)

    out = asyncio.run(invoke_function_tool(function_tool=stuck, context=_ctx(stuck, "{}"), arguments="{}"))
    assert out == "Tool 'stuck' timed out after 1 seconds."
    pid = int(marker.read_text())
    assert pid != os.getpid()
    assert gone(pid, 10), f"the stuck worker {pid} is still alive"


def test_the_executor_timeout_ends_a_stuck_sync_tool(ex: Executor) -> None:
    with Executor([], workers=1, timeout=1.0) as short:

        @function_tool(executor=short)
        def stuck() -> str:
            """Never return."""
            while True:
                time.sleep(60)

        out = asyncio.run(stuck.on_invoke_tool(_ctx(stuck, "{}"), "{}"))
    assert out == _sdk_default_error()  # the SDK's default policy


def test_the_sdk_refusals_hold() -> None:
    import functools

    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(UserError, match="partial"):
        function_tool(functools.partial(add, 1))
    with pytest.raises(ValueError, match="only supported for async"):
        function_tool(add, timeout=1.0)
    with pytest.raises(UserError, match="strict_mode=False"):
        function_tool(lambda **options: options, name_override="opts")


def test_inline_runs_in_the_host_and_changes_host_state() -> None:
    calls: list[int] = []

    @function_tool(inline=True)
    def remember(n: int) -> int:
        """Remember a number."""
        calls.append(os.getpid())
        return n

    assert asyncio.run(remember.on_invoke_tool(_ctx(remember, '{"n": 4}'), '{"n": 4}')) == 4
    assert calls == [os.getpid()]


def test_function_tools_takes_function_tool_options(ex: Executor) -> None:
    from tests.adapters.adapter_tools import add, boom

    [renamed] = function_tools([add], ex, name_override="plus", description_override="Add them.")
    assert (renamed.name, renamed.description) == ("plus", "Add them.")
    tools = function_tools([add, boom], ex, failure_error_function=lambda ctx, e: f"no: {e}", is_enabled=False)
    assert all(isinstance(t, FunctionTool) and t.is_enabled is False for t in tools)
    assert asyncio.run(tools[1].on_invoke_tool(_ctx(tools[1], "{}"), "{}")) == "no: ValueError: boom from the tool"
    assert asyncio.run(tools[0].on_invoke_tool(_ctx(tools[0], '{"a": 2, "b": 3}'), '{"a": 2, "b": 3}')) == 5
    with pytest.raises(TypeError, match="name one tool"):
        function_tools([add, boom], ex, name_override="x")
    with pytest.raises(TypeError, match="docstring_style"):
        function_tools([add], ex, docstring_style="google")


def _ctx(tool: FunctionTool, arguments: str) -> Any:
    from agents.tool_context import ToolContext

    return ToolContext(None, tool_name=tool.name, tool_call_id="t1", tool_arguments=arguments)


def test_the_first_calls_of_many_threads_share_one_runner() -> None:
    from concurrent.futures import ThreadPoolExecutor

    with Executor([], workers=2) as fresh:

        @function_tool(executor=fresh)
        def double(n: int) -> int:
            """Double a number."""
            return 2 * n

        async def one(n: int) -> Any:
            return await double.on_invoke_tool(_ctx(double, f'{{"n": {n}}}'), f'{{"n": {n}}}')

        with ThreadPoolExecutor(8) as threads:
            outs = list(threads.map(lambda n: asyncio.run(one(n)), range(8)))
    assert outs == [2 * n for n in range(8)]


def _sdk_default_error() -> str:
    """The SDK's own default failure text (its wording changed across releases: 0.25 dropped "Please
    try again."), so the tests hold against the lowest and the newest SDK alike."""
    from agents.tool import default_tool_error_function

    return default_tool_error_function(None, Exception("boom"))  # type: ignore[arg-type]
