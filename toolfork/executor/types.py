"""The values that cross the executor's front door: calls in, results and events out.

They are plain slotted dataclasses rather than pydantic models because every call of a batch makes
one of each, and they cross a pipe: construction and pickling sit on the executor's hot path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from toolfork.tools.output import ToolOutput

Status = Literal["ok", "error", "timeout", "crashed", "cancelled"]
STATUSES: tuple[str, ...] = ("ok", "error", "timeout", "crashed", "cancelled")


@dataclass(slots=True)
class ToolCall:
    """One call the model asked for. ``timeout`` (seconds) overrides the tool's and the executor's.
    ``meta``: string keys and values the caller attaches to the call (a tenant, a request id, a
    ``traceparent``); the tool reads them as ``runtime.meta``, in every mode."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    meta: dict[str, str] | None = None

    def __post_init__(self) -> None:
        if self.meta is not None:
            self.meta = checked_meta(self.meta, self.id)


def checked_meta(meta: Any, call_id: Any = None) -> dict[str, str] | None:
    """``meta`` as a dict of its own (None when empty), or a TypeError naming what is not a string."""
    where = f"call {call_id!r}: " if call_id is not None else ""
    if not isinstance(meta, Mapping):
        raise TypeError(f"{where}meta must be a mapping of strings to strings, got {type(meta).__name__}")
    for key, value in meta.items():
        if type(key) is not str:
            raise TypeError(f"{where}meta key {key!r} must be a str, got {type(key).__name__}")
        if type(value) is not str:
            raise TypeError(f"{where}meta[{key!r}] must be a str, got {type(value).__name__}")
    return dict(meta) or None


@dataclass(slots=True)
class ErrorInfo:
    """Why a call did not succeed: the exception's type name, its message and the traceback text."""

    type: str
    message: str
    traceback: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message, "traceback": self.traceback}

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


@dataclass(slots=True)
class ToolResult:
    """The outcome of one call. ``output`` is set when ok (and may be set on error, e.g. an error
    ToolOutput the tool returned); ``error`` is None exactly when ``status == "ok"``."""

    call_id: str
    name: str
    status: Status
    output: ToolOutput | None = None
    error: ErrorInfo | None = None
    duration_s: float = 0.0
    worker_pid: int | None = None
    # What the call asked to merge into the host's context (ToolRuntime.set_context), if anything.
    context_updates: dict[str, Any] | None = None
    # The result already encoded where the call ran (``Executor(encode_results=...)``); then ``output``
    # is None and these bytes stand for it, so the host neither rebuilds nor re-encodes the output.
    encoded: bytes | None = None
    started_at: float | None = None  # when the call started running (Unix time in seconds), set by the host

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (the line format of ``toolfork run``)."""
        return {
            "id": self.call_id,
            "name": self.name,
            "status": self.status,
            "output": None if self.output is None else self.output.to_dict(),
            "error": None if self.error is None else self.error.to_dict(),
            "duration_s": round(self.duration_s, 6),
        }


@dataclass(slots=True)
class CallStarted:
    call_id: str
    name: str


@dataclass(slots=True)
class CallProgress:
    call_id: str
    value: Any


@dataclass(slots=True)
class CallFinished:
    call_id: str
    result: ToolResult


Event = CallStarted | CallProgress | CallFinished

__all__ = [
    "STATUSES",
    "CallFinished",
    "CallProgress",
    "CallStarted",
    "ErrorInfo",
    "Event",
    "Status",
    "ToolCall",
    "ToolResult",
    "checked_meta",
]
