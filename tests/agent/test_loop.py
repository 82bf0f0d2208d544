"""The loop end to end through the real SDKs: calls, results in call order, history, streaming,
async, max_steps, subclass style, toolkit guidelines, provider errors."""

from __future__ import annotations

import asyncio

import pytest

from tests.agent.agent_tools import add
from tests.agent.conftest import make_provider
from tests.modelserver import ErrorTurn, ScriptedModelServer, ToolCallSpec, Turn
from toolfork import Toolkit, tool
from toolfork.agent import (
    Agent,
    AssistantMessage,
    MaxStepsExceeded,
    MissingAPIKeyError,
    ModelCallFinished,
    ModelCallStarted,
    ProviderError,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallRequest,
    ToolCallStarted,
    ToolResultMessage,
    UserMessage,
)
from toolfork.agent.providers import Anthropic, OpenAI


def two_adds() -> list[Turn]:
    return [
        Turn(text="Let me add.", tool_calls=[ToolCallSpec("c1", "add", {"a": 1, "b": 2}),
                                             ToolCallSpec("c2", "add", {"a": 3, "b": 4})]),
        Turn(text="3 and 7."),
    ]


def test_chat_runs_the_calls_and_sends_results_in_call_order(model_server: ScriptedModelServer,
                                                            provider) -> None:
    model_server.script(two_adds())
    with Agent(provider=provider, instructions="You add numbers.", tools=[add]) as agent:
        reply = agent.chat("What are 1+2 and 3+4?")
    assert isinstance(reply, AssistantMessage)
    assert reply.text == "3 and 7."
    model_server.assert_exhausted()
    first, second = model_server.requests
    assert first.system == "You add numbers."
    assert first.tools == ["add"]
    assert [(r.call_id, r.content, r.is_error) for r in second.tool_results] == [("c1", "3", False), ("c2", "7", False)]
    assert [c.call_id for c in second.tool_calls] == ["c1", "c2"]
    roles = [m.role for m in agent.history.messages()]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_second_chat_sends_the_whole_conversation(model_server: ScriptedModelServer, provider) -> None:
    model_server.script([*two_adds(), Turn(text="You asked about sums.")])
    with Agent(provider=provider, tools=[add]) as agent:
        agent.chat("sums please")
        reply = agent.chat("what did I ask?")
    assert reply.text == "You asked about sums."
    last = model_server.requests[-1]
    assert [c.call_id for c in last.tool_calls] == ["c1", "c2"]
    assert len(last.tool_results) == 2
    assert "what did I ask?" in str(last.messages[-1])


def test_stream_yields_text_deltas_and_tool_events(model_server: ScriptedModelServer, provider) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "add", {"a": 2, "b": 2})]),
                         Turn(text="The answer is four, clearly.")])
    with Agent(provider=provider, tools=[add]) as agent:
        events = list(agent.stream("2+2?"))
    kinds = [type(e) for e in events]
    assert kinds[0] is ModelCallStarted
    assert kinds[-1] is RunFinished
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.call_id, e.name, e.arguments) for e in started] == [("c1", "add", {"a": 2, "b": 2})]
    assert [(e.call_id, e.status) for e in finished] == [("c1", "ok")]
    assert finished[0].output is not None and finished[0].output.as_text() == "4"
    assert kinds.index(ToolCallStarted) < kinds.index(ToolCallFinished)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1, "the answer should arrive in several pieces"
    assert "".join(deltas) == "The answer is four, clearly."
    final = events[-1]
    assert isinstance(final, RunFinished) and final.message.text == "The answer is four, clearly."
    assert all(r.stream for r in model_server.requests)


def test_async_chat_and_stream(model_server: ScriptedModelServer, provider) -> None:
    model_server.script([*two_adds(), Turn(tool_calls=[ToolCallSpec("c3", "add", {"a": 5, "b": 5})]),
                         Turn(text="ten")])

    async def main() -> tuple[AssistantMessage, list[object]]:
        async with Agent(provider=provider, tools=[add]) as agent:
            reply = await agent.achat("sums")
            events = [e async for e in agent.astream("5+5")]
        assert provider._aclient is None, "aclose() closed the async client"
        return reply, events

    reply, events = asyncio.run(main())
    assert reply.text == "3 and 7."
    assert isinstance(events[-1], RunFinished) and events[-1].message.text == "ten"
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.call_id, e.output.as_text()) for e in finished] == [("c3", "10")]
    assert [(r.call_id, r.content) for r in model_server.requests[3].tool_results][-1] == ("c3", "10")


def test_max_steps_stops_a_model_that_never_answers(model_server: ScriptedModelServer, flavour: str) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec(f"c{i}", "add", {"a": i, "b": 0})]) for i in range(3)])
    with Agent(provider=make_provider(model_server, flavour), tools=[add], max_steps=3) as agent:
        with pytest.raises(MaxStepsExceeded, match="3 times without a final answer"):
            agent.chat("loop forever")
        # The last batch ran and was stored with its results: the history still has its pairs.
        messages = agent.history.messages()
    assert [m.role for m in messages] == ["user"] + ["assistant", "tool"] * 3
    assert len(model_server.requests) == 3


def test_subclass_style_agent(model_server: ScriptedModelServer) -> None:
    server = model_server

    class MathAgent(Agent):
        def provider(self):  # type: ignore[override]
            return make_provider(server, "anthropic")

        def instructions(self) -> str:
            return "Only math."

        def tools(self) -> list[object]:
            return [add]

    server.script(two_adds())
    with MathAgent() as agent:
        assert agent.chat("go").text == "3 and 7."
    assert server.requests[0].system == "Only math."
    assert server.requests[0].tools == ["add"]


class MathToolkit(Toolkit):
    name = "Math"

    def guidelines(self) -> str:
        return "Prefer exact integer arithmetic."

    def provide(self) -> list[object]:
        @tool
        def multiply(a: int, b: int) -> int:
            """Multiply two integers.

            Args:
                a: first factor
                b: second factor
            """
            return a * b

        return [multiply, add]


def test_toolkit_guidelines_go_into_the_system_prompt(model_server: ScriptedModelServer, provider) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "multiply", {"a": 6, "b": 7})]), Turn(text="42")])
    with Agent(provider=provider, instructions="Be brief.", tools=[MathToolkit()]) as agent:
        assert agent.chat("6*7").text == "42"
    system = model_server.requests[0].system
    assert system.startswith("Be brief.")
    assert "# Math\nPrefer exact integer arithmetic.\nTools: multiply, add" in system
    assert sorted(model_server.requests[0].tools) == ["add", "multiply"]
    assert model_server.requests[1].tool_results[0].content == "42"


def test_provider_error_is_clear_and_the_next_chat_still_works(model_server: ScriptedModelServer,
                                                              provider) -> None:
    model_server.script([ErrorTurn(status=500, message="the model is on fire"), Turn(text="back")])
    with Agent(provider=provider, tools=[add]) as agent:
        with pytest.raises(ProviderError, match="model is on fire") as info:
            agent.chat("hello")
        assert info.value.__cause__ is not None
        assert agent.chat("again").text == "back"
    assert not model_server.failures


def test_user_message_with_an_image(model_server: ScriptedModelServer, provider) -> None:
    from tests.agent.agent_tools import PNG_BYTES
    from toolfork import ToolOutput

    image = ToolOutput.image(PNG_BYTES).content[0]
    text = ToolOutput.text("what colour?").content[0]
    model_server.script([Turn(text="red")])
    with Agent(provider=provider) as agent:
        assert agent.chat(UserMessage([text, image])).text == "red"
    images = model_server.requests[0].images
    assert len(images) == 1 and images[0].media_type == "image/png" and images[0].call_id is None


def test_missing_key_names_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(MissingAPIKeyError, match="ANTHROPIC_API_KEY"):
        Anthropic()
    with pytest.raises(MissingAPIKeyError, match="OPENAI_API_KEY"):
        OpenAI()
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert OpenAI().api_key == "from-env"


def test_bad_settings_are_refused() -> None:
    from toolfork.agent import AgentConfigError

    with pytest.raises(AgentConfigError, match="max_steps"):
        Agent(max_steps=0)
    with pytest.raises(AgentConfigError, match="tool_max_runs"):
        Agent().tool_max_runs(-1)
    with pytest.raises(AgentConfigError, match="no provider"):
        Agent(tools=[add]).chat("hi")
    with pytest.raises(TypeError, match="str or a UserMessage"):
        Agent(provider=OpenAI(api_key="k")).chat(42)  # type: ignore[arg-type]


def test_model_call_events_carry_usage(model_server: ScriptedModelServer, provider) -> None:
    seen: list[object] = []
    model_server.script([Turn(text="hi", usage=(11, 5))])
    with Agent(provider=provider, callbacks=[seen.append]) as agent:
        agent.chat("hello")
    finished = [e for e in seen if isinstance(e, ModelCallFinished)]
    assert len(finished) == 1
    assert finished[0].message.usage == {"input_tokens": 11, "output_tokens": 5}


def test_history_never_holds_a_call_without_its_result(model_server: ScriptedModelServer, provider) -> None:
    model_server.script(two_adds())
    with Agent(provider=provider, tools=[add]) as agent:
        agent.chat("x")
        messages = agent.history.messages()
    for i, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            nxt = messages[i + 1]
            assert isinstance(nxt, ToolResultMessage)
            assert [r.call_id for r in nxt.results] == [c.id for c in message.tool_calls]


def test_a_stream_abandoned_mid_batch_leaves_the_history_consistent(model_server: ScriptedModelServer,
                                                                    tmp_path) -> None:
    from tests.agent.agent_tools import sleepy

    log = str(tmp_path / "log")
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "sleepy", {"label": "a", "seconds": 0.01, "log": log}),
                                          ToolCallSpec("c2", "sleepy", {"label": "b", "seconds": 0.01, "log": log})]),
                         Turn(text="fresh start")])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[sleepy]) as agent:
        stream = agent.stream("go")
        for event in stream:
            if isinstance(event, ToolCallStarted):
                break
        stream.close()
        messages = agent.history.messages()
        assert [m.role for m in messages] == ["user", "assistant", "tool"]
        assert [r.call_id for r in messages[2].results] == ["c1", "c2"]
        assert agent.chat("again").text == "fresh start"
    assert not model_server.failures


def test_calls_without_ids_or_with_repeated_ids_get_unique_ones() -> None:
    from toolfork.agent.loop import _unique_call_ids

    message = AssistantMessage(tool_calls=[ToolCallRequest("", "add", {}), ToolCallRequest("x", "add", {}),
                                           ToolCallRequest("x", "add", {})])
    _unique_call_ids(message)
    ids = [c.id for c in message.tool_calls]
    assert len(set(ids)) == 3 and ids[1] == "x" and all(ids)
