"""Optional OpenTelemetry spans: one per ``chat()`` run, one per model call, one per tool call.

The calls the executor runs get their ``execute_tool`` spans from the executor (``toolfork.executor.
tracing``: with the tool's own spans under them, from the worker), under this run's span: ``hand_over``
puts the run's span in their ``meta`` as a W3C ``traceparent``. This listener makes tool spans only for
the calls that never reach the executor (unknown tools, refused approvals, max runs).

Only the ``opentelemetry-api`` package is used; without a configured SDK its tracer is a no-op, and
without the package this module does nothing. Spans are started from events with an explicit
parent context (never attached to the thread's current context) because the loop is a generator
that can be suspended between a span's start and its end.
"""

from __future__ import annotations

import time
from typing import Any

from toolfork.agent.events import (
    AgentEvent,
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from toolfork.executor import tracing

try:  # pragma: no cover - exercised when the package is missing
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover
    _trace = None  # type: ignore[assignment]


def available() -> bool:
    return _trace is not None


class Telemetry:
    """An event listener that turns agent events into spans."""

    def __init__(self, agent_name: str = "toolfork.agent") -> None:
        self.agent_name = agent_name
        self._run_span: Any = None
        self._model_span: Any = None
        self._tool_spans: dict[str, Any] = {}
        self._handed: set[str] = set()  # calls whose execute_tool span the executor makes

    def hand_over(self, calls: list[Any]) -> None:
        """The executor makes these calls' ``execute_tool`` spans (it traces them in the worker too):
        each call carries this run's span as its W3C ``traceparent`` in its ``meta``, so those spans are
        children of the run's; this listener makes none of its own for them."""
        if _trace is None or self._run_span is None or tracing.capture() is None:
            return  # nothing traces: the executor makes no span, and neither does this listener
        parent = tracing.traceparent(self._run_span)
        for call in calls:
            call.meta = {**(call.meta or {}), tracing.TRACEPARENT: parent}
            self._handed.add(call.id)

    def _tracer(self) -> Any:
        # Looked up per run so a tracer provider set after the agent was built is still used.
        assert _trace is not None
        return _trace.get_tracer("toolfork.agent")

    def _parent(self) -> Any:
        if _trace is None or self._run_span is None:
            return None
        return _trace.set_span_in_context(self._run_span)

    def start_run(self, provider: str, model: str) -> None:
        if _trace is None:
            return
        self._run_span = self._tracer().start_span(
            f"invoke_agent {self.agent_name}",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.system": provider,
                        "gen_ai.request.model": model},
        )

    def end_run(self, error: BaseException | None = None) -> None:
        span, self._run_span = self._run_span, None
        for leftover in list(self._tool_spans.values()):
            leftover.end()
        self._tool_spans.clear()
        self._handed.clear()
        if self._model_span is not None:
            self._model_span.end()
            self._model_span = None
        if span is None:
            return
        if error is not None:
            _mark_error(span, error)
        span.end()

    def __call__(self, event: AgentEvent) -> None:
        if _trace is None or self._run_span is None:
            return
        tracer = self._tracer()
        if isinstance(event, ModelCallStarted):
            self._model_span = tracer.start_span(
                f"chat {event.model}", context=self._parent(),
                attributes={"gen_ai.operation.name": "chat", "gen_ai.system": event.provider,
                            "gen_ai.request.model": event.model, "toolfork.step": event.step},
            )
        elif isinstance(event, (ModelCallFinished, ModelCallFailed)):
            span, self._model_span = self._model_span, None
            if span is None:
                return
            if isinstance(event, ModelCallFinished):
                usage = event.message.usage
                if "input_tokens" in usage:
                    span.set_attribute("gen_ai.usage.input_tokens", usage["input_tokens"])
                if "output_tokens" in usage:
                    span.set_attribute("gen_ai.usage.output_tokens", usage["output_tokens"])
                if event.message.stop_reason:
                    span.set_attribute("gen_ai.response.finish_reasons", [event.message.stop_reason])
                span.set_attribute("toolfork.tool_calls", len(event.message.tool_calls))
            else:
                _mark_error(span, event.error)
            span.end()
        elif isinstance(event, ToolCallStarted):
            if event.call_id not in self._handed:
                self._tool_spans[event.call_id] = self._start_tool_span(event.call_id, event.name, None)
        elif isinstance(event, ToolCallFinished):
            if event.call_id in self._handed:
                self._handed.discard(event.call_id)
                return
            span = self._tool_spans.pop(event.call_id, None)
            if span is None:
                # No live start event (the batch ran without streaming): back-date the start.
                start_ns = time.time_ns() - int(event.duration_s * 1e9)
                span = self._start_tool_span(event.call_id, event.name, start_ns)
            span.set_attribute("toolfork.status", event.status)
            span.set_attribute("toolfork.duration_s", float(event.duration_s))
            if event.status != "ok":
                span.set_status(_trace.Status(_trace.StatusCode.ERROR, event.error or event.status))
            span.end()

    def _start_tool_span(self, call_id: str, name: str, start_ns: int | None) -> Any:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                      "gen_ai.tool.call.id": call_id}
        return self._tracer().start_span(f"execute_tool {name}", context=self._parent(),
                                         attributes=attributes, start_time=start_ns)


def _mark_error(span: Any, error: BaseException) -> None:
    assert _trace is not None
    span.set_status(_trace.Status(_trace.StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    span.record_exception(error)


__all__ = ["Telemetry", "available"]
