"""Pieces shared by the three wire formats: SSE framing, chunking, ids, and the normalised views."""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple

from .script import ErrorTurn, Turn


class ToolCallView(NamedTuple):
    """A tool call found in the request's history (what the client says the model asked for)."""

    call_id: str
    name: str
    arguments: Any  # parsed JSON when it parses, else the raw text


class ToolResultView(NamedTuple):
    """A tool result in the request; compares equal to a plain (call_id, content, is_error) tuple."""

    call_id: str
    content: str  # the text parts joined with "\n"; images are listed in RecordedRequest.images
    is_error: bool  # only Anthropic carries the flag; always False for the OpenAI flavours


class ImageView(NamedTuple):
    """An image anywhere in the request; `call_id` is set when it sits inside a tool result."""

    media_type: str | None
    data: str | None  # base64 payload
    url: str | None
    call_id: str | None


_counter = itertools.count(1)
_counter_lock = threading.Lock()


def new_id(prefix: str) -> str:
    """Ids unique per process and readable in failure output (e.g. msg_000003)."""
    with _counter_lock:
        n = next(_counter)
    return f"{prefix}{n:06d}"


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"{head}data: {body}\n\n".encode()


def split_text(text: str) -> list[str]:
    """Word-sized deltas, as a model streams them, so a client sees several deltas per sentence."""
    return re.findall(r"\s*\S+\s*|\s+", text) or [text]


def split_json(text: str, parts: int = 4) -> list[str]:
    """Split argument JSON at arbitrary character offsets (mid-token), the case parsers get wrong."""
    if len(text) <= 1:
        return [text]
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def usage_for(turn: Turn, body: dict[str, Any]) -> tuple[int, int]:
    """Deterministic token counts (about 4 characters a token) unless the turn fixes them."""
    if turn.usage is not None:
        return turn.usage
    out = len(turn.text or "") + sum(len(c.arguments_json()) + len(c.name) for c in turn.tool_calls)
    return max(1, len(json.dumps(body)) // 4), max(1, out // 4)


def content_text(content: Any) -> str:
    """Text of a content value that is a str or a list of typed parts, parts joined with newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            p["text"]
            for p in content
            if isinstance(p, dict)
            and p.get("type") in ("text", "input_text", "output_text")
            and isinstance(p.get("text"), str)
        ]
        return "\n".join(texts)
    return str(content)


def image_from_url(url: str, call_id: str | None) -> ImageView:
    match = re.match(r"data:([^;,]+)?(?:;base64)?,(.*)$", url, re.S)
    if match:
        return ImageView(match.group(1), match.group(2), None, call_id)
    return ImageView(None, None, url, call_id)


def parse_arguments(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


OPENAI_ERROR_DEFAULTS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def openai_error_fields(err: ErrorTurn) -> tuple[str, str | None]:
    default_type, default_code = OPENAI_ERROR_DEFAULTS.get(
        err.status, ("server_error", None) if err.status >= 500 else ("invalid_request_error", None)
    )
    return err.error_type or default_type, err.code if err.code is not None else default_code


def openai_error_body(err: ErrorTurn) -> dict[str, Any]:
    error_type, code = openai_error_fields(err)
    return {"error": {"message": err.message, "type": error_type, "param": None, "code": code}}


def iter_dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                yield item
