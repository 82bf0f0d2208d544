"""The small pieces on their own: output cap, run keys, frontend schema checks, tool sorting."""

from __future__ import annotations

import pytest

from tests.agent.agent_tools import PNG_BYTES, add
from toolfork import ToolOutput, tool
from toolfork.agent import AgentConfigError, FrontendTool, ProviderTool, ToolSearch
from toolfork.agent.output_limit import limit_output, truncate_text
from toolfork.agent.runs import RunCounter, run_key
from toolfork.agent.special_tools import FrontendInputError
from toolfork.agent.toolset import Toolset


def test_truncate_keeps_head_and_tail_and_says_how_much_was_cut() -> None:
    text = "A" * 50 + "B" * 100 + "C" * 50
    cut = truncate_text(text, 100)
    assert cut.startswith("A" * 50) and cut.endswith("C" * 50)
    assert "[... 100 characters cut from the middle of this tool result (limit 100) ...]" in cut
    assert truncate_text("short", 100) == "short"


def test_limit_output_merges_text_blocks_and_keeps_media() -> None:
    output = ToolOutput(content=[*ToolOutput.text("x" * 80).content, *ToolOutput.image(PNG_BYTES).content,
                                 *ToolOutput.text("y" * 80).content], data={"big": True})
    limited = limit_output(output, 100)
    assert [b.type for b in limited.content] == ["text", "image"]
    assert limited.content[0].text is not None
    assert limited.content[0].text.startswith("x" * 50) and limited.content[0].text.endswith("y" * 50)
    assert limited.data is None
    assert limit_output(output, 1000) is output


def test_run_keys_are_canonical() -> None:
    tracked = tool(name="tracked", track_by_inputs=True)(lambda_free_echo)
    assert run_key(add, {"a": 1}) == "add"
    assert run_key(tracked, {"a": 1, "b": [1, 2]}) == run_key(tracked, {"b": [1, 2], "a": 1})
    assert run_key(tracked, {"a": 1}) != run_key(tracked, {"a": 2})
    counter = RunCounter(default_limit=1)
    assert counter.reserve(add, {})[0] is True
    assert counter.reserve(add, {}) == (False, "add", 1)
    counter.release("add")
    assert counter.reserve(add, {})[0] is True


def lambda_free_echo(a: int = 0, b: list[int] | None = None) -> int:
    return a


def test_frontend_tool_schema_checks_name_each_field() -> None:
    ask = FrontendTool("ask", "Ask.", {"type": "object", "additionalProperties": False,
                                       "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
                                       "required": ["q"]})
    assert ask.validate({"q": "hi", "n": 2}) == {"q": "hi", "n": 2}
    with pytest.raises(FrontendInputError) as info:
        ask.validate({"n": True, "extra": 1})
    assert [e["loc"] for e in info.value.errors] == ["q", "n", "extra"]
    assert str(info.value) == ("Invalid arguments for tool 'ask': q: field required; n: expected integer, got bool; "
                               "extra: unexpected field")
    assert ask.to_openai(api="responses")["name"] == "ask"
    assert ask.to_anthropic()["input_schema"]["required"] == ["q"]
    with pytest.raises(ValueError, match="must describe an object"):
        FrontendTool("bad", "x", {"type": "string"})
    with pytest.raises(ValueError, match="needs a type"):
        ProviderTool("")


def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(AgentConfigError, match="two tools are named 'add': a frontend tool and a tool"):
        Toolset([add, FrontendTool("add", "x")])
    other = tool(name="add")(lambda_free_echo)
    with pytest.raises(AgentConfigError, match="two tools are named 'add'"):
        Toolset([add, ToolSearch([other])])
    with pytest.raises(ValueError, match="top_k"):
        ToolSearch([add], top_k=0)


def test_tool_search_ranks_name_hits_first() -> None:
    def make(name: str, description: str) -> object:
        return tool(name=name, description=description)(lambda_free_echo)

    search = ToolSearch([make("send_email", "Send a message."), make("notify", "Send an email notification."),
                         make("read_file", "Read a file.")], top_k=2)
    assert [t.name for t in search.search("email")] == ["send_email", "notify"]
    assert [t.name for t in search.search("emails")] == ["send_email", "notify"]
    assert search.search("nothing matches") == []


def test_a_forced_tool_choice_for_a_tool_not_offered_is_dropped() -> None:
    from tests.agent.agent_tools import add
    from toolfork.agent.loop import apply_next_turn
    from toolfork.agent.providers.base import ModelRequest

    request = ModelRequest(system="s", messages=[], tools=[add])
    apply_next_turn(request, {"tool_choice": "nope", "model": "m2", "instructions": "short"})
    assert (request.tool_choice, request.model, request.system) == (None, "m2", "short")
    apply_next_turn(request, {"tool_choice": "add", "temperature": 1})
    assert (request.tool_choice, request.temperature) == ("add", 1.0)
