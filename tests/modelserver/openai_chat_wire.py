"""OpenAI Chat Completions (POST /v1/chat/completions): completions, chunk stream, errors, checks.

Stream shape as the API sends it: a first chunk with the role, content deltas, per tool call a chunk
with `index`, `id`, `type` and `function.name` followed by chunks carrying only partial
`function.arguments`, a final chunk with `finish_reason`, an optional usage chunk (when
`stream_options.include_usage`), then `data: [DONE]`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from .common import (
    ImageView,
    ToolCallView,
    ToolResultView,
    content_text,
    image_from_url,
    iter_dicts,
    new_id,
    openai_error_body,
    parse_arguments,
    split_json,
    split_text,
    sse,
    usage_for,
)
from .script import ErrorTurn, Turn
from .wire import WireFormat, check_tool_names

_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _finish_reason(turn: Turn) -> str:
    if turn.truncated:
        return "length"
    return "tool_calls" if turn.tool_calls else "stop"


def _usage(turn: Turn, body: dict[str, Any]) -> dict[str, int]:
    inp, out = usage_for(turn, body)
    return {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}


class OpenAIChatWire(WireFormat):
    api = "openai-chat"
    path = "/v1/chat/completions"
    request_id_header = "x-request-id"

    def validate(self, body: dict[str, Any]) -> str | None:
        if not isinstance(body.get("model"), str):
            return "you must provide a model parameter"
        if not isinstance(body.get("messages"), list):
            return "Missing required parameter: 'messages'."
        tools = list(iter_dicts(body.get("tools")))
        functions = [t for t in tools if t.get("type") == "function"]
        for i, tool in enumerate(functions):
            if not isinstance(tool.get("function"), dict):
                return f"Missing required parameter: 'tools[{i}].function'."
        problem = check_tool_names([t["function"].get("name") for t in functions], "tools")
        if problem:
            return problem
        return self._check_pairs(body["messages"])

    @staticmethod
    def _check_pairs(messages: list[Any]) -> str | None:
        pending: list[str] = []  # ids of the last assistant tool_calls not yet answered
        answerable: set[str] = set()

        def unanswered() -> str:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages responding to "
                f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                f"{', '.join(pending)}"
            )

        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in _ROLES:
                return f"Invalid value for 'messages[{i}].role'. Supported values are: {', '.join(_ROLES)}."
            role = message["role"]
            if role == "tool":
                call_id = message.get("tool_call_id")
                if call_id not in answerable:
                    return (
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                        f"message with 'tool_calls'. (messages[{i}].tool_call_id={call_id!r})"
                    )
                for j, part in enumerate(iter_dicts(message.get("content"))):
                    if part.get("type") != "text":
                        return (
                            f"Invalid value: '{part.get('type')}'. Supported values are: 'text'. "
                            f"(messages[{i}].content[{j}].type: tool messages accept only text parts)"
                        )
                if call_id in pending:
                    pending.remove(call_id)
                continue
            if pending:
                return unanswered()
            answerable = set()
            if role == "assistant":
                ids = [str(c.get("id")) for c in iter_dicts(message.get("tool_calls"))]
                pending, answerable = list(ids), set(ids)
        if pending:
            return unanswered()
        return None

    def _base(self, body: dict[str, Any], completion_id: str, obj: str) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": obj,
            "created": int(time.time()),
            "model": body.get("model"),
            "system_fingerprint": None,
        }

    def respond(self, turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None, "refusal": None}
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments_json()},
                }
                for c in turn.tool_calls
            ]
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(turn)}
        return {
            **self._base(body, new_id("chatcmpl-"), "chat.completion"),
            "choices": [choice],
            "usage": _usage(turn, body),
        }

    def _chunks(self, turn: Turn, body: dict[str, Any], completion_id: str) -> Iterator[dict[str, Any]]:
        base = self._base(body, completion_id, "chat.completion.chunk")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                **base,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in split_text(turn.text or "") if turn.text else []:
            yield chunk({"content": piece})
        for index, call in enumerate(turn.tool_calls):
            opening = {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            yield chunk({"tool_calls": [opening]})
            for piece in split_json(call.arguments_json()):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, _finish_reason(turn))

    def stream(self, turn: Turn, body: dict[str, Any]) -> Iterator[bytes]:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        completion_id = new_id("chatcmpl-")
        for data in self._chunks(turn, body, completion_id):
            if include_usage:
                data["usage"] = None
            yield sse(data)
        if include_usage:
            usage_chunk = {**self._base(body, completion_id, "chat.completion.chunk"), "choices": []}
            yield sse({**usage_chunk, "usage": _usage(turn, body)})
        yield sse("[DONE]")

    def error_body(self, err: ErrorTurn) -> dict[str, Any]:
        return openai_error_body(err)

    def stream_error(self, err: ErrorTurn, body: dict[str, Any]) -> Iterator[bytes]:
        yield sse(next(self._chunks(Turn(), body, new_id("chatcmpl-"))))
        yield sse(self.error_body(err))

    def messages(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        return list(iter_dicts(body.get("messages")))

    def system(self, body: dict[str, Any]) -> str:
        return "\n".join(
            content_text(m.get("content"))
            for m in self.messages(body)
            if m.get("role") in ("system", "developer")
        )

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return [
            str((t.get("function") or {}).get("name") if t.get("type") == "function" else t.get("type"))
            for t in iter_dicts(body.get("tools"))
        ]

    def tool_calls(self, body: dict[str, Any]) -> list[ToolCallView]:
        return [
            ToolCallView(
                c.get("id", ""),
                (c.get("function") or {}).get("name", ""),
                parse_arguments((c.get("function") or {}).get("arguments")),
            )
            for m in self.messages(body)
            if m.get("role") == "assistant"
            for c in iter_dicts(m.get("tool_calls"))
        ]

    def tool_results(self, body: dict[str, Any]) -> list[ToolResultView]:
        return [
            ToolResultView(m.get("tool_call_id", ""), content_text(m.get("content")), False)
            for m in self.messages(body)
            if m.get("role") == "tool"
        ]

    def images(self, body: dict[str, Any]) -> list[ImageView]:
        found: list[ImageView] = []
        for message in self.messages(body):
            call_id = message.get("tool_call_id") if message.get("role") == "tool" else None
            for part in iter_dicts(message.get("content")):
                if part.get("type") == "image_url":
                    found.append(image_from_url(str((part.get("image_url") or {}).get("url", "")), call_id))
        return found


WIRE = OpenAIChatWire()
