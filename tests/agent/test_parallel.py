"""Parallel tool calls: the fork pool with hooks, results in call order whatever finishes first,
timeouts and crashes in the middle of a turn, executor lifecycle."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.agent.agent_tools import add, die, hang, record_pid, sleepy
from tests.agent.conftest import make_provider
from tests.modelserver import ScriptedModelServer, ToolCallSpec, Turn
from toolfork import tool
from toolfork.agent import Agent, ToolRunFailed


def sleepy_turns(log: Path) -> list[Turn]:
    calls = [ToolCallSpec("c1", "sleepy", {"label": "slow", "seconds": 1.5, "log": str(log)}),
             ToolCallSpec("c2", "sleepy", {"label": "fast", "seconds": 0.05, "log": str(log)}),
             ToolCallSpec("c3", "sleepy", {"label": "medium", "seconds": 0.7, "log": str(log)})]
    return [Turn(tool_calls=calls), Turn(text="done")]


def test_parallel_calls_finish_out_of_order_and_return_in_call_order(
        model_server: ScriptedModelServer, flavour: str, tmp_path: Path) -> None:
    log = tmp_path / "finished.log"
    model_server.script(sleepy_turns(log))
    with Agent(provider=make_provider(model_server, flavour), tools=[sleepy]) as agent:
        agent.parallel_tool_calls(True)
        assert agent.chat("go").text == "done"
        assert agent.executor.mode == "fork"
    # They finished fast, medium, slow...
    assert log.read_text().split() == ["fast", "medium", "slow"]
    # ...and went back to the model slow, fast, medium: the order it asked for them.
    results = model_server.requests[1].tool_results
    assert [r.call_id for r in results] == ["c1", "c2", "c3"]
    assert ['"slow"' in results[0].content, '"fast"' in results[1].content, '"medium"' in results[2].content] \
        == [True, True, True]
    pids = {int(r.content.split('"pid": ')[1].rstrip("}")) for r in results}
    assert os.getpid() not in pids, "parallel calls must run in worker processes"
    assert len(pids) == 3, "three concurrent calls need three workers"


def test_sequential_mode_runs_in_the_host_in_order(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    log = tmp_path / "finished.log"
    model_server.script(sleepy_turns(log))
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[sleepy]) as agent:
        assert agent.chat("go").text == "done"
        assert agent.executor.mode == "sequential"
    assert log.read_text().split() == ["slow", "fast", "medium"]
    results = model_server.requests[1].tool_results
    assert all(f'"pid": {os.getpid()}' in r.content for r in results)


def _write_hook(path: str, word: str):
    def hook() -> None:
        with open(path, "a") as fh:
            fh.write(f"{word} {os.getpid()}\n")
    return hook


def test_before_and_after_child_hooks_wrap_every_call_in_the_worker(
        model_server: ScriptedModelServer, tmp_path: Path) -> None:
    hooks = tmp_path / "hooks.log"
    pids = tmp_path / "pids.log"
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "record_pid", {"path": str(pids)}),
                                          ToolCallSpec("c2", "record_pid", {"path": str(pids)})]),
                         Turn(text="ok")])
    with Agent(provider=make_provider(model_server, "openai-chat"), tools=[record_pid]) as agent:
        agent.parallel_tool_calls(True, before_child=_write_hook(str(hooks), "before"),
                                  after_child=_write_hook(str(hooks), "after"))
        agent.chat("go")
    call_pids = [int(p) for p in pids.read_text().split()]
    lines = hooks.read_text().splitlines()
    for pid in call_pids:
        assert f"before {pid}" in lines and f"after {pid}" in lines
    assert len(lines) == 4
    assert os.getpid() not in call_pids


@tool(timeout=0.5, on_error="return-to-model")
def slow_lookup(seconds: float) -> str:
    """Looks something up, slowly.

    Args:
        seconds: how long it takes
    """
    import time

    time.sleep(seconds)
    return "found"


def test_a_call_timing_out_mid_turn_goes_back_to_the_model(model_server: ScriptedModelServer, flavour: str) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "add", {"a": 1, "b": 1}),
                                          ToolCallSpec("c2", "slow_lookup", {"seconds": 30}),
                                          ToolCallSpec("c3", "add", {"a": 2, "b": 2})]),
                         Turn(text="the lookup timed out")])
    with Agent(provider=make_provider(model_server, flavour), tools=[add, slow_lookup]) as agent:
        agent.parallel_tool_calls(True)
        assert agent.chat("go").text == "the lookup timed out"
    results = model_server.requests[1].tool_results
    assert [(r.call_id, r.content) for r in results if r.call_id != "c2"] == [("c1", "2"), ("c3", "4")]
    timed_out = results[1]
    assert timed_out.call_id == "c2"
    assert "timed out" in timed_out.content and timed_out.content.startswith('{"error":')
    if flavour == "anthropic":
        assert timed_out.is_error


def test_a_timeout_under_fail_run_fails_after_the_batch(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "hang", {"seconds": 30}),
                                          ToolCallSpec("c2", "add", {"a": 1, "b": 2})])])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[add, hang]) as agent:
        agent.parallel_tool_calls(True)
        with pytest.raises(ToolRunFailed, match="c1 \\(hang\\)") as info:
            agent.chat("go")
        history = agent.history.messages()
    assert [(r.call_id, r.status) for r in info.value.results] == [("c1", "timeout"), ("c2", "ok")]
    assert info.value.results[1].output is not None and info.value.results[1].output.as_text() == "3"
    assert [m.role for m in history] == ["user", "assistant", "tool"]


def test_a_batch_of_one_call_still_gets_its_timeout(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "slow_lookup", {"seconds": 30})]), Turn(text="ok")])
    with Agent(provider=make_provider(model_server, "openai-chat"), tools=[slow_lookup]) as agent:
        agent.parallel_tool_calls(True)
        agent.chat("go")
    assert "timed out" in model_server.requests[1].tool_results[0].content


def test_a_crashing_call_fails_only_itself(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "add", {"a": 1, "b": 2}),
                                          ToolCallSpec("c2", "die", {"code": 3}),
                                          ToolCallSpec("c3", "add", {"a": 3, "b": 4})])])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[add, die]) as agent:
        agent.parallel_tool_calls(True)
        with pytest.raises(ToolRunFailed, match="crashed") as info:
            agent.chat("go")
    assert [r.status for r in info.value.results] == ["ok", "crashed", "ok"]


def test_executor_is_reused_across_turns_and_closed_with_the_agent(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "add", {"a": 1, "b": 2})]), Turn(text="1"),
                         Turn(tool_calls=[ToolCallSpec("c2", "add", {"a": 1, "b": 2})]), Turn(text="2")])
    agent = Agent(provider=make_provider(model_server, "anthropic"), tools=[add]).parallel_tool_calls(True)
    agent.chat("a")
    executor = agent.executor
    agent.chat("b")
    assert agent.executor is executor
    agent.parallel_tool_calls(False)  # a different executor is needed: the pool is closed now
    assert executor.closed
    assert agent.executor.mode == "sequential"
    agent.close()
    assert not model_server.failures


def test_async_chat_in_fork_mode_keeps_call_order(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    import asyncio

    log = tmp_path / "finished.log"
    model_server.script(sleepy_turns(log))

    async def main() -> str:
        with Agent(provider=make_provider(model_server, "openai-responses"), tools=[sleepy]) as agent:
            agent.parallel_tool_calls(True)
            return (await agent.achat("go")).text

    assert asyncio.run(main()) == "done"
    assert log.read_text().split() == ["fast", "medium", "slow"]
    assert [r.call_id for r in model_server.requests[1].tool_results] == ["c1", "c2", "c3"]


def test_tools_added_after_the_pool_started_still_run(model_server: ScriptedModelServer) -> None:
    @tool
    def double(x: int) -> int:
        """Doubles.

        Args:
            x: the number
        """
        return 2 * x

    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "add", {"a": 1, "b": 1})]), Turn(text="a"),
                         Turn(tool_calls=[ToolCallSpec("c2", "double", {"x": 21})]), Turn(text="b")])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[add]) as agent:
        agent.parallel_tool_calls(True)
        agent.chat("one")
        agent.add_tools(double)
        agent.chat("two")
    assert model_server.requests[2].tools == ["add", "double"]
    assert model_server.requests[3].tool_results[-1].content == "42"
