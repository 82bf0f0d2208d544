"""OpenAI through the ``openai`` SDK: Chat Completions (default) and the Responses API.

Chat Completions: calls are ``tool_calls`` on the assistant message, results are ``role: "tool"``
messages in call order. That API accepts only text in a tool message, so media blocks become a
text placeholder there and images follow in one user message right after the batch's results
(the way the API accepts images). Responses: ``function_call`` / ``function_call_output`` items,
whose output may hold ``input_image`` / ``input_file`` parts directly.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

from toolfork._extras import import_optional
from toolfork.agent.errors import ProviderError, UnsupportedProviderToolError
from toolfork.agent.messages import (
    AssistantMessage,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from toolfork.agent.providers.base import ModelRequest, SDKProvider, StreamItem, describe_api_error, key_from_env
from toolfork.tools.output import ContentBlock

DEFAULT_MODEL = "gpt-4.1"
ENV_KEYS = ("OPENAI_API_KEY",)


def _sdk() -> Any:
    """The ``openai`` SDK, imported on first use; missing, an ImportError naming the extra."""
    return import_optional("openai", "the OpenAI provider")
Api = Literal["chat", "responses"]


def openai_tool_choice(choice: str, api: str) -> Any:
    """The neutral tool choice ("auto" | "required" | "none" | a tool name) in the API's form."""
    if choice in ("auto", "required", "none"):
        return choice
    if api == "chat":
        return {"type": "function", "function": {"name": choice}}
    return {"type": "function", "name": choice}


def data_url(block: ContentBlock) -> str:
    if block.url is not None:
        return block.url
    return f"data:{block.media_type or 'application/octet-stream'};base64,{block.data or ''}"


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """(arguments, None) for a JSON object; ({}, raw text) for anything else."""
    text = raw or ""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except ValueError:
        return {}, text
    if not isinstance(value, dict):
        return {}, text
    return value, None


def _call_arguments_json(call: ToolCallRequest) -> str:
    if call.invalid_arguments is not None:
        return call.invalid_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


# --- Chat Completions ----------------------------------------------------------------------------

def chat_user_part(block: ContentBlock) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "text": block.text or ""}
    if block.type == "image":
        return {"type": "image_url", "image_url": {"url": data_url(block)}}
    if block.type == "file" and block.data is not None and (block.media_type or "") == "application/pdf":
        return {"type": "file", "file": {"filename": block.name or "document.pdf", "file_data": data_url(block)}}
    return {"type": "text", "text": block.as_text()}


def chat_messages(system: str, messages: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                out.append({"role": "user", "content": message.content})
            else:
                out.append({"role": "user", "content": [chat_user_part(b) for b in message.content]})
        elif isinstance(message, AssistantMessage):
            wire: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                wire["tool_calls"] = [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.name, "arguments": _call_arguments_json(c)}}
                    for c in message.tool_calls
                ]
            elif wire["content"] is None:
                wire["content"] = ""
            out.append(wire)
        elif isinstance(message, ToolResultMessage):
            media: list[dict[str, Any]] = []
            for result in message.results:
                out.append({"role": "tool", "tool_call_id": result.call_id, "content": result.output.as_text()})
                images = [b for b in result.output.content if b.type == "image"]
                if images:
                    media.append({"type": "text",
                                  "text": f"Image(s) returned by tool call {result.call_id} ({result.name}):"})
                    media += [chat_user_part(b) for b in images]
            if media:
                out.append({"role": "user", "content": media})
        else:  # pragma: no cover
            raise TypeError(f"cannot send {type(message).__name__} to OpenAI")
    return out


def chat_message_from_wire(response: Any) -> AssistantMessage:
    if not response.choices:
        raise ProviderError("openai", "the response has no choices")
    choice = response.choices[0]
    calls = []
    for tc in choice.message.tool_calls or []:
        function = getattr(tc, "function", None)
        if function is None:
            continue
        args, invalid = parse_arguments(function.arguments)
        calls.append(ToolCallRequest(id=tc.id, name=function.name, arguments=args, invalid_arguments=invalid))
    return AssistantMessage(text=choice.message.content or "", tool_calls=calls,
                            stop_reason=choice.finish_reason, model=getattr(response, "model", None),
                            usage=_chat_usage(getattr(response, "usage", None)))


def _chat_usage(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    return {"input_tokens": int(usage.prompt_tokens or 0), "output_tokens": int(usage.completion_tokens or 0)}


class _ChatAccumulator:
    """Rebuilds a Chat Completions answer from stream chunks (tool call arguments arrive in pieces)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.model: str | None = None
        self.usage: dict[str, int] = {}

    def add(self, chunk: Any) -> str:
        self.model = getattr(chunk, "model", None) or self.model
        if getattr(chunk, "usage", None) is not None:
            self.usage = _chat_usage(chunk.usage)
        delta_text = ""
        for choice in chunk.choices or []:
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta is not None and delta.content:
                delta_text += delta.content
            for tc in (delta.tool_calls if delta is not None else None) or []:
                slot = self.calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                if tc.id:
                    slot["id"] = tc.id
                if tc.function is not None:
                    if tc.function.name:
                        slot["name"] += tc.function.name
                    if tc.function.arguments:
                        slot["arguments"] += tc.function.arguments
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        if delta_text:
            self.text.append(delta_text)
        return delta_text

    def message(self) -> AssistantMessage:
        calls = []
        for index in sorted(self.calls):
            slot = self.calls[index]
            args, invalid = parse_arguments(slot["arguments"])
            calls.append(ToolCallRequest(id=slot["id"] or f"call_{index}", name=slot["name"], arguments=args,
                                         invalid_arguments=invalid))
        return AssistantMessage(text="".join(self.text), tool_calls=calls, stop_reason=self.finish_reason,
                                model=self.model, usage=self.usage)


# --- Responses -----------------------------------------------------------------------------------

def responses_part(block: ContentBlock) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "input_text", "text": block.text or ""}
    if block.type == "image":
        return {"type": "input_image", "image_url": data_url(block)}
    if block.type == "file" and block.data is not None:
        return {"type": "input_file", "filename": block.name or "file", "file_data": data_url(block)}
    if block.type == "file" and block.url is not None:
        return {"type": "input_file", "file_url": block.url}
    return {"type": "input_text", "text": block.as_text()}


def responses_input(messages: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            content: Any = (message.content if isinstance(message.content, str)
                            else [responses_part(b) for b in message.content])
            items.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            if message.text:
                items.append({"role": "assistant", "content": message.text})
            for call in message.tool_calls:
                items.append({"type": "function_call", "call_id": call.id, "name": call.name,
                              "arguments": _call_arguments_json(call)})
        elif isinstance(message, ToolResultMessage):
            for result in message.results:
                blocks = result.output.content
                output: Any
                if all(b.type == "text" for b in blocks):
                    output = result.output.as_text()
                else:
                    output = [responses_part(b) for b in blocks]
                items.append({"type": "function_call_output", "call_id": result.call_id, "output": output})
        else:  # pragma: no cover
            raise TypeError(f"cannot send {type(message).__name__} to OpenAI Responses")
    return items


def responses_message_from_wire(response: Any) -> AssistantMessage:
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for item in response.output or []:
        if item.type == "message":
            for part in item.content or []:
                if getattr(part, "type", None) == "output_text":
                    texts.append(part.text)
        elif item.type == "function_call":
            args, invalid = parse_arguments(item.arguments)
            calls.append(ToolCallRequest(id=item.call_id, name=item.name, arguments=args, invalid_arguments=invalid))
    usage = getattr(response, "usage", None)
    stop = getattr(response, "status", None)
    details = getattr(response, "incomplete_details", None)
    if details is not None and getattr(details, "reason", None):
        stop = f"incomplete:{details.reason}"
    return AssistantMessage(
        text="".join(texts), tool_calls=calls, stop_reason=stop, model=getattr(response, "model", None),
        usage={"input_tokens": int(usage.input_tokens or 0), "output_tokens": int(usage.output_tokens or 0)}
        if usage is not None else {},
    )


# --- the provider --------------------------------------------------------------------------------

class OpenAI(SDKProvider):
    """OpenAI models. ``api="chat"`` (Chat Completions) or ``api="responses"``. Key: ``api_key`` or
    ``OPENAI_API_KEY``; base URL: ``base_url`` or ``OPENAI_BASE_URL`` (read by the SDK)."""

    name = "openai"
    env_keys: tuple[str, ...] = ENV_KEYS

    def __init__(self, model: str = DEFAULT_MODEL, *, api_key: str | None = None, base_url: str | None = None,
                 api: Api = "chat", max_tokens: int | None = None, temperature: float | None = None,
                 timeout: float | None = 600.0, max_retries: int = 2, stream_usage: bool = True,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(model)
        if api not in ("chat", "responses"):
            raise ValueError(f"OpenAI api must be 'chat' or 'responses', got {api!r}")
        self.api: Api = api
        self.api_key = self._resolve_key(api_key)
        self.base_url = base_url
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.timeout = timeout
        self.max_retries = max_retries
        self.stream_usage = stream_usage
        self.extra = dict(extra or {})

    def _resolve_key(self, api_key: str | None) -> str:
        return key_from_env("OpenAI", api_key, self.env_keys)

    def _make_client(self, asynchronous: bool, **kwargs: Any) -> Any:
        openai = _sdk()

        if asynchronous:  # an HTTP client of the SDK's defaults, without its finalizer (see SDKProvider)
            return openai.AsyncOpenAI(http_client=openai.DefaultAsyncHttpxClient(), **kwargs)
        return openai.OpenAI(**kwargs)

    def check_request(self, request: ModelRequest) -> None:
        if self.api == "chat" and request.provider_tools:
            labels = ", ".join(t.label for t in request.provider_tools)
            raise UnsupportedProviderToolError(
                f"{type(self).__name__} (Chat Completions API) cannot host provider tools: {labels}; "
                "use the Responses API (api='responses') or the Anthropic provider"
            )

    def build_params(self, request: ModelRequest, stream: bool = False) -> dict[str, Any]:
        self.check_request(request)
        params: dict[str, Any] = {"model": request.model or self.model}
        if self.api == "chat":
            params["messages"] = chat_messages(request.system, request.messages)
            tools = [t.to_openai(api="chat") for t in request.tools]
            if self.max_tokens is not None:
                params["max_completion_tokens"] = self.max_tokens
            if stream:
                params["stream"] = True
                if self.stream_usage:
                    params["stream_options"] = {"include_usage": True}
        else:
            params["input"] = responses_input(request.messages)
            if request.system:
                params["instructions"] = request.system
            tools = [t.to_openai(api="responses") for t in request.tools]
            tools += [{**t.options, "type": t.type} for t in request.provider_tools]
            if self.max_tokens is not None:
                params["max_output_tokens"] = self.max_tokens
            if stream:
                params["stream"] = True
        if tools:
            params["tools"] = tools
            if request.tool_choice is not None:
                params["tool_choice"] = openai_tool_choice(request.tool_choice, self.api)
        temperature = request.temperature if request.temperature is not None else self.temperature
        if temperature is not None:
            params["temperature"] = temperature
        params.update(self.extra)
        return params

    # -- sync -------------------------------------------------------------------------------------
    def complete(self, request: ModelRequest) -> AssistantMessage:
        openai = _sdk()

        params = self.build_params(request)
        try:
            if self.api == "chat":
                return chat_message_from_wire(self.client.chat.completions.create(**params))
            return responses_message_from_wire(self.client.responses.create(**params))
        except openai.APIError as exc:
            raise ProviderError(self.name, describe_api_error(exc)) from exc

    def stream(self, request: ModelRequest) -> Iterator[StreamItem]:
        openai = _sdk()

        params = self.build_params(request, stream=True)
        final: AssistantMessage | None = None
        try:
            if self.api == "chat":
                acc = _ChatAccumulator()
                for chunk in self.client.chat.completions.create(**params):
                    delta = acc.add(chunk)
                    if delta:
                        yield delta
                final = acc.message()
            else:
                for event in self.client.responses.create(**params):
                    text, done = _responses_event(self.name, event)
                    if text:
                        yield text
                    if done is not None:
                        final = done
                if final is None:
                    raise ProviderError(self.name, "the response stream ended without a final response")
        except openai.APIError as exc:
            raise ProviderError(self.name, describe_api_error(exc)) from exc
        assert final is not None
        yield final

    # -- async ------------------------------------------------------------------------------------
    async def acomplete(self, request: ModelRequest) -> AssistantMessage:
        openai = _sdk()

        params = self.build_params(request)
        try:
            if self.api == "chat":
                return chat_message_from_wire(await self.async_client.chat.completions.create(**params))
            return responses_message_from_wire(await self.async_client.responses.create(**params))
        except openai.APIError as exc:
            raise ProviderError(self.name, describe_api_error(exc)) from exc

    async def astream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        openai = _sdk()

        params = self.build_params(request, stream=True)
        final: AssistantMessage | None = None
        try:
            if self.api == "chat":
                acc = _ChatAccumulator()
                async for chunk in await self.async_client.chat.completions.create(**params):
                    delta = acc.add(chunk)
                    if delta:
                        yield delta
                final = acc.message()
            else:
                async for event in await self.async_client.responses.create(**params):
                    text, done = _responses_event(self.name, event)
                    if text:
                        yield text
                    if done is not None:
                        final = done
                if final is None:
                    raise ProviderError(self.name, "the response stream ended without a final response")
        except openai.APIError as exc:
            raise ProviderError(self.name, describe_api_error(exc)) from exc
        assert final is not None
        yield final


def _responses_event(provider: str, event: Any) -> tuple[str, AssistantMessage | None]:
    kind = getattr(event, "type", "")
    if kind == "response.output_text.delta":
        return event.delta or "", None
    if kind in ("response.completed", "response.incomplete"):
        return "", responses_message_from_wire(event.response)
    if kind == "response.failed":
        error = getattr(event.response, "error", None)
        raise ProviderError(provider, f"response failed: {getattr(error, 'message', None) or error}")
    if kind == "error":
        raise ProviderError(provider, f"stream error: {getattr(event, 'message', None) or event}")
    return "", None


class OpenAIResponses(OpenAI):
    """``OpenAI(api="responses")`` under its own name."""

    def __init__(self, model: str = DEFAULT_MODEL, **kwargs: Any) -> None:
        kwargs.setdefault("api", "responses")
        super().__init__(model, **kwargs)


__all__ = ["DEFAULT_MODEL", "OpenAI", "OpenAIResponses", "chat_messages", "responses_input"]
