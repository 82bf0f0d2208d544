"""OpenAI Responses API (POST /v1/responses): response objects, semantic SSE events, errors, checks.

Stream: response.created, response.in_progress, then per output item output_item.added, its
content events (content_part.added / output_text.delta... / output_text.done / content_part.done for
a message; function_call_arguments.delta... / .done for a function call) and output_item.done, then
response.completed (response.incomplete when truncated). Every event has a `sequence_number`; there
is no `[DONE]` sentinel in this API. The server is stateless: `previous_response_id` is recorded but
not resolved, so call/output pairing is only checked when the request carries the whole history.
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
    openai_error_fields,
    parse_arguments,
    split_json,
    split_text,
    sse,
    usage_for,
)
from .script import ErrorTurn, Turn
from .wire import WireFormat, check_tool_names

_OUTPUT_PART_TYPES = ("input_text", "input_image", "input_file")


def _items(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    return list(iter_dicts(raw))


class _Seq:
    def __init__(self) -> None:
        self.n = -1

    def event(self, event_type: str, **fields: Any) -> bytes:
        self.n += 1
        return sse({"type": event_type, "sequence_number": self.n, **fields}, event_type)


class OpenAIResponsesWire(WireFormat):
    api = "openai-responses"
    path = "/v1/responses"
    request_id_header = "x-request-id"

    def validate(self, body: dict[str, Any]) -> str | None:
        if not isinstance(body.get("model"), str):
            return "Missing required parameter: 'model'."
        if "input" in body and not isinstance(body["input"], (str, list)):
            return "Invalid type for 'input': expected a string or an array of input items."
        tools = list(iter_dicts(body.get("tools")))
        problem = check_tool_names([t.get("name") for t in tools if t.get("type") == "function"], "tools")
        if problem:
            return problem
        items = _items(body)
        for i, item in enumerate(items):
            if item.get("type") == "function_call_output":
                for j, part in enumerate(iter_dicts(item.get("output"))):
                    if part.get("type") not in _OUTPUT_PART_TYPES:
                        return (
                            f"Invalid value: '{part.get('type')}'. Supported values are: "
                            f"{', '.join(repr(t) for t in _OUTPUT_PART_TYPES)}. (input[{i}].output[{j}].type)"
                        )
        if body.get("previous_response_id"):
            return None
        calls: set[Any] = set()
        outputs: set[Any] = set()
        for item in items:
            if item.get("type") == "function_call":
                calls.add(item.get("call_id"))
            elif item.get("type") == "function_call_output":
                if item.get("call_id") not in calls:
                    return f"No tool call found for function call output with call_id {item.get('call_id')}."
                outputs.add(item.get("call_id"))
        for item in items:
            if item.get("type") == "function_call" and item.get("call_id") not in outputs:
                return f"No tool output found for function call {item.get('call_id')}."
        return None

    @staticmethod
    def _message_item(item_id: str, text: str, done: bool) -> dict[str, Any]:
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        return {
            "id": item_id,
            "type": "message",
            "status": "completed" if done else "in_progress",
            "role": "assistant",
            "content": [part] if done else [],
        }

    @staticmethod
    def _call_item(item_id: str, call_id: str, name: str, arguments: str, done: bool) -> dict[str, Any]:
        return {
            "id": item_id,
            "type": "function_call",
            "status": "completed" if done else "in_progress",
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
        }

    def _response(
        self, turn: Turn, body: dict[str, Any], resp_id: str, output: list[dict[str, Any]], final: bool
    ) -> dict[str, Any]:
        inp, out = usage_for(turn, body)
        status = ("incomplete" if turn.truncated else "completed") if final else "in_progress"
        return {
            "id": resp_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if final and turn.truncated else None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": body.get("model"),
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "temperature": body.get("temperature", 1.0),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools", []),
            "top_p": body.get("top_p", 1.0),
            "truncation": "disabled",
            "text": {"format": {"type": "text"}},
            "metadata": body.get("metadata") or {},
            "usage": {
                "input_tokens": inp,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": inp + out,
            }
            if final
            else None,
        }

    def _output(self, turn: Turn) -> list[tuple[str, dict[str, Any]]]:
        """(item id, finished item) pairs: the text message first, then the function calls in order."""
        items: list[tuple[str, dict[str, Any]]] = []
        if turn.text:
            item_id = new_id("msg_")
            items.append((item_id, self._message_item(item_id, turn.text, True)))
        for call in turn.tool_calls:
            item_id = new_id("fc_")
            items.append((item_id, self._call_item(item_id, call.id, call.name, call.arguments_json(), True)))
        return items

    def respond(self, turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
        return self._response(turn, body, new_id("resp_"), [item for _, item in self._output(turn)], True)

    def stream(self, turn: Turn, body: dict[str, Any]) -> Iterator[bytes]:
        seq = _Seq()
        resp_id = new_id("resp_")
        opening = self._response(turn, body, resp_id, [], False)
        yield seq.event("response.created", response=opening)
        yield seq.event("response.in_progress", response=opening)
        output = self._output(turn)
        for index, (item_id, item) in enumerate(output):
            where = {"item_id": item_id, "output_index": index}
            if item["type"] == "message":
                text = item["content"][0]["text"]
                empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                yield seq.event(
                    "response.output_item.added",
                    output_index=index,
                    item=self._message_item(item_id, "", False),
                )
                yield seq.event("response.content_part.added", **where, content_index=0, part=empty_part)
                for piece in split_text(text):
                    yield seq.event(
                        "response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[]
                    )
                yield seq.event("response.output_text.done", **where, content_index=0, text=text, logprobs=[])
                yield seq.event(
                    "response.content_part.done", **where, content_index=0, part=item["content"][0]
                )
            else:
                yield seq.event(
                    "response.output_item.added",
                    output_index=index,
                    item=self._call_item(item_id, item["call_id"], item["name"], "", False),
                )
                for piece in split_json(item["arguments"]):
                    yield seq.event("response.function_call_arguments.delta", **where, delta=piece)
                yield seq.event(
                    "response.function_call_arguments.done",
                    **where,
                    name=item["name"],
                    arguments=item["arguments"],
                )
            yield seq.event("response.output_item.done", output_index=index, item=item)
        final = self._response(turn, body, resp_id, [item for _, item in output], True)
        yield seq.event("response.incomplete" if turn.truncated else "response.completed", response=final)

    def error_body(self, err: ErrorTurn) -> dict[str, Any]:
        return openai_error_body(err)

    def stream_error(self, err: ErrorTurn, body: dict[str, Any]) -> Iterator[bytes]:
        seq = _Seq()
        opening = self._response(Turn(), body, new_id("resp_"), [], False)
        yield seq.event("response.created", response=opening)
        yield seq.event("response.in_progress", response=opening)
        _, code = openai_error_fields(err)
        yield seq.event("error", code=code, message=err.message, param=None)

    def messages(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        return _items(body)

    def system(self, body: dict[str, Any]) -> str:
        parts = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
        parts += [
            content_text(m.get("content")) for m in _items(body) if m.get("role") in ("system", "developer")
        ]
        return "\n".join(parts)

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return [str(t.get("name") or t.get("type")) for t in iter_dicts(body.get("tools"))]

    def tool_calls(self, body: dict[str, Any]) -> list[ToolCallView]:
        return [
            ToolCallView(i.get("call_id", ""), i.get("name", ""), parse_arguments(i.get("arguments")))
            for i in _items(body)
            if i.get("type") == "function_call"
        ]

    def tool_results(self, body: dict[str, Any]) -> list[ToolResultView]:
        return [
            ToolResultView(i.get("call_id", ""), content_text(i.get("output")), False)
            for i in _items(body)
            if i.get("type") == "function_call_output"
        ]

    def images(self, body: dict[str, Any]) -> list[ImageView]:
        found: list[ImageView] = []
        for item in _items(body):
            is_output = item.get("type") == "function_call_output"
            call_id = item.get("call_id") if is_output else None
            for part in iter_dicts(item.get("output") if is_output else item.get("content")):
                if part.get("type") == "input_image" and isinstance(part.get("image_url"), str):
                    found.append(image_from_url(part["image_url"], call_id))
        return found


WIRE = OpenAIResponsesWire()
