"""ToolforkFunctionToolset: pydantic-ai's own function tools (RunContext first parameter, ModelRetry,
prepare, deferral) with each function run in a worker, in pydantic-ai's agent loop."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, CallDeferred, DeferredToolRequests, ModelRetry, RunContext, Tool
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import ToolDefinition

from tests.adapters.fakes import pydantic_ai_model, retried, returned
from toolfork.adapters.callables import PoolCallFailed
from toolfork.adapters.pydantic_ai import ToolforkFunctionToolset
from toolfork.executor import Executor


@dataclass
class Deps:
    user: str


@dataclass
class LiveDeps:
    conn: socket.socket


def whoami(ctx: RunContext[Deps], tag: str) -> dict[str, Any]:
    """Say who asks, on which try, in which process."""
    return {"user": ctx.deps.user, "tag": tag, "retry": ctx.retry, "pid": os.getpid()}


def flaky(ctx: RunContext[Deps]) -> str:
    """Ask the model to try again once."""
    if ctx.retry == 0:
        raise ModelRetry(f"not yet, {ctx.deps.user}")
    return f"ok on retry {ctx.retry} in {os.getpid()}"


async def later(ctx: RunContext[Deps], job: str) -> str:
    """Hand the job to someone else (an async function)."""
    raise CallDeferred()


def hang() -> str:
    """Never return."""
    while True:
        time.sleep(60)


def live(ctx: RunContext[LiveDeps]) -> str:
    """Use a live host object."""
    return f"{ctx.deps.conn.fileno() >= 0} {os.getpid()}"


@pytest.fixture
def ex() -> Iterator[Executor]:
    with Executor([], workers=2) as executor:
        yield executor


def test_run_context_deps_reach_the_worker(ex: Executor) -> None:
    model, seen = pydantic_ai_model([("whoami", {"tag": "a"}), ("whoami", {"tag": "b"})])
    toolset = ToolforkFunctionToolset([whoami], executor=ex)
    assert Agent(model, deps_type=Deps, toolsets=[toolset]).run_sync("go", deps=Deps("ann")).output == "done"
    got = returned(seen[0])
    assert [got["t0c0"]["tag"], got["t0c1"]["tag"]] == ["a", "b"]
    assert {got["t0c0"]["user"], got["t0c1"]["user"]} == {"ann"}
    assert os.getpid() not in {got["t0c0"]["pid"], got["t0c1"]["pid"]}


def test_model_retry_from_a_worker_is_pydantic_ais_retry(ex: Executor) -> None:
    toolset = ToolforkFunctionToolset([flaky], executor=ex, max_retries=2)
    result = Agent(TestModel(), deps_type=Deps, toolsets=[toolset]).run_sync("go", deps=Deps("bo"))
    assert "ok on retry 1 in" in result.output
    worker_pid = int(re.search(r"ok on retry 1 in (\d+)", result.output).group(1))  # type: ignore[union-attr]
    assert worker_pid != os.getpid()
    retries = [p for m in result.all_messages() for p in getattr(m, "parts", []) if retried(p)]
    assert retries and "not yet, bo" in str(retries[0].content)


def test_prepare_and_deferral_stay_pydantic_ais(ex: Executor) -> None:
    async def only_for_ann(ctx: RunContext[Deps], tool_def: ToolDefinition) -> ToolDefinition | None:
        return tool_def if ctx.deps.user == "ann" else None

    toolset = ToolforkFunctionToolset([Tool(later, prepare=only_for_ann)], executor=ex)
    agent = Agent(TestModel(), deps_type=Deps, toolsets=[toolset], output_type=[str, DeferredToolRequests])
    deferred = agent.run_sync("go", deps=Deps("ann")).output
    assert isinstance(deferred, DeferredToolRequests) and [c.tool_name for c in deferred.calls] == ["later"]
    assert agent.run_sync("go", deps=Deps("bo")).output == "success (no tool calls)"  # prepare hid it


def test_the_executor_timeout_ends_a_stuck_function() -> None:
    with Executor([], workers=1, timeout=1.0) as short:
        toolset = ToolforkFunctionToolset([hang], executor=short, max_retries=0)
        with pytest.raises(PoolCallFailed, match=r"timeout of 1\.0s"):
            Agent(TestModel(), toolsets=[toolset]).run_sync("go")


def test_deps_that_cannot_be_copied_run_the_function_in_the_host(ex: Executor) -> None:
    toolset = ToolforkFunctionToolset([live], executor=ex)
    with socket.socket() as conn:
        result = Agent(TestModel(), deps_type=LiveDeps, toolsets=[toolset]).run_sync("go", deps=LiveDeps(conn))
    assert result.output == f'{{"live":"True {os.getpid()}"}}'


def test_the_callers_tool_is_left_as_it_was(ex: Executor) -> None:
    mine = Tool(whoami)
    ToolforkFunctionToolset([mine], executor=ex)
    assert mine.function_schema.function is whoami
