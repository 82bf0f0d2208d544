"""``toolfork.testing``: an agent tried without a key. TestModel (every tool once, or a script) and
FunctionModel drive the real agent loop and the real fork pool; ``toolfork chat --provider test`` runs
as a user runs it, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from toolfork import tool
from toolfork.agent import Agent, ProviderError
from toolfork.agent.messages import Message, ToolResultMessage, UserMessage
from toolfork.testing import FunctionModel, TestModel, ToolInfo, arguments_for, call
from toolfork.toolkits import CalculatorToolkit

REPO = Path(__file__).resolve().parents[2]


class Color(str, Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int = Field(ge=5)
    y: float = Field(gt=2.5)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def describe(name: str, color: Color, point: Point, tags: list[str], mode: Literal["fast", "slow"],
             note: str | None = None, limit: int = 7) -> str:
    """Echo what the model sent, so a test sees the made-up arguments after validation."""
    return f"{name}|{color.value}|{point.x},{point.y}|{','.join(tags)}|{mode}|{note}|{limit}"


def test_test_model_calls_every_tool_once_with_valid_arguments_then_sums_up() -> None:
    answers = []
    for _ in range(2):  # deterministic: the same answer from a fresh model and agent
        with Agent(provider=TestModel(), tools=[add, describe], parallel=True) as agent:
            reply = agent.chat("go")
            answers.append(reply.text)
            [_, turn, results, _] = agent.history.messages()
            assert [c.name for c in getattr(turn, "tool_calls", [])] == ["add", "describe"]
            assert isinstance(results, ToolResultMessage)
            assert [r.status for r in results.results] == ["ok", "ok"]
    assert answers[0] == answers[1]
    assert json.loads(answers[0]) == {"add": "2", "describe": "a|red|5,3.0|a|fast|None|7"}


def test_test_model_answers_each_message_of_a_conversation() -> None:
    with Agent(provider=TestModel(call_tools=["add"], text="Done."), tools=[add, describe]) as agent:
        assert agent.chat("one").text == "Done."
        assert agent.chat("two").text == "Done."
        called = [c.name for m in agent.history.messages() for c in getattr(m, "tool_calls", [])]
    assert called == ["add", "add"]


def test_test_model_without_tools_answers_at_once() -> None:
    with Agent(provider=TestModel(), tools=[]) as agent:
        assert agent.chat("hello").text == "success (no tool calls)"


def test_test_model_plays_a_script_and_says_when_it_runs_out() -> None:
    model = TestModel(turns=[[call("add", a=2, b=3), call("add", a=4, b=5)], "5 and 9."])
    with Agent(provider=model, tools=[add], parallel=True) as agent:
        assert agent.chat("sum these").text == "5 and 9."
        results = agent.history.messages()[2]
        assert isinstance(results, ToolResultMessage)
        assert [(r.call_id, r.output.as_text()) for r in results.results] == [("call-1", "5"), ("call-2", "9")]
        with pytest.raises(ProviderError, match=r"the script has 2 turn\(s\) and the agent asked for turn 3"):
            agent.chat("more")


def test_bad_settings_and_turns_name_what_was_wrong() -> None:
    with pytest.raises(ValueError, match="call_tools must be 'all' or a list of tool names, got 'add'"):
        TestModel(call_tools="add")
    with Agent(provider=TestModel(call_tools=["nope"]), tools=[add]) as agent, \
            pytest.raises(ProviderError, match=r"call_tools names \['nope'\].*it offers \['add'\]"):
        agent.chat("go")
    with Agent(provider=TestModel(turns=[42]), tools=[add]) as agent, \
            pytest.raises(ProviderError, match=r"a turn must be a str .* got int: 42"):
        agent.chat("go")
    with pytest.raises(TypeError, match="FunctionModel takes a function"):
        FunctionModel("not a function")  # type: ignore[arg-type]


def test_function_model_sees_the_conversation_and_the_tools() -> None:
    seen: list[tuple[list[str], list[ToolInfo]]] = []

    def model(messages: list[Message], tools: list[ToolInfo]) -> object:
        seen.append(([type(m).__name__ for m in messages], tools))
        last = messages[-1]
        if isinstance(last, UserMessage):
            a, b = (int(w) for w in last.text.split("+"))
            return [call("add", a=a, b=b)]
        assert isinstance(last, ToolResultMessage)
        return f"It is {last.results[0].output.as_text()}."

    with Agent(provider=FunctionModel(model), tools=[add], parallel=True) as agent:
        assert agent.chat("20+22").text == "It is 42."
    assert [names for names, _ in seen] == [["UserMessage"], ["UserMessage", "AssistantMessage", "ToolResultMessage"]]
    [info] = seen[0][1]
    assert (info.name, info.description) == ("add", "Add two integers.")
    assert info.parameters["required"] == ["a", "b"]


def test_made_up_arguments_follow_the_schema() -> None:
    assert arguments_for({"type": "object", "properties": {
        "when": {"type": "string", "format": "date"},
        "n": {"type": "integer", "minimum": 3, "maximum": 9},
        "m": {"type": "number", "exclusiveMinimum": 0},
        "k": {"type": "integer", "maximum": -4},
        "code": {"type": "string", "minLength": 3},
        "pick": {"enum": ["x", "y"]},
        "ref": {"$ref": "#/$defs/Inner"},
        "maybe": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
        "none": {"type": "array", "maxItems": 0},
        "two": {"type": "array", "minItems": 2, "items": {"const": "c"}},
        "optional": {"type": "string"}},
        "required": ["when", "n", "m", "k", "code", "pick", "ref", "maybe", "none", "two"],
        "$defs": {"Inner": {"type": "object", "properties": {"z": {"type": "string"}}, "required": ["z"]}},
    }) == {"when": "2026-01-01", "n": 3, "m": 0.5, "k": -4, "code": "aaa", "pick": "x", "ref": {"z": "a"},
           "maybe": False, "none": [], "two": ["c", "c"]}


def test_every_built_in_calculator_tool_gets_arguments_it_accepts() -> None:
    for t in CalculatorToolkit().tools():
        t.validate(arguments_for(t.to_json_schema()))  # raises on arguments the tool refuses


def _chat(*args: str, stdin: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "toolfork.cli", "chat", *args], input=stdin, text=True,
                          capture_output=True, cwd=cwd, env=env, timeout=120)


def test_chat_with_the_test_provider_needs_no_key() -> None:
    done = _chat("--provider", "test", "--tools", "tests.agent.agent_tools:add", "--parallel", stdin="go\n")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == '  -> add({"a": 1, "b": 1}) [call-1]'
    assert lines[1].startswith("  <- add ok in ") and lines[1].endswith("s [call-1]")
    assert lines[2:] == ['{"add": "2"}']


def test_chat_plays_a_script_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([[{"name": "add", "arguments": {"a": 20, "b": 22}}], "It is 42.", "Bye."]))
    done = _chat("--provider", "test", "--script", str(script), "--tools", "tests.agent.agent_tools:add",
                 stdin="what is 20+22?\nthanks\nagain\n")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == '  -> add({"a": 20, "b": 22}) [call-1]'
    assert lines[2:] == ["It is 42.", "Bye.", "error: test: the script has 3 turn(s) and the agent asked for turn 4"]


@pytest.mark.parametrize(("content", "args", "message"), [
    ('{"a": 1}', ("--provider", "test"), "expected a JSON list of turns, got dict"),
    ("[3]", ("--provider", "test"), 'turn 1 must be the answer text or a list of {"name": ..., "arguments"'),
    ("[", ("--provider", "test"), "Expecting value"),
    ('["hi"]', ("--provider", "openai-compatible", "--model", "m"), "--script goes with --provider test"),
])
def test_a_bad_script_is_a_usage_error(tmp_path: Path, content: str, args: tuple[str, ...], message: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(content)
    done = _chat(*args, "--script", str(script), stdin="go\n")
    assert done.returncode == 2
    assert message in done.stderr, done.stderr
