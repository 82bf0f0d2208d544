"""The gate: unknown tools, invalid arguments, visibility, max runs, output size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent.agent_tools import add, big, record_pid
from tests.agent.conftest import make_provider
from tests.modelserver import ScriptedModelServer, ToolCallSpec, Turn
from toolfork import tool
from toolfork.agent import Agent, ToolRunsExceeded


def error_of(content: str) -> str:
    return str(json.loads(content)["error"])


def test_unknown_tool_gets_an_error_naming_the_valid_tools(model_server: ScriptedModelServer, provider) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "subtract", {"a": 1}),
                                          ToolCallSpec("c2", "add", {"a": 1, "b": 1})]),
                         Turn(text="sorry")])
    with Agent(provider=provider, tools=[add, big]) as agent:
        assert agent.chat("x").text == "sorry"
    results = model_server.requests[1].tool_results
    assert error_of(results[0].content) == "Unknown tool 'subtract'. Valid tools: add, big."
    assert results[1].content == "2"


def test_invalid_arguments_name_every_failing_field(model_server: ScriptedModelServer, provider) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "add", {"a": "one"})]), Turn(text="retrying")])
    with Agent(provider=provider, tools=[add]) as agent:
        agent.chat("x")
    message = error_of(model_server.requests[1].tool_results[0].content)
    assert message.startswith("Invalid arguments for tool 'add'")
    assert "a:" in message and "b:" in message


def test_arguments_that_are_not_json_go_back_as_an_error(model_server: ScriptedModelServer, flavour: str) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "add", '{"a": 1, "b": ')]), Turn(text="oops")])
    with Agent(provider=make_provider(model_server, flavour), tools=[add]) as agent:
        agent.chat("x")
        stored = agent.history.messages()[1]
    message = error_of(model_server.requests[1].tool_results[0].content)
    if flavour == "anthropic":
        # The Messages API carries an object; the SDK hands over what it could parse.
        assert "Invalid arguments for tool 'add'" in message
    else:
        assert message.startswith("Invalid arguments for tool 'add': not a JSON object")
        # The raw text goes back to the API as it came, so the history replays exactly.
        assert stored.tool_calls[0].invalid_arguments == '{"a": 1, "b": '
        assert model_server.requests[1].tool_calls[0].arguments == '{"a": 1, "b": '


def test_an_invisible_tool_is_neither_offered_nor_run(model_server: ScriptedModelServer, provider,
                                                      tmp_path: Path) -> None:
    def secret(path: str) -> int:
        """Writes the pid.

        Args:
            path: the file
        """
        return int(record_pid(path))

    hidden = tool(secret).visible(False)
    pids = tmp_path / "pids"
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "secret", {"path": str(pids)})]), Turn(text="no")])
    with Agent(provider=provider, tools=[add, hidden]) as agent:
        agent.chat("x")
    assert model_server.requests[0].tools == ["add"]
    assert error_of(model_server.requests[1].tool_results[0].content) == "Unknown tool 'secret'. Valid tools: add."
    assert not pids.exists()


def _adds(n: int, start: int = 0, same: bool = False) -> list[ToolCallSpec]:
    return [ToolCallSpec(f"c{start + i}", "add", {"a": 1 if same else i, "b": 0}) for i in range(n)]


@pytest.mark.parametrize("parallel", [False, True])
def test_max_runs_default_is_ten_per_chat_and_counts_the_same_in_parallel(
        model_server: ScriptedModelServer, parallel: bool) -> None:
    model_server.script([Turn(tool_calls=_adds(12))])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[add]) as agent:
        agent.parallel_tool_calls(parallel)
        with pytest.raises(ToolRunsExceeded, match="limit of 10 run") as info:
            agent.chat("x")
        history = agent.history.messages()
    # Slots are taken in call order: calls 0..9 ran, 10 and 11 did not, whatever the mode.
    assert [r.status for r in info.value.results] == ["ok"] * 10 + ["error"] * 2
    assert info.value.call_id == "c10"
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert len(history[2].results) == 12


def test_max_runs_go_to_the_error_handler_first(model_server: ScriptedModelServer, provider) -> None:
    seen: list[tuple[str, str]] = []

    def handler(exc: BaseException, t: object) -> str | None:
        seen.append((type(exc).__name__, getattr(t, "name", "")))
        return "limit reached, stop calling add" if isinstance(exc, ToolRunsExceeded) else None

    model_server.script([Turn(tool_calls=_adds(3)), Turn(text="fine")])
    with Agent(provider=provider, tools=[add], tool_error_handler=handler) as agent:
        agent.tool_max_runs(2)
        assert agent.chat("x").text == "fine"
    results = model_server.requests[1].tool_results
    assert [r.content for r in results] == ["0", "1", "limit reached, stop calling add"]
    assert seen == [("ToolRunsExceeded", "add")]


def test_max_runs_reset_per_chat_and_span_turns_within_one(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=_adds(2)), Turn(tool_calls=_adds(1, start=2)), Turn(text="a"),
                         Turn(tool_calls=_adds(2, start=3)), Turn(text="b")])
    handler_calls: list[str] = []

    def handler(exc: BaseException, t: object) -> str:
        handler_calls.append(str(exc))
        return "no more"

    with Agent(provider=make_provider(model_server, "openai-chat"), tools=[add], tool_error_handler=handler) as agent:
        agent.tool_max_runs(2)
        agent.chat("first")   # 2 runs in turn one, the 3rd (next turn, same chat) is over the limit
        agent.chat("second")  # a new chat: 2 runs allowed again
    assert [r.content for r in model_server.requests[2].tool_results] == ["0", "1", "no more"]
    assert [r.content for r in model_server.requests[4].tool_results][-2:] == ["0", "1"]
    assert len(handler_calls) == 1


def test_a_tools_own_max_runs_wins_and_track_by_inputs_counts_per_input(model_server: ScriptedModelServer) -> None:
    def echo(x: int) -> int:
        return x

    once = tool(name="once", max_runs=1)(echo)
    per_input = tool(name="per_input", max_runs=1, track_by_inputs=True)(echo)
    calls = [ToolCallSpec("c1", "once", {"x": 1}), ToolCallSpec("c2", "once", {"x": 2}),
             ToolCallSpec("c3", "per_input", {"x": 1}), ToolCallSpec("c4", "per_input", {"x": 2}),
             ToolCallSpec("c5", "per_input", {"x": 1})]
    model_server.script([Turn(tool_calls=calls), Turn(text="ok")])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[once, per_input],
               tool_error_handler=lambda exc, t: f"refused: {exc}") as agent:
        agent.tool_max_runs(50)
        agent.chat("x")
    contents = [r.content for r in model_server.requests[1].tool_results]
    assert contents[0] == "1" and contents[2] == "1" and contents[3] == "2"
    assert contents[1].startswith("refused: tool 'once' reached its limit of 1 run")
    assert contents[4].startswith("refused: tool 'per_input' with these inputs reached its limit of 1 run")


def test_long_output_keeps_head_and_tail_around_a_notice(model_server: ScriptedModelServer, provider) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "big", {"n": 10_000})]), Turn(text="ok")])
    with Agent(provider=provider, tools=[big], max_output_chars=1000) as agent:
        agent.chat("x")
    content = model_server.requests[1].tool_results[0].content
    assert content.startswith("HEAD-") and content.endswith("-TAIL")
    assert "[... 9010 characters cut from the middle of this tool result (limit 1000) ...]" in content
    assert len(content) < 1200


def test_a_tools_own_max_output_chars_wins(model_server: ScriptedModelServer) -> None:
    def long_text(n: int) -> str:
        return "HEAD-" + "y" * n + "-TAIL"

    small = tool(name="small_big", max_output_chars=100)(long_text)
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "small_big", {"n": 5000})]), Turn(text="ok")])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[small], max_output_chars=100_000) as agent:
        agent.chat("x")
    content = model_server.requests[1].tool_results[0].content
    assert content.startswith("HEAD-")
    assert len(content) < 300
    assert "cut" in content or "truncated" in content
