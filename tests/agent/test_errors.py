"""The error policy: fail-run (after the batch, carrying every result), return-to-model, the error
handler, and the history staying consistent whatever fails."""

from __future__ import annotations

import json

import pytest

from tests.agent.agent_tools import add, boom, soft_boom
from tests.agent.conftest import make_provider
from tests.modelserver import ScriptedModelServer, ToolCallSpec, Turn
from toolfork import ToolOutput, tool
from toolfork.agent import Agent, AssistantMessage, ToolExecutionError, ToolResultMessage, ToolRunFailed


def boom_batch() -> Turn:
    return Turn(tool_calls=[ToolCallSpec("c1", "boom", {"message": "disk full"}),
                            ToolCallSpec("c2", "add", {"a": 1, "b": 2})])


def assert_pairs(messages: list[object]) -> None:
    for i, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            nxt = messages[i + 1]
            assert isinstance(nxt, ToolResultMessage)
            assert [r.call_id for r in nxt.results] == [c.id for c in message.tool_calls]


def test_fail_run_raises_after_the_batch_with_every_result(model_server: ScriptedModelServer, provider) -> None:
    model_server.script([boom_batch(), Turn(text="after the failure")])
    with Agent(provider=provider, tools=[add, boom]) as agent:
        with pytest.raises(ToolRunFailed, match=r"c1 \(boom\).*disk full") as info:
            agent.chat("go")
        # The other call of the batch ran all the same.
        assert [(r.call_id, r.status) for r in info.value.results] == [("c1", "error"), ("c2", "ok")]
        assert info.value.results[1].output is not None and info.value.results[1].output.as_text() == "3"
        assert isinstance(info.value.failures["c1"], ToolExecutionError)
        assert isinstance(info.value.__cause__, ToolExecutionError)
        assert_pairs(agent.history.messages())
        # The conversation goes on; the strict server would answer 400 to a dangling call.
        assert agent.chat("what happened?").text == "after the failure"
    assert not model_server.failures
    results = model_server.requests[1].tool_results
    assert [r.call_id for r in results] == ["c1", "c2"]
    assert "disk full" in json.loads(results[0].content)["error"]


def test_return_to_model_sends_the_error_and_goes_on(model_server: ScriptedModelServer, provider, flavour) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "soft_boom", {"message": "no such user"})]),
                         Turn(text="that user does not exist")])
    with Agent(provider=provider, tools=[soft_boom]) as agent:
        assert agent.chat("go").text == "that user does not exist"
    result = model_server.requests[1].tool_results[0]
    assert json.loads(result.content) == {"error": "tool 'soft_boom' (call c1) failed: ValueError: no such user"}
    assert result.is_error == (flavour == "anthropic")


def test_error_handler_value_becomes_the_result(model_server: ScriptedModelServer, provider) -> None:
    seen: list[tuple[str, str, str]] = []

    def handler(exc: BaseException, t: object) -> str:
        assert isinstance(exc, ToolExecutionError)
        seen.append((exc.status, exc.tool_name, getattr(t, "name", "")))
        return f"handled: {exc.error.message if exc.error else ''}"

    model_server.script([boom_batch(), Turn(text="ok")])
    with Agent(provider=provider, tools=[add, boom], tool_error_handler=handler) as agent:
        assert agent.chat("go").text == "ok"
    assert seen == [("error", "boom", "boom")]
    assert [r.content for r in model_server.requests[1].tool_results] == ["handled: disk full", "3"]


def test_error_handler_returning_none_leaves_the_tools_policy(model_server: ScriptedModelServer) -> None:
    calls: list[str] = []

    def handler(exc: BaseException, t: object) -> None:
        calls.append(getattr(t, "name", ""))

    model_server.script([boom_batch()])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[add, boom],
               tool_error_handler=handler) as agent:
        with pytest.raises(ToolRunFailed):
            agent.chat("go")
    assert calls == ["boom"]


def test_subclass_error_handler(model_server: ScriptedModelServer) -> None:
    class Forgiving(Agent):
        def tool_error_handler(self, exc: BaseException, tool: object) -> object:
            return {"recovered": True}

    model_server.script([boom_batch(), Turn(text="ok")])
    with Forgiving(provider=make_provider(model_server, "openai-chat"), tools=[add, boom]) as agent:
        agent.chat("go")
    assert json.loads(model_server.requests[1].tool_results[0].content) == {"recovered": True}


def test_a_raising_error_handler_fails_the_run_with_history_intact(model_server: ScriptedModelServer) -> None:
    def handler(exc: BaseException, t: object) -> object:
        raise RuntimeError("handler broke")

    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "soft_boom", {"message": "x"})])])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[soft_boom],
               tool_error_handler=handler) as agent:
        with pytest.raises(ToolRunFailed, match="handler broke"):
            agent.chat("go")
        assert_pairs(agent.history.messages())


def test_a_tool_returning_an_error_output_is_not_a_failure(model_server: ScriptedModelServer, flavour) -> None:
    @tool(on_error="fail-run")
    def lookup(key: str) -> ToolOutput:
        """Looks a key up.

        Args:
            key: the key
        """
        return ToolOutput.error(f"no key {key}")

    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "lookup", {"key": "k"})]), Turn(text="missing")])
    with Agent(provider=make_provider(model_server, flavour), tools=[lookup]) as agent:
        assert agent.chat("go").text == "missing"
    result = model_server.requests[1].tool_results[0]
    assert result.content == "no key k"
    assert result.is_error == (flavour == "anthropic")


def test_an_interrupted_batch_still_leaves_every_call_answered(model_server: ScriptedModelServer) -> None:
    @tool(inline=True)
    def interrupt() -> str:
        """Raises KeyboardInterrupt, as a Ctrl-C during a call would."""
        raise KeyboardInterrupt

    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "interrupt", {}),
                                          ToolCallSpec("c2", "add", {"a": 1, "b": 1})]),
                         Turn(text="resumed")])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[interrupt, add]) as agent:
        with pytest.raises(KeyboardInterrupt):
            agent.chat("go")
        messages = agent.history.messages()
        assert_pairs(messages)
        results = messages[-1].results
        assert [r.status for r in results] == ["not-executed", "not-executed"]
        assert "interrupted" in results[0].output.as_text()
        assert agent.chat("again").text == "resumed"
    assert not model_server.failures
