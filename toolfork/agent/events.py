"""What the agent reports while it runs: model calls, text deltas, tool calls, the end of a run.

One ``EventBus`` per agent fans each event out to the user's callbacks, to ``logging`` and to the
OpenTelemetry listener; ``agent.stream()`` yields the same objects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolfork.agent.messages import AssistantMessage
    from toolfork.tools.output import ToolOutput

logger = logging.getLogger("toolfork.agent")


@dataclass
class ModelCallStarted:
    step: int
    provider: str
    model: str


@dataclass
class ModelCallFinished:
    step: int
    provider: str
    model: str
    message: AssistantMessage
    duration_s: float


@dataclass
class ModelCallFailed:
    step: int
    provider: str
    model: str
    error: BaseException
    duration_s: float


@dataclass
class TextDelta:
    """A piece of the model's answer as it streams in."""

    text: str


@dataclass
class ToolCallStarted:
    call_id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolCallProgress:
    call_id: str
    name: str
    value: Any


@dataclass
class ToolCallFinished:
    """One call has its result. ``status`` is the executor's status or the gate's (e.g.
    "unknown-tool"); ``output`` is what the model will see (after the error policy and the cap)."""

    call_id: str
    name: str
    status: str
    output: ToolOutput | None
    duration_s: float = 0.0
    error: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunFinished:
    """Last event of ``agent.stream()``: the final answer."""

    message: AssistantMessage


AgentEvent = (ModelCallStarted | ModelCallFinished | ModelCallFailed | TextDelta | ToolCallStarted
              | ToolCallProgress | ToolCallFinished | RunFinished)
Callback = Callable[[AgentEvent], Any]


class EventBus:
    """Delivers events to listeners. A raising callback is logged and skipped: an observer must
    not be able to break a run (or leave a tool call without its result in history)."""

    def __init__(self) -> None:
        self.listeners: list[Callback] = []

    def subscribe(self, callback: Callback) -> None:
        if not callable(callback):
            raise TypeError(f"an event callback must be callable, not {type(callback).__name__}")
        self.listeners.append(callback)

    def publish(self, event: AgentEvent) -> None:
        _log(event)
        for callback in list(self.listeners):
            try:
                callback(event)
            except Exception:
                logger.exception("agent event callback %r failed on %s", callback, type(event).__name__)


def _log(event: AgentEvent) -> None:
    if isinstance(event, ModelCallStarted):
        logger.debug("model call %d to %s/%s", event.step, event.provider, event.model)
    elif isinstance(event, ModelCallFinished):
        logger.info("model call %d to %s/%s: %d tool call(s), %.3fs", event.step, event.provider,
                    event.model, len(event.message.tool_calls), event.duration_s)
    elif isinstance(event, ModelCallFailed):
        logger.warning("model call %d to %s/%s failed: %s", event.step, event.provider, event.model,
                       event.error)
    elif isinstance(event, ToolCallStarted):
        logger.debug("tool call %s %s started", event.call_id, event.name)
    elif isinstance(event, ToolCallFinished):
        # Results the gate answered (unknown tool, bad arguments) are the model's mistakes: INFO.
        level = logging.WARNING if event.status in ("error", "timeout", "crashed") else logging.INFO
        logger.log(level, "tool call %s %s: %s in %.3fs%s", event.call_id, event.name, event.status,
                   event.duration_s, f" ({event.error})" if event.error else "")


__all__ = [
    "AgentEvent",
    "Callback",
    "EventBus",
    "ModelCallFailed",
    "ModelCallFinished",
    "ModelCallStarted",
    "RunFinished",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallStarted",
]
