"""Anthropic Messages API through the ``anthropic`` SDK.

Wire mapping: an assistant turn's calls are ``tool_use`` blocks; a batch's results are one user
message of ``tool_result`` blocks in call order, with ``is_error`` and image / PDF document blocks
for multimodal output (other media become a text placeholder). Server-tool and thinking blocks
are kept raw and sent back verbatim, as the API requires.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

from toolfork._extras import import_optional
from toolfork.agent.errors import ProviderError
from toolfork.agent.messages import (
    AssistantMessage,
    Message,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from toolfork.agent.providers.base import ModelRequest, SDKProvider, StreamItem, describe_api_error, key_from_env
from toolfork.agent.special_tools import ProviderTool
from toolfork.tools.output import ContentBlock

DEFAULT_MODEL = "claude-sonnet-4-5"
ENV_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
_PLAIN_BLOCKS = ("text", "tool_use")


def _sdk() -> Any:
    """The ``anthropic`` SDK, imported on first use; missing, an ImportError naming the extra."""
    return import_optional("anthropic", "the Anthropic provider")


def block_to_wire(block: ContentBlock) -> dict[str, Any] | None:
    """One content block as an Anthropic content block (None for an empty text)."""
    if block.type == "text":
        return {"type": "text", "text": block.text} if block.text else None
    if block.type == "image":
        if block.url is not None:
            return {"type": "image", "source": {"type": "url", "url": block.url}}
        return {"type": "image", "source": {"type": "base64", "media_type": block.media_type or "image/png",
                                            "data": block.data or ""}}
    if block.type == "file" and (block.media_type or "") == "application/pdf":
        source: dict[str, Any]
        if block.url is not None:
            source = {"type": "url", "url": block.url}
        else:
            source = {"type": "base64", "media_type": "application/pdf", "data": block.data or ""}
        doc: dict[str, Any] = {"type": "document", "source": source}
        if block.name:
            doc["title"] = block.name
        return doc
    return {"type": "text", "text": block.as_text()}


def _blocks(blocks: list[ContentBlock]) -> list[dict[str, Any]]:
    return [w for w in (block_to_wire(b) for b in blocks) if w is not None]


def messages_to_wire(messages: list[Message] | tuple[Message, ...] | Any) -> list[dict[str, Any]]:
    """Neutral messages -> Anthropic ``messages``; consecutive same-role messages are merged
    (a failed run can leave a user message right after tool results)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            content: Any = message.content if isinstance(message.content, str) else _blocks(message.content)
            wire = {"role": "user", "content": content}
        elif isinstance(message, AssistantMessage):
            wire = {"role": "assistant", "content": assistant_content(message)}
        elif isinstance(message, ToolResultMessage):
            wire = {"role": "user", "content": [tool_result_block(r) for r in message.results]}
        else:  # pragma: no cover - the Message union is closed
            raise TypeError(f"cannot send {type(message).__name__} to Anthropic")
        if out and out[-1]["role"] == wire["role"]:
            out[-1]["content"] = _as_list(out[-1]["content"]) + _as_list(wire["content"])
        else:
            out.append(wire)
    return out


def _as_list(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def assistant_content(message: AssistantMessage) -> list[dict[str, Any]]:
    if message.raw and message.raw.get("provider") == "anthropic":
        return list(message.raw["content"])
    content: list[dict[str, Any]] = []
    if message.text:
        content.append({"type": "text", "text": message.text})
    for call in message.tool_calls:
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
    if not content:
        content.append({"type": "text", "text": "(no answer)"})
    return content


def tool_result_block(result: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id}
    content = _blocks(result.output.content)
    if content:
        block["content"] = content
    if result.output.is_error:
        block["is_error"] = True
    return block


def provider_tool_to_wire(tool: ProviderTool) -> dict[str, Any]:
    name = tool.name or re.sub(r"_\d{8}$", "", tool.type)
    return {**tool.options, "type": tool.type, "name": name}


def message_from_wire(message: Any) -> AssistantMessage:
    """An SDK ``Message`` -> neutral. Blocks other than text / tool_use are kept raw for echoing."""
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    keep_raw = False
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            args = block.input if isinstance(block.input, dict) else {}
            invalid = None if isinstance(block.input, dict) else str(block.input)
            calls.append(ToolCallRequest(id=block.id, name=block.name, arguments=dict(args),
                                         invalid_arguments=invalid))
        else:
            keep_raw = True
    raw = None
    if keep_raw:
        raw = {"provider": "anthropic", "content": [_dump_block(b) for b in message.content]}
    usage = getattr(message, "usage", None)
    return AssistantMessage(
        text="".join(texts),
        tool_calls=calls,
        stop_reason=getattr(message, "stop_reason", None),
        model=getattr(message, "model", None),
        usage={"input_tokens": int(usage.input_tokens or 0), "output_tokens": int(usage.output_tokens or 0)}
        if usage is not None else {},
        raw=raw,
    )


def _dump_block(block: Any) -> dict[str, Any]:
    data = block.model_dump(mode="json", exclude_none=True)
    data.pop("parsed_output", None)
    return dict(data)


def anthropic_tool_choice(choice: str) -> dict[str, Any]:
    """The neutral tool choice ("auto" | "required" | "none" | a tool name) in the Messages API's form."""
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


class Anthropic(SDKProvider):
    """Claude through the Messages API. Key: ``api_key`` or ``ANTHROPIC_API_KEY``; base URL:
    ``base_url`` or ``ANTHROPIC_BASE_URL`` (read by the SDK)."""

    name = "anthropic"

    def __init__(self, model: str = DEFAULT_MODEL, *, api_key: str | None = None, base_url: str | None = None,
                 max_tokens: int = 4096, temperature: float | None = None, timeout: float | None = 600.0,
                 max_retries: int = 2, extra: dict[str, Any] | None = None) -> None:
        super().__init__(model)
        self.api_key = key_from_env("Anthropic", api_key, ENV_KEYS)
        self.base_url = base_url
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.timeout = timeout
        self.max_retries = max_retries
        self.extra = dict(extra or {})

    def _make_client(self, asynchronous: bool, **kwargs: Any) -> Any:
        anthropic = _sdk()

        if asynchronous:  # an HTTP client of the SDK's defaults, without its finalizer (see SDKProvider)
            return anthropic.AsyncAnthropic(http_client=anthropic.DefaultAsyncHttpxClient(), **kwargs)
        return anthropic.Anthropic(**kwargs)

    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {"model": request.model or self.model, "max_tokens": self.max_tokens,
                                  "messages": messages_to_wire(request.messages)}
        if request.system:
            params["system"] = request.system
        tools = [t.to_anthropic() for t in request.tools]
        tools += [provider_tool_to_wire(t) for t in request.provider_tools]
        if tools:
            params["tools"] = tools
            if request.tool_choice is not None:
                params["tool_choice"] = anthropic_tool_choice(request.tool_choice)
        params.update(self.extra)
        temperature = request.temperature if request.temperature is not None else self.temperature
        if temperature is not None:
            # In the request body via extra_body: recent SDKs dropped the keyword from create(), the API
            # still takes the field.
            params["extra_body"] = {**(params.get("extra_body") or {}), "temperature": temperature}
        return params

    def complete(self, request: ModelRequest) -> AssistantMessage:
        anthropic = _sdk()

        try:
            response = self.client.messages.create(**self.build_params(request))
        except anthropic.APIError as exc:
            raise ProviderError(self.name, describe_api_error(exc)) from exc
        return message_from_wire(response)

    def stream(self, request: ModelRequest) -> Iterator[StreamItem]:
        anthropic = _sdk()

        try:
            with self.client.messages.stream(**self.build_params(request)) as stream:
                for event in stream:
                    if event.type == "text" and event.text:
                        yield event.text
                final = stream.get_final_message()
        except anthropic.APIError as exc:
            raise ProviderError(self.name, describe_api_error(exc)) from exc
        yield message_from_wire(final)

    async def acomplete(self, request: ModelRequest) -> AssistantMessage:
        anthropic = _sdk()

        try:
            response = await self.async_client.messages.create(**self.build_params(request))
        except anthropic.APIError as exc:
            raise ProviderError(self.name, describe_api_error(exc)) from exc
        return message_from_wire(response)

    async def astream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        anthropic = _sdk()

        try:
            async with self.async_client.messages.stream(**self.build_params(request)) as stream:
                async for event in stream:
                    if event.type == "text" and event.text:
                        yield event.text
                final = await stream.get_final_message()
        except anthropic.APIError as exc:
            raise ProviderError(self.name, describe_api_error(exc)) from exc
        yield message_from_wire(final)


__all__ = ["DEFAULT_MODEL", "Anthropic", "message_from_wire", "messages_to_wire"]
