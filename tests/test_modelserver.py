"""The scripted model server, checked through the real `anthropic` and `openai` SDKs.

If these pass, an agent test failing against the server points at the agent, not at the wire format.
One xdist worker runs them all (``anthropic`` is imported by the first test that uses it, not by every
worker that collects this module).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest

from tests.lazy import lazy_module
from tests.modelserver import ErrorTurn, RecordedRequest, ScriptedModelServer, ToolCallSpec, Turn
from tests.modelserver.fixture import model_server  # noqa: F401

if TYPE_CHECKING:
    import anthropic
else:
    anthropic = lazy_module("anthropic")

pytestmark = pytest.mark.xdist_group("modelserver")

FLAVOURS = ["anthropic", "openai-chat", "openai-responses"]
MODES = ["create", "stream-raw", "stream-helper"]
CALLS = [ToolCallSpec("call_1", "add", {"a": 1, "b": 2}), ToolCallSpec("call_2", "mul", {"a": 3, "b": 4})]
EXPECTED_CALLS = [("call_1", "add", {"a": 1, "b": 2}), ("call_2", "mul", {"a": 3, "b": 4})]
STOP = {  # (after tool calls, after plain text), in each API's own words
    "anthropic": ("tool_use", "end_turn"),
    "openai-chat": ("tool_calls", "stop"),
    "openai-responses": ("completed", "completed"),
}
TOOLS: dict[str, list[dict[str, Any]]] = {
    "anthropic": [
        {"name": n, "description": n, "input_schema": {"type": "object", "properties": {}}}
        for n in ("add", "mul")
    ],
    "openai-chat": [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
        for n in ("add", "mul")
    ],
    "openai-responses": [
        {"type": "function", "name": n, "parameters": {"type": "object", "properties": {}}}
        for n in ("add", "mul")
    ],
}


USER: Any = [{"role": "user", "content": "x"}]  # Any: the SDKs type messages as TypedDicts


@pytest.fixture
def srv() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


def anthropic_client(srv: ScriptedModelServer, **kw: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test", base_url=srv.base_url, **{"max_retries": 0, **kw})


def openai_client(srv: ScriptedModelServer, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(api_key="test", base_url=srv.openai_base_url, **{"max_retries": 0, **kw})


@dataclass
class Parsed:
    text: str
    calls: list[tuple[str, str, Any]]
    stop: str | None
    model: str | None = None
    usage: tuple[int, int] | None = None
    text_deltas: int | None = None  # raw streams only: how many deltas the text came in
    fragments: list[int] = field(default_factory=list)  # raw streams only: argument chunks per call


def ask(srv: ScriptedModelServer, flavour: str, mode: str, history: list[Any] | None = None) -> Parsed:
    """One model request through the real SDK; the result is rebuilt from what the SDK parsed."""
    history = history or [{"role": "user", "content": "compute 1+2 and 3*4"}]
    if flavour == "anthropic":
        return _ask_anthropic(anthropic_client(srv), mode, history)
    client = openai_client(srv)
    if flavour == "openai-chat":
        return _ask_chat(client, mode, history)
    return _ask_responses(client, mode, history)


def _ask_anthropic(client: anthropic.Anthropic, mode: str, history: list[Any]) -> Parsed:
    kw: dict[str, Any] = {
        "model": "claude-test",
        "max_tokens": 256,
        "messages": history,
        "tools": TOOLS["anthropic"],
    }
    if mode == "stream-raw":
        texts: dict[int, str] = {}
        starts: dict[int, Any] = {}
        parts: dict[int, list[str]] = {}
        deltas, stop, model, input_tokens, output_tokens = 0, None, None, 0, 0
        for ev in client.messages.create(**kw, stream=True):
            if ev.type == "message_start":
                model, input_tokens = ev.message.model, ev.message.usage.input_tokens
            elif ev.type == "content_block_start":
                starts[ev.index] = ev.content_block
            elif ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                texts[ev.index] = texts.get(ev.index, "") + ev.delta.text
                deltas += 1
            elif ev.type == "content_block_delta" and ev.delta.type == "input_json_delta":
                parts.setdefault(ev.index, []).append(ev.delta.partial_json)
            elif ev.type == "message_delta":
                stop, output_tokens = ev.delta.stop_reason, ev.usage.output_tokens
        calls = [
            (starts[i].id, starts[i].name, json.loads("".join(parts[i])))
            for i in sorted(starts)
            if starts[i].type == "tool_use"
        ]
        return Parsed(
            "".join(texts.values()),
            calls,
            stop,
            model,
            (input_tokens, output_tokens),
            deltas,
            [sum(1 for p in parts[i] if p) for i in sorted(parts)],
        )
    if mode == "stream-helper":
        with client.messages.stream(**kw) as stream:
            message = stream.get_final_message()
    else:
        message = client.messages.create(**kw)
    text = "".join(b.text for b in message.content if b.type == "text")
    calls = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
    usage = (message.usage.input_tokens, message.usage.output_tokens)
    return Parsed(text, calls, message.stop_reason, message.model, usage)


def _ask_chat(client: openai.OpenAI, mode: str, history: list[Any]) -> Parsed:
    kw: dict[str, Any] = {"model": "gpt-test", "messages": history, "tools": TOOLS["openai-chat"]}
    if mode == "stream-raw":
        text, deltas, stop, model = "", 0, None, None
        usage = None
        calls: dict[int, list[Any]] = {}
        for chunk in client.chat.completions.create(
            **kw, stream=True, stream_options={"include_usage": True}
        ):
            model = chunk.model
            if chunk.usage is not None:
                usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            if choice.delta.content:
                text += choice.delta.content
                deltas += 1
            for tc in choice.delta.tool_calls or []:
                entry = calls.setdefault(tc.index, [None, None, []])
                entry[0] = tc.id or entry[0]
                entry[1] = (tc.function.name if tc.function else None) or entry[1]
                if tc.function and tc.function.arguments:
                    entry[2].append(tc.function.arguments)
            stop = choice.finish_reason or stop
        parsed = [(c[0], c[1], json.loads("".join(c[2]))) for _, c in sorted(calls.items())]
        return Parsed(text, parsed, stop, model, usage, deltas, [len(c[2]) for _, c in sorted(calls.items())])
    if mode == "stream-helper":
        with client.chat.completions.stream(**kw) as stream:
            completion = stream.get_final_completion()
    else:
        completion = client.chat.completions.create(**kw)
    choice = completion.choices[0]
    tool_calls = choice.message.tool_calls or []
    result = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in tool_calls]  # type: ignore[union-attr]
    usage = (completion.usage.prompt_tokens, completion.usage.completion_tokens) if completion.usage else None
    return Parsed(choice.message.content or "", result, choice.finish_reason, completion.model, usage)


def _ask_responses(client: openai.OpenAI, mode: str, history: list[Any]) -> Parsed:
    kw: dict[str, Any] = {"model": "gpt-test", "input": history, "tools": TOOLS["openai-responses"]}
    if mode == "stream-raw":
        items: dict[int, dict[str, Any]] = {}
        deltas, stop, model, usage = 0, None, None, None
        for ev in client.responses.create(**kw, stream=True):
            if ev.type == "response.output_item.added":
                items[ev.output_index] = {"item": ev.item, "text": "", "args": []}
            elif ev.type == "response.output_text.delta":
                items[ev.output_index]["text"] += ev.delta
                deltas += 1
            elif ev.type == "response.function_call_arguments.delta":
                items[ev.output_index]["args"].append(ev.delta)
            elif ev.type in ("response.completed", "response.incomplete"):
                stop, model = ev.response.status, ev.response.model
                usage = (ev.response.usage.input_tokens, ev.response.usage.output_tokens)
        ordered = [items[i] for i in sorted(items)]
        text = "".join(i["text"] for i in ordered if i["item"].type == "message")
        calls = [
            (i["item"].call_id, i["item"].name, json.loads("".join(i["args"])))
            for i in ordered
            if i["item"].type == "function_call"
        ]
        return Parsed(
            text,
            calls,
            stop,
            model,
            usage,
            deltas,
            [len(i["args"]) for i in ordered if i["item"].type == "function_call"],
        )
    if mode == "stream-helper":
        with client.responses.stream(**kw) as stream:
            response = stream.get_final_response()
    else:
        response = client.responses.create(**kw)
    calls = [
        (o.call_id, o.name, json.loads(o.arguments)) for o in response.output if o.type == "function_call"
    ]
    usage = (response.usage.input_tokens, response.usage.output_tokens) if response.usage else None
    return Parsed(response.output_text, calls, response.status, response.model, usage)


# ---- every flavour, every mode ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_sdk_parses_parallel_tool_calls_then_text(srv: ScriptedModelServer, flavour: str, mode: str) -> None:
    srv.script([Turn(tool_calls=CALLS, text="Let me compute."), Turn(text="The answers are 3 and 12.")])

    first = ask(srv, flavour, mode)
    assert first.text == "Let me compute."
    assert first.calls == EXPECTED_CALLS
    assert first.stop == STOP[flavour][0]
    assert first.model == ("claude-test" if flavour == "anthropic" else "gpt-test")

    second = ask(srv, flavour, mode)
    assert (second.text, second.calls, second.stop) == ("The answers are 3 and 12.", [], STOP[flavour][1])

    if mode == "stream-raw":  # the stream really is incremental, arguments split mid-token
        assert first.text_deltas is not None and first.text_deltas >= 3
        assert first.fragments and all(n >= 2 for n in first.fragments)
    assert [r.api for r in srv.requests] == [flavour, flavour]
    assert [r.stream for r in srv.requests] == [mode != "create"] * 2
    srv.assert_exhausted()


@pytest.mark.parametrize("mode", ["create", "stream-raw"])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_scripted_usage_reaches_the_sdk(srv: ScriptedModelServer, flavour: str, mode: str) -> None:
    srv.script([Turn(text="hi", usage=(17, 5))])
    assert ask(srv, flavour, mode).usage == (17, 5)


def test_anthropic_event_sequence_is_the_documented_one(srv: ScriptedModelServer) -> None:
    srv.script([Turn(text="two words", tool_calls=CALLS[:1])])
    client = anthropic_client(srv)
    kinds = []
    events: Any = client.messages.create(model="m", max_tokens=9, messages=USER, stream=True)
    for ev in events:
        kinds.append(ev.type if ev.type != "content_block_delta" else f"delta:{ev.delta.type}")
    collapsed = [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]
    assert collapsed == [
        "message_start",
        "content_block_start",
        "delta:text_delta",
        "content_block_stop",
        "content_block_start",
        "delta:input_json_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_truncated_turn_reports_the_token_limit(srv: ScriptedModelServer, flavour: str) -> None:
    srv.script([Turn(text="cut", truncated=True)] * 2)
    expected = {"anthropic": "max_tokens", "openai-chat": "length", "openai-responses": "incomplete"}[flavour]
    assert ask(srv, flavour, "create").stop == expected
    assert ask(srv, flavour, "stream-raw").stop == expected


def test_raw_argument_text_is_sent_verbatim(srv: ScriptedModelServer) -> None:
    srv.script([Turn(tool_calls=[ToolCallSpec("c1", "add", '{"a": 1,')])] * 2)
    client = openai_client(srv)
    msgs = USER
    message = client.chat.completions.create(model="m", messages=msgs).choices[0].message
    assert message.tool_calls is not None
    assert message.tool_calls[0].function.arguments == '{"a": 1,'  # type: ignore[union-attr]
    response = client.responses.create(model="m", input="x")
    assert response.output[0].arguments == '{"a": 1,'  # type: ignore[union-attr]


def test_async_clients_stream_too(srv: ScriptedModelServer) -> None:
    srv.script([Turn(tool_calls=CALLS), Turn(text="async text")])

    async def main() -> tuple[Any, str]:
        aclient = anthropic.AsyncAnthropic(api_key="t", base_url=srv.base_url, max_retries=0)
        async with aclient.messages.stream(model="m", max_tokens=9, messages=USER) as stream:
            message = await stream.get_final_message()
        oclient = openai.AsyncOpenAI(api_key="t", base_url=srv.openai_base_url, max_retries=0)
        text = ""
        async for chunk in await oclient.chat.completions.create(model="m", messages=USER, stream=True):
            text += chunk.choices[0].delta.content or ""
        await aclient.close()
        await oclient.close()
        return message, text

    message, text = asyncio.run(main())
    assert [(b.id, b.name, b.input) for b in message.content] == EXPECTED_CALLS
    assert text == "async text"


# ---- what the client sent back ----------------------------------------------------------------------

IMAGE = "iVBORw0KGgo="


def _second_request(flavour: str) -> list[Any]:
    """A correct history for turn 2: the calls of turn 1 and their results, in each API's shape."""
    if flavour == "anthropic":
        return [
            {"role": "user", "content": "compute"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments_value()}
                    for c in CALLS  # type: ignore[arg-type]
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "3"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_2",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "boom"},
                            {
                                "type": "image",
                                "source": {"type": "base64", "media_type": "image/png", "data": IMAGE},
                            },
                        ],
                    },
                ],
            },
        ]
    if flavour == "openai-chat":
        return [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "compute"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments_json()},
                    }
                    for c in CALLS
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "3"},
            {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "boom"}]},
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE}"}},
                ],
            },
        ]
    return [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": "compute"},
        *[
            {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments_json()}
            for c in CALLS
        ],
        {"type": "function_call_output", "call_id": "call_1", "output": "3"},
        {
            "type": "function_call_output",
            "call_id": "call_2",
            "output": [
                {"type": "input_text", "text": "boom"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{IMAGE}"},
            ],
        },
    ]


@pytest.mark.parametrize("mode", ["create", "stream-helper"])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_recorded_request_views(srv: ScriptedModelServer, flavour: str, mode: str) -> None:
    seen: list[int] = []

    def dynamic(request: RecordedRequest) -> Turn:
        seen.append(len(request.messages))
        return Turn(text=f"saw {len(request.tool_results)} results")

    srv.script([dynamic])
    reply = ask(srv, flavour, mode, _second_request(flavour))
    request = srv.requests[0]

    assert reply.text == "saw 2 results"
    assert seen == [len(_second_request(flavour))]
    assert request.tools == ["add", "mul"]
    assert request.tool_calls == EXPECTED_CALLS
    assert request.tool_results == [("call_1", "3", False), ("call_2", "boom", flavour == "anthropic")]
    assert [(i.media_type, i.data) for i in request.images] == [("image/png", IMAGE)]
    assert request.images[0].call_id == ("call_2" if flavour != "openai-chat" else None)
    assert request.system == ("" if flavour == "anthropic" else "be brief")
    assert request.model == ("claude-test" if flavour == "anthropic" else "gpt-test")
    # the key travels as x-api-key (older anthropic SDKs) or a bearer token
    assert "test" in (
        request.headers.get("x-api-key"),
        request.headers.get("authorization", "")[len("Bearer ") :],
    )
    assert request.status == 200 and request.rejection is None


def test_string_input_and_instructions_in_responses(srv: ScriptedModelServer) -> None:
    srv.script([Turn(text="ok")])
    openai_client(srv).responses.create(model="m", input="hello", instructions="rules")
    request = srv.requests[0]
    assert request.messages == [{"role": "user", "content": "hello"}]
    assert request.system == "rules"


# ---- the rules the real APIs enforce ----------------------------------------------------------------

BROKEN: dict[str, tuple[str, list[Any], str]] = {  # flavour -> (history, words the 400 must contain)
    "anthropic-dangling-call": (
        "anthropic",
        [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "call_9", "name": "add", "input": {}}],
            },
            {"role": "user", "content": "next"},
        ],
        "call_9",
    ),
    "anthropic-orphan-result": (
        "anthropic",
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "ghost", "content": "1"}]}],
        "unexpected `tool_use_id`",
    ),
    "anthropic-text-before-result": (
        "anthropic",
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "add", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi"},
                    {"type": "tool_result", "tool_use_id": "c", "content": "1"},
                ],
            },
        ],
        "must come first",
    ),
    "chat-dangling-call": (
        "openai-chat",
        [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "call_9", "type": "function", "function": {"name": "add", "arguments": "{}"}}
                ],
            },
        ],
        "call_9",
    ),
    "chat-orphan-result": (
        "openai-chat",
        [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "ghost", "content": "1"}],
        "must be a response to a preceeding message",
    ),
    "chat-image-in-tool-message": (
        "openai-chat",
        [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "add", "arguments": "{}"}}
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "c",
                "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}],
            },
        ],
        "Supported values are: 'text'",
    ),
    "responses-dangling-call": (
        "openai-responses",
        [
            {"role": "user", "content": "x"},
            {"type": "function_call", "call_id": "call_9", "name": "add", "arguments": "{}"},
        ],
        "No tool output found for function call call_9",
    ),
    "responses-orphan-output": (
        "openai-responses",
        [{"type": "function_call_output", "call_id": "ghost", "output": "1"}],
        "No tool call found for function call output with call_id ghost",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_history_breaking_api_rules_gets_the_apis_400(srv: ScriptedModelServer, case: str) -> None:
    flavour, history, words = BROKEN[case]
    srv.script([Turn(text="never sent")])
    with pytest.raises((anthropic.BadRequestError, openai.BadRequestError)) as info:
        ask(srv, flavour, "create", history)
    error: Any = info.value
    assert error.status_code == 400
    assert words in str(error)
    assert srv.remaining == 1  # a rejected request consumes no turn
    assert srv.requests[0].rejection is not None and words in srv.requests[0].rejection
    with pytest.raises(AssertionError, match="rejected with 400"):
        srv.assert_exhausted()


def test_lenient_server_accepts_what_strict_rejects() -> None:
    flavour, history, _ = BROKEN["chat-dangling-call"]
    with ScriptedModelServer(strict=False) as srv:
        srv.script([Turn(text="fine")])
        assert ask(srv, flavour, "create", history).text == "fine"
        srv.assert_exhausted()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_duplicate_or_malformed_tool_names_are_rejected(srv: ScriptedModelServer, flavour: str) -> None:
    tools = TOOLS[flavour] + TOOLS[flavour][:1]
    srv.script([Turn(text="never")])
    client_kw: dict[str, Any] = {"model": "m", "tools": tools}
    with pytest.raises((anthropic.BadRequestError, openai.BadRequestError), match="unique"):
        if flavour == "anthropic":
            anthropic_client(srv).messages.create(**client_kw, max_tokens=5, messages=USER)
        elif flavour == "openai-chat":
            openai_client(srv).chat.completions.create(**client_kw, messages=USER)
        else:
            openai_client(srv).responses.create(**client_kw, input="x")
    bad = [{"name": "has space", "input_schema": {"type": "object"}}]
    with pytest.raises(anthropic.BadRequestError, match="has space"):
        anthropic_client(srv).messages.create(
            model="m",
            max_tokens=5,
            tools=bad,  # type: ignore[arg-type]
            messages=USER,
        )


def test_anthropic_requires_max_tokens(srv: ScriptedModelServer) -> None:
    response = httpx.post(f"{srv.base_url}/v1/messages", json={"model": "m", "messages": []})
    assert response.status_code == 400
    assert response.json()["error"] == {
        "type": "invalid_request_error",
        "message": "max_tokens: Field required",
    }


def test_unknown_endpoint_and_bad_json_are_clear(srv: ScriptedModelServer) -> None:
    response = httpx.post(f"{srv.base_url}/v1/completions", json={})
    assert response.status_code == 404 and "/v1/chat/completions" in response.json()["error"]["message"]
    response = httpx.post(f"{srv.openai_base_url}/chat/completions", content=b"{nope")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "request body is not valid JSON"
    assert srv.requests[0].body == "{nope"
    failures = srv.failures
    assert "unknown endpoint POST /v1/completions" in failures[0] and "not valid JSON" in failures[1]


# ---- errors -----------------------------------------------------------------------------------------


def _call(srv: ScriptedModelServer, flavour: str, **client_kw: Any) -> Any:
    msgs = USER
    if flavour == "anthropic":
        return anthropic_client(srv, **client_kw).messages.create(model="m", max_tokens=5, messages=msgs)
    if flavour == "openai-chat":
        return openai_client(srv, **client_kw).chat.completions.create(model="m", messages=msgs)
    return openai_client(srv, **client_kw).responses.create(model="m", input="x")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_error_turn_in_the_apis_error_shape(srv: ScriptedModelServer, flavour: str) -> None:
    srv.script([ErrorTurn(status=429, message="rate limited", retry_after=7)])
    with pytest.raises((anthropic.RateLimitError, openai.RateLimitError)) as info:
        _call(srv, flavour)
    error: Any = info.value
    assert error.status_code == 429
    assert error.response.headers["retry-after"] == "7"
    body = error.response.json()
    if flavour == "anthropic":
        assert body["type"] == "error"
        assert body["error"] == {"type": "rate_limit_error", "message": "rate limited"}
    else:
        assert body["error"]["message"] == "rate limited"
        assert body["error"]["code"] == "rate_limit_exceeded"
        assert error.code == "rate_limit_exceeded"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_error_type_and_code_overrides(srv: ScriptedModelServer, flavour: str) -> None:
    srv.script(
        [ErrorTurn(status=400, message="too long", error_type="custom_type", code="context_length_exceeded")]
    )
    with pytest.raises((anthropic.BadRequestError, openai.BadRequestError)) as info:
        _call(srv, flavour)
    body = info.value.response.json()  # type: ignore[attr-defined]
    assert body["error"]["type"] == "custom_type" and body["error"]["message"] == "too long"
    if flavour != "anthropic":
        assert body["error"]["code"] == "context_length_exceeded"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_sdk_retries_scripted_errors_by_default(srv: ScriptedModelServer, flavour: str) -> None:
    srv.script(
        [
            ErrorTurn(529, "overloaded", retry_after=0.01),
            ErrorTurn(500, "oops", retry_after=0.01),
            Turn(text="ok"),
        ]
    )
    _call(srv, flavour, max_retries=2)
    assert [r.status for r in srv.requests] == [529, 500, 200]
    srv.assert_exhausted()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_should_retry_false_stops_sdk_retries(srv: ScriptedModelServer, flavour: str) -> None:
    srv.script([ErrorTurn(503, "down", should_retry=False), Turn(text="not reached")])
    with pytest.raises((anthropic.InternalServerError, openai.InternalServerError)):
        _call(srv, flavour, max_retries=2)
    assert len(srv.requests) == 1 and srv.remaining == 1


def test_mid_stream_errors_raise_or_surface_in_each_sdk(srv: ScriptedModelServer) -> None:
    srv.script([ErrorTurn(529, "overloaded now", mid_stream=True)] * 3)
    msgs = USER
    seen: list[str] = []
    with pytest.raises(anthropic.APIStatusError, match="overloaded now"):
        for ev in anthropic_client(srv).messages.create(model="m", max_tokens=5, messages=msgs, stream=True):
            seen.append(ev.type)
    assert seen == ["message_start"]  # the stream had started: a 200, then the error event
    with pytest.raises(openai.APIError, match="overloaded now"):
        for _ in openai_client(srv).chat.completions.create(model="m", messages=msgs, stream=True):
            pass
    events = list(openai_client(srv).responses.create(model="m", input="x", stream=True))
    assert [e.type for e in events] == ["response.created", "response.in_progress", "error"]
    assert events[-1].message == "overloaded now"  # type: ignore[union-attr]
    assert [r.status for r in srv.requests] == [200, 200, 200]


def test_mid_stream_error_on_a_non_streaming_request_is_a_plain_http_error(srv: ScriptedModelServer) -> None:
    srv.script([ErrorTurn(529, "overloaded", mid_stream=True)])
    with pytest.raises(anthropic.APIStatusError) as info:
        _call(srv, "anthropic")
    assert info.value.status_code == 529
    assert info.value.response.json()["error"]["type"] == "overloaded_error"


# ---- script bookkeeping -----------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_exhausted_script_is_a_500_that_is_not_retried(srv: ScriptedModelServer, flavour: str) -> None:
    with pytest.raises((anthropic.InternalServerError, openai.InternalServerError), match="script exhausted"):
        _call(srv, flavour, max_retries=2)
    assert len(srv.requests) == 1
    with pytest.raises(AssertionError, match="script exhausted"):
        srv.assert_exhausted()


def test_assert_exhausted_reports_unused_turns(srv: ScriptedModelServer) -> None:
    srv.script([Turn(text="a")])
    srv.script([Turn(text="b"), Turn(text="c")])  # appends
    assert srv.remaining == 3
    _call(srv, "openai-chat")
    with pytest.raises(AssertionError, match="2 scripted turn"):
        srv.assert_exhausted()
    _call(srv, "anthropic")
    assert _call(srv, "openai-responses").output_text == "c"
    srv.assert_exhausted()


def test_failing_dynamic_turn_is_a_500_and_a_recorded_failure(srv: ScriptedModelServer) -> None:
    def broken(request: RecordedRequest) -> Turn:
        raise KeyError("no such thing")

    srv.script([broken, lambda request: "not a turn"])  # type: ignore[list-item,return-value]
    with pytest.raises(openai.InternalServerError, match="KeyError"):
        _call(srv, "openai-chat", max_retries=2)
    with pytest.raises(openai.InternalServerError, match="neither Turn nor ErrorTurn"):
        _call(srv, "openai-chat")
    assert len(srv.requests) == 2
    assert "dynamic turn raised KeyError" in srv.failures[0] and "returned str" in srv.failures[1]


def test_bad_script_items_are_refused_with_clear_errors(srv: ScriptedModelServer) -> None:
    with pytest.raises(TypeError, match="script item 1"):
        srv.script([Turn(text="ok"), 42])  # type: ignore[list-item]
    assert srv.remaining == 0
    with pytest.raises(ValueError, match="duplicate tool call ids: \\['c'\\]"):
        Turn(tool_calls=[ToolCallSpec("c", "a"), ToolCallSpec("c", "b")])
    with pytest.raises(ValueError, match=r"ErrorTurn\.status"):
        ErrorTurn(status=200)
    with pytest.raises(ValueError, match=r"ToolCallSpec\.name"):
        ToolCallSpec("c", "")
    with pytest.raises(TypeError, match="arguments"):
        ToolCallSpec("c", "f", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="delay"):
        Turn(delay=-1)


# ---- concurrency, timeouts, shutdown ----------------------------------------------------------------


def test_concurrent_requests_each_get_one_turn(srv: ScriptedModelServer) -> None:
    n = 8
    srv.script([Turn(text=f"turn {i}", delay=0.2) for i in range(n)])
    answers: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        flavour = FLAVOURS[i % 3]
        reply = _call(srv, flavour)
        text = (
            reply.content[0].text
            if flavour == "anthropic"
            else reply.choices[0].message.content
            if flavour == "openai-chat"
            else reply.output_text
        )
        with lock:
            answers.append(text)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    srv.wait_for_requests(n)
    for t in threads:
        t.join()
    assert sorted(answers) == sorted(f"turn {i}" for i in range(n))
    assert len(srv.requests) == n
    srv.assert_exhausted()


def _new_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before and t.is_alive()]


def test_delay_lets_the_client_time_out_and_close_interrupts_it() -> None:
    before = set(threading.enumerate())
    srv = ScriptedModelServer().start()
    # A delay far beyond the test timeout: only close() interrupting it lets this test finish.
    srv.script([Turn(text="late", delay=1000)])
    with pytest.raises(openai.APITimeoutError):
        _call(srv, "openai-chat", timeout=0.3)
    assert len(srv.requests) == 1  # the turn was consumed when the request arrived
    srv.close()
    assert _new_threads(before) == []


def test_close_cuts_idle_keep_alive_connections_and_leaves_no_thread() -> None:
    before = set(threading.enumerate())
    with ScriptedModelServer() as srv:
        srv.script([Turn(text="a"), Turn(text="b", tool_calls=CALLS)])
        anthropic_c = anthropic_client(srv)
        openai_c = openai_client(srv)
        anthropic_c.messages.create(model="m", max_tokens=5, messages=USER)
        for _ in openai_c.chat.completions.create(model="m", messages=USER, stream=True):
            pass
        assert len(_new_threads(before)) >= 2  # serve loop + at least one idle keep-alive handler
    # the clients are still open (their pooled connections too), yet every server thread is gone
    assert _new_threads(before) == []
    with pytest.raises(RuntimeError, match="not running"):
        _ = srv.base_url
    with pytest.raises(RuntimeError, match="restarted"):
        srv.start()
    anthropic_c.close()
    openai_c.close()


def test_close_is_idempotent_and_works_unstarted() -> None:
    srv = ScriptedModelServer()
    srv.close()
    running = ScriptedModelServer().start()
    running.close()
    running.close()


def test_model_server_fixture(model_server: ScriptedModelServer) -> None:  # noqa: F811
    model_server.script([Turn(tool_calls=CALLS[:1])])
    message = _call(model_server, "anthropic")
    assert [(b.id, b.name, b.input) for b in message.content] == EXPECTED_CALLS[:1]
    model_server.assert_exhausted()
