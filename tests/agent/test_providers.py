"""Wire mapping per provider: multimodal results, provider tools, keys and base URLs from the
environment, OpenAI-compatible servers, errors in the middle of a stream."""

from __future__ import annotations

import base64

import pytest

from tests.agent.agent_tools import PNG_BYTES, add, picture
from tests.agent.conftest import make_provider
from tests.modelserver import ErrorTurn, RecordedRequest, ScriptedModelServer, ToolCallSpec, Turn
from toolfork import ToolOutput, tool
from toolfork.agent import Agent, ProviderError, ProviderTool, UnsupportedProviderToolError
from toolfork.agent.providers import Anthropic, OpenAI, OpenAICompatible

PNG_B64 = base64.b64encode(PNG_BYTES).decode()


def picture_request(model_server: ScriptedModelServer, flavour: str) -> RecordedRequest:
    """The request that carries the results of a batch whose call c1 returned an image, c2 a number."""
    calls = [ToolCallSpec("c1", "picture", {}), ToolCallSpec("c2", "add", {"a": 1, "b": 1})]
    model_server.script([Turn(tool_calls=calls), Turn(text="a red pixel")])
    with Agent(provider=make_provider(model_server, flavour), tools=[picture, add]) as agent:
        agent.chat("show me")
    return model_server.requests[1]


def test_anthropic_sends_images_inside_the_tool_result(model_server: ScriptedModelServer) -> None:
    request = picture_request(model_server, "anthropic")
    assert [(i.media_type, i.data, i.call_id) for i in request.images] == [("image/png", PNG_B64, "c1")]
    assert [(r.call_id, r.content) for r in request.tool_results] == [("c1", "a red pixel"), ("c2", "2")]
    blocks = request.body["messages"][-1]["content"][0]["content"]
    assert blocks == [{"type": "text", "text": "a red pixel"},
                      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}]


def test_openai_chat_sends_text_in_the_tool_message_and_the_image_after(model_server: ScriptedModelServer) -> None:
    request = picture_request(model_server, "openai-chat")
    results = request.tool_results
    assert results[0].call_id == "c1"
    assert results[0].content == f"a red pixel\n[image image/png, {len(PNG_BYTES)} bytes]"
    assert results[1].content == "2"
    # Tool messages carry text only; the image follows, once the batch's results are all in.
    messages = request.body["messages"]
    assert [m["role"] for m in messages[-3:]] == ["tool", "tool", "user"]
    assert messages[-1]["content"][0]["text"] == "Image(s) returned by tool call c1 (picture):"
    assert messages[-1]["content"][1] == {"type": "image_url",
                                          "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}
    assert [(i.media_type, i.data) for i in request.images] == [("image/png", PNG_B64)]


def test_openai_responses_puts_the_image_in_the_function_call_output(model_server: ScriptedModelServer) -> None:
    request = picture_request(model_server, "openai-responses")
    assert [(i.media_type, i.data, i.call_id) for i in request.images] == [("image/png", PNG_B64, "c1")]
    output = next(i for i in request.body["input"] if i.get("type") == "function_call_output")["output"]
    assert output == [{"type": "input_text", "text": "a red pixel"},
                      {"type": "input_image", "image_url": f"data:image/png;base64,{PNG_B64}"}]


@tool
def report() -> ToolOutput:
    """Returns a PDF report and an audio note."""
    pdf = ToolOutput.file(b"%PDF-1.4 tiny", media_type="application/pdf", name="report.pdf").content
    audio = ToolOutput.audio(url="https://example.invalid/note.wav").content
    return ToolOutput(content=[*pdf, *audio])


def test_other_media_become_documents_or_text_placeholders(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "report", {})]), Turn(text="ok")])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[report]) as agent:
        agent.chat("report")
    blocks = model_server.requests[1].body["messages"][-1]["content"][0]["content"]
    assert blocks[0]["type"] == "document"
    assert blocks[0]["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(blocks[0]["source"]["data"]) == b"%PDF-1.4 tiny"
    assert blocks[1] == {"type": "text", "text": "[audio https://example.invalid/note.wav]"}


def test_provider_tools_pass_through_where_supported(model_server: ScriptedModelServer) -> None:
    search = ProviderTool("web_search_20250305", options={"max_uses": 3})
    model_server.script([Turn(text="found"), Turn(text="found too")])
    with Agent(provider=make_provider(model_server, "anthropic"), tools=[add, search]) as agent:
        agent.chat("search")
    assert model_server.requests[0].body["tools"][1] == {"type": "web_search_20250305", "name": "web_search",
                                                          "max_uses": 3}
    with Agent(provider=make_provider(model_server, "openai-responses"),
               tools=[add, ProviderTool("web_search", options={"search_context_size": "low"})]) as agent:
        agent.chat("search")
    assert model_server.requests[1].body["tools"][1] == {"type": "web_search", "search_context_size": "low"}


def test_an_unsupported_provider_tool_is_a_clear_error_before_any_request(model_server: ScriptedModelServer) -> None:
    with Agent(provider=make_provider(model_server, "openai-chat"),
               tools=[add, ProviderTool("web_search", name="search")]) as agent:
        with pytest.raises(UnsupportedProviderToolError, match=r"Chat Completions API.*search \(web_search\)"):
            agent.chat("search")
        assert agent.history.messages() == []
    assert model_server.requests == []


def test_keys_and_base_urls_from_the_environment(model_server: ScriptedModelServer,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-anthropic")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", model_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "env-openai")
    monkeypatch.setenv("OPENAI_BASE_URL", model_server.openai_base_url)
    model_server.script([Turn(text="a"), Turn(text="b")])
    with Agent(provider=Anthropic(model="m", max_retries=0)) as agent:
        assert agent.chat("hi").text == "a"
    with Agent(provider=OpenAI(model="m", max_retries=0)) as agent:
        assert agent.chat("hi").text == "b"
    sent = model_server.requests[0].headers
    assert "env-anthropic" in (sent.get("x-api-key") or sent.get("authorization", ""))
    assert model_server.requests[1].headers["authorization"] == "Bearer env-openai"


def test_openai_compatible_server_needs_no_key(model_server: ScriptedModelServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert OpenAICompatible(model="llama3").base_url == "http://localhost:11434/v1"
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "add", {"a": 2, "b": 3})]), Turn(text="5")])
    with Agent(provider=OpenAICompatible(model="llama3", base_url=model_server.openai_base_url, max_retries=0),
               tools=[add]) as agent:
        events = list(agent.stream("2+3"))
    assert events[-1].message.text == "5"  # type: ignore[attr-defined]
    assert model_server.requests[0].model == "llama3"
    assert "stream_options" not in model_server.requests[0].body
    assert model_server.requests[1].tool_results[0].content == "5"


def test_an_error_in_the_middle_of_a_stream_is_a_provider_error(model_server: ScriptedModelServer,
                                                               flavour: str) -> None:
    model_server.script([ErrorTurn(status=529 if flavour == "anthropic" else 500, message="overloaded now",
                                   mid_stream=True)])
    with Agent(provider=make_provider(model_server, flavour)) as agent:
        with pytest.raises(ProviderError, match="overloaded now"):
            list(agent.stream("hi"))


def test_anthropic_server_tool_blocks_are_sent_back_verbatim() -> None:
    from toolfork.agent.messages import AssistantMessage
    from toolfork.agent.providers.anthropic import assistant_content

    raw = [{"type": "server_tool_use", "id": "srv1", "name": "web_search", "input": {"query": "x"}},
           {"type": "web_search_tool_result", "tool_use_id": "srv1", "content": []},
           {"type": "text", "text": "found it"}]
    message = AssistantMessage(text="found it", raw={"provider": "anthropic", "content": raw})
    assert assistant_content(message) == raw
    # Another provider's raw content is ignored: the neutral fields are used.
    other = AssistantMessage(text="hi", raw={"provider": "openai", "content": [{"x": 1}]})
    assert assistant_content(other) == [{"type": "text", "text": "hi"}]


# ------------------------------------------------------------------------- event loops

def test_an_agent_answers_from_one_event_loop_after_another(model_server: ScriptedModelServer,
                                                             flavour: str) -> None:
    """An async client's connections belong to the loop they were opened in: each ``asyncio.run``
    (a CLI worker per request, a test's fresh loop) must still get its answer."""
    import asyncio

    model_server.script([Turn(text="one"), Turn(text="two"), Turn(text="three")])
    with Agent(provider=make_provider(model_server, flavour), tools=[add]) as agent:
        answers = [asyncio.run(agent.achat("hi")).text for _ in range(3)]
    assert answers == ["one", "two", "three"]
    model_server.assert_exhausted()


def test_a_client_of_an_ended_loop_never_closes_itself_in_another(model_server: ScriptedModelServer,
                                                                  flavour: str) -> None:
    """A provider dropped after its loop ended: nothing of it runs, and fails, in the loop that runs when
    it is collected (the SDKs' own HTTP client would schedule its close there)."""
    import asyncio
    import gc

    model_server.script([Turn(text="one")])
    provider = make_provider(model_server, flavour)
    with Agent(provider=provider, tools=[add]) as agent:
        assert asyncio.run(agent.achat("hi")).text == "one"
    errors: list[str] = []

    async def collect_elsewhere() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(
            f"{context.get('message')}: {context.get('exception')!r}"))
        nonlocal provider, agent
        del provider, agent
        gc.collect()
        await asyncio.sleep(0.2)  # what the collection scheduled, if anything, runs now
        gc.collect()  # and a task that failed is reported as it goes

    asyncio.run(collect_elsewhere())
    assert errors == []
