"""Anthropic Messages API (POST /v1/messages): responses, SSE events, errors, request checks.

Event order follows Anthropic's streaming documentation: message_start, ping, per content block
content_block_start / content_block_delta... / content_block_stop, message_delta, message_stop.
Every SSE event carries an `event:` line because the SDK skips events without one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .common import (
    ImageView,
    ToolCallView,
    ToolResultView,
    content_text,
    iter_dicts,
    new_id,
    split_json,
    split_text,
    sse,
    usage_for,
)
from .script import ErrorTurn, Turn
from .wire import WireFormat, check_tool_names

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _stop_reason(turn: Turn) -> str:
    if turn.truncated:
        return "max_tokens"
    return "tool_use" if turn.tool_calls else "end_turn"


def _event(event_type: str, **fields: Any) -> bytes:
    return sse({"type": event_type, **fields}, event_type)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    return list(iter_dicts(message.get("content")))


class AnthropicWire(WireFormat):
    api = "anthropic"
    path = "/v1/messages"
    request_id_header = "request-id"

    def validate(self, body: dict[str, Any]) -> str | None:
        for name, kind in (("model", str), ("max_tokens", int), ("messages", list)):
            if name not in body:
                return f"{name}: Field required"
            if not isinstance(body[name], kind) or isinstance(body[name], bool):
                return f"{name}: Input should be a valid {kind.__name__}"
        tools = list(iter_dicts(body.get("tools")))
        custom = [t for t in tools if t.get("type") in (None, "custom")]
        for i, tool in enumerate(custom):
            if not isinstance(tool.get("input_schema"), dict):
                return f"tools.{i}.custom.input_schema: Field required"
            if tool["input_schema"].get("type") != "object":
                return f"tools.{i}.custom.input_schema.type: Input should be 'object'"
        problem = check_tool_names([t.get("name") for t in tools], "tools")
        if problem:
            return problem
        return self._check_pairs(body["messages"])

    @staticmethod
    def _check_pairs(messages: list[Any]) -> str | None:
        previous_uses: set[str] = set()
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
                return f"messages.{i}.role: Input should be 'user' or 'assistant'"
            blocks = _blocks(message)
            if message["role"] == "assistant":
                uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
                following = messages[i + 1] if i + 1 < len(messages) else None
                if uses and isinstance(following, dict):
                    answered = {
                        b.get("tool_use_id") for b in _blocks(following) if b.get("type") == "tool_result"
                    }
                    missing = [u for u in uses if u not in answered]
                    if missing:
                        return (
                            f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                            f"immediately after: {', '.join(map(str, missing))}. Each `tool_use` block must "
                            "have a corresponding `tool_result` block in the next message."
                        )
                previous_uses = {str(u) for u in uses}
                continue
            seen_other = False
            for j, block in enumerate(blocks):
                if block.get("type") != "tool_result":
                    seen_other = True
                    continue
                if seen_other:
                    return (
                        f"messages.{i}.content.{j}: `tool_result` blocks must come first in the content "
                        "array; any text must come after all tool results."
                    )
                if block.get("tool_use_id") not in previous_uses:
                    return (
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                        "`tool_use` block in the previous message."
                    )
            previous_uses = set()
        return None

    def _message(self, turn: Turn, body: dict[str, Any], msg_id: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        for call in turn.tool_calls:
            content.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments_value()}
            )
        inp, out = usage_for(turn, body)
        return {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": _stop_reason(turn),
            "stop_sequence": None,
            "usage": {"input_tokens": inp, "output_tokens": out},
        }

    def respond(self, turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
        return self._message(turn, body, new_id("msg_"))

    def _start(self, turn: Turn, body: dict[str, Any]) -> Iterator[bytes]:
        start = self._message(turn, body, new_id("msg_"))
        start.update(content=[], stop_reason=None, stop_sequence=None)
        start["usage"] = {"input_tokens": start["usage"]["input_tokens"], "output_tokens": 1}
        yield _event("message_start", message=start)
        yield _event("ping")

    def stream(self, turn: Turn, body: dict[str, Any]) -> Iterator[bytes]:
        yield from self._start(turn, body)
        blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        if turn.text:
            texts = [{"type": "text_delta", "text": piece} for piece in split_text(turn.text)]
            blocks.append(({"type": "text", "text": ""}, texts))
        for call in turn.tool_calls:
            # The real API opens every tool block with an empty partial_json; clients must tolerate it.
            pieces = ["", *split_json(call.arguments_json())]
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
            blocks.append(({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}, deltas))
        for index, (block, deltas) in enumerate(blocks):
            yield _event("content_block_start", index=index, content_block=block)
            for delta in deltas:
                yield _event("content_block_delta", index=index, delta=delta)
            yield _event("content_block_stop", index=index)
        _, out = usage_for(turn, body)
        stop = {"stop_reason": _stop_reason(turn), "stop_sequence": None}
        yield _event("message_delta", delta=stop, usage={"output_tokens": out})
        yield _event("message_stop")

    def error_body(self, err: ErrorTurn) -> dict[str, Any]:
        default = _ERROR_TYPES.get(err.status, "api_error" if err.status >= 500 else "invalid_request_error")
        return {
            "type": "error",
            "error": {"type": err.error_type or default, "message": err.message},
            "request_id": new_id("req_"),
        }

    def stream_error(self, err: ErrorTurn, body: dict[str, Any]) -> Iterator[bytes]:
        yield from self._start(Turn(), body)
        payload = self.error_body(err)
        payload.pop("request_id")
        yield sse(payload, "error")

    def messages(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        return list(iter_dicts(body.get("messages")))

    def system(self, body: dict[str, Any]) -> str:
        return content_text(body.get("system"))

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return [str(t.get("name") or t.get("type")) for t in iter_dicts(body.get("tools"))]

    def tool_calls(self, body: dict[str, Any]) -> list[ToolCallView]:
        return [
            ToolCallView(b.get("id", ""), b.get("name", ""), b.get("input"))
            for m in self.messages(body)
            if m.get("role") == "assistant"
            for b in _blocks(m)
            if b.get("type") == "tool_use"
        ]

    def tool_results(self, body: dict[str, Any]) -> list[ToolResultView]:
        return [
            ToolResultView(b.get("tool_use_id", ""), content_text(b.get("content")), bool(b.get("is_error")))
            for m in self.messages(body)
            if m.get("role") == "user"
            for b in _blocks(m)
            if b.get("type") == "tool_result"
        ]

    def images(self, body: dict[str, Any]) -> list[ImageView]:
        found: list[ImageView] = []

        def collect(blocks: list[dict[str, Any]], call_id: str | None) -> None:
            for block in blocks:
                if block.get("type") == "image":
                    src = block.get("source") or {}
                    found.append(ImageView(src.get("media_type"), src.get("data"), src.get("url"), call_id))
                elif block.get("type") == "tool_result":
                    collect(list(iter_dicts(block.get("content"))), block.get("tool_use_id"))

        for message in self.messages(body):
            collect(_blocks(message), None)
        return found


WIRE = AnthropicWire()
