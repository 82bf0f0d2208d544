"""The agent loop as a generator of operations, so one loop serves sync, streaming and async.

The loop never calls the model or the executor itself: it yields ``CallModel`` / ``Execute`` /
``Emit`` and gets the answer sent back; a sync driver and an async driver perform them. The loop
restarts from a ``RunState`` alone, which is how a paused run resumes (in this process or another).

History invariant: an assistant turn with tool calls is appended together with the results of all
its calls, including when a call fails the run or the executor itself raises.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Protocol

from toolfork.agent.errors import MaxStepsExceeded, ToolRunFailed, ToolRunsExceeded
from toolfork.agent.events import (
    AgentEvent,
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
)
from toolfork.agent.gate import Gate, not_executed
from toolfork.agent.history import ChatHistory
from toolfork.agent.messages import AssistantMessage, ToolResultMessage
from toolfork.agent.providers.base import ModelRequest, Provider
from toolfork.agent.state import (
    APPROVAL,
    RUN,
    SUPPLIED,
    ApprovalRequest,
    CallSlot,
    PendingBatch,
    RunPaused,
    RunState,
    ToolResultsRequest,
    build_payload,
)
from toolfork.agent.toolset import Toolset
from toolfork.executor.types import STATUSES, ErrorInfo, ToolCall, ToolResult
from toolfork.tools.runtime import NEXT_TURN_KEY

logger = logging.getLogger("toolfork.agent")


@dataclass
class CallModel:
    request: ModelRequest


@dataclass
class Execute:
    calls: list[ToolCall]
    # What the tools' runtimes carry: run_id, agent_id, step_index (see ToolRuntime).
    meta: dict[str, Any] | None = None


@dataclass
class Emit:
    event: AgentEvent


Op = CallModel | Execute | Emit
LoopGen = Generator[Op, Any, AssistantMessage]


def slot_result(slot: CallSlot) -> ToolResult:
    """The executor-style result of a slot, synthesised for calls the executor never saw."""
    if slot.exec_result is not None:
        return slot.exec_result  # type: ignore[no-any-return]
    assert slot.item is not None
    status = slot.item.status
    mapped = status if status in STATUSES else (
        "cancelled" if status in ("rejected", "not-executed") else "error")
    error = None if mapped == "ok" else ErrorInfo(type=status, message=slot.item.output.as_text())
    return ToolResult(call_id=slot.call.id, name=slot.call.name, status=mapped,  # type: ignore[arg-type]
                      output=slot.item.output, error=error)


class LoopHost(Protocol):
    """What the loop needs of the agent that runs it, and all it may touch: the loop depends on this
    small surface, not on the Agent class (which imports the loop)."""

    @property
    def agent_id(self) -> str: ...

    @property
    def thread_id(self) -> str | None: ...

    @property
    def max_steps(self) -> int: ...

    @property
    def max_output_chars(self) -> int | None: ...

    @property
    def approval_policy(self) -> Any: ...

    @property
    def history(self) -> ChatHistory: ...

    def tool_error_handler(self, exc: BaseException, tool: Any) -> Any: ...

    def provider(self) -> Provider:
        """The resolved, checked provider."""
        ...

    def toolset(self) -> Toolset: ...

    def discovered(self) -> set[str]:
        """The live set of tools found by tool search this run (the gate adds to it)."""
        ...

    def model_request(self) -> ModelRequest:
        """The next request to the model: system prompt, history, offered tools."""
        ...

    def pause(self, paused: RunPaused) -> None:
        """Record the run's pause (what ``Agent.paused`` returns)."""
        ...


class Loop:
    """One agent's loop. Holds no run state of its own: everything is in the ``RunState``."""

    def __init__(self, agent: LoopHost) -> None:
        self.agent = agent

    def gate(self, state: RunState) -> Gate:
        agent = self.agent
        return Gate(agent.toolset(), state.counter, agent.discovered(), agent.tool_error_handler,
                    agent.max_output_chars, agent.approval_policy)

    def run(self, state: RunState) -> LoopGen:
        agent = self.agent
        provider = agent.provider()
        while True:
            if state.pending is not None:
                yield from self._finish_batch(state)
                continue
            if state.step >= agent.max_steps:
                raise MaxStepsExceeded(agent.max_steps)
            state.step += 1
            request = agent.model_request()
            if state.next_turn:
                apply_next_turn(request, state.next_turn)
                state.next_turn = {}
            provider.check_request(request)
            model = request.model or provider.model  # a tool may have asked for another model this turn
            yield Emit(ModelCallStarted(state.step, provider.name, model))
            started = time.monotonic()
            try:
                message = yield CallModel(request)
            except Exception as exc:
                yield Emit(ModelCallFailed(state.step, provider.name, model, exc,
                                           time.monotonic() - started))
                raise
            yield Emit(ModelCallFinished(state.step, provider.name, model, message,
                                         time.monotonic() - started))
            if message.id is None:
                message.id = uuid.uuid4().hex
            _unique_call_ids(message)
            if not message.tool_calls:
                agent.history.extend([message])
                if message.stop_reason == "pause_turn":
                    continue  # a server tool paused the turn: the API wants the same turn sent back
                return message
            state.pending = PendingBatch(assistant=message)

    def _finish_batch(self, state: RunState) -> Generator[Op, Any, None]:
        batch = state.pending
        assert batch is not None
        gate = self.gate(state)
        if not batch.gated:
            gate.classify(batch)
        yield from _announce(batch)
        while True:
            ready = batch.waiting(RUN)
            if ready:
                calls = [ToolCall(id=s.call.id, name=s.call.name, arguments=dict(s.call.arguments)) for s in ready]
                meta = {"run_id": state.run_id, "agent_id": self.agent.agent_id, "step_index": state.step - 1}
                try:
                    results = yield Execute(calls, meta)
                    _check_results(calls, results)
                except BaseException as exc:
                    # The executor itself failed (or the run was interrupted): answer every open call
                    # so the history keeps its pairs, then let the exception through.
                    for slot in batch.slots:
                        if slot.item is None:
                            not_executed(slot, f"the batch was interrupted ({type(exc).__name__}: {exc})")
                    self._commit(state)
                    raise
                for slot, result in zip(ready, results, strict=True):
                    gate.resolve(slot, result)
                    asked = (result.context_updates or {}).get(NEXT_TURN_KEY)
                    if asked:
                        state.next_turn.update(asked)
            failed = [s for s in batch.slots if s.failure is not None]
            if failed:
                first = failed[0]
                for slot in batch.slots:
                    if slot.item is None:
                        gate.counter.release(slot.run_key or "")
                        not_executed(slot, f"the run failed on call {first.call.id} ({first.call.name})")
                results = [slot_result(s) for s in batch.slots]
                failures = {s.call.id: s.failure for s in failed if s.failure is not None}
                yield from _announce(batch)
                self._commit(state)
                raise _run_failure(first, results, failures)
            if batch.waiting(APPROVAL):
                raise self._pause(ApprovalRequest, state)
            if batch.waiting(*SUPPLIED):
                raise self._pause(ToolResultsRequest, state)
            yield from _announce(batch)
            self._commit(state)
            return

    def _commit(self, state: RunState) -> None:
        batch = state.pending
        assert batch is not None
        items = [s.item for s in batch.slots if s.item is not None]
        self.agent.history.extend([batch.assistant, ToolResultMessage(items)])
        state.pending = None

    def _pause(self, cls: type[RunPaused], state: RunState) -> RunPaused:
        agent = self.agent
        history = None if agent.history.persistent else agent.history.messages()
        payload = build_payload(cls.kind, state, sorted(agent.discovered()), history, agent.thread_id)
        paused = cls(payload)
        agent.pause(paused)
        return paused


def apply_next_turn(request: ModelRequest, params: dict[str, Any]) -> None:
    """What the last batch's tools asked of this request (``ToolRuntime.set_next_turn_params``)."""
    if "instructions" in params and params["instructions"] is not None:
        request.system = str(params["instructions"])
    if params.get("model"):
        request.model = str(params["model"])
    if params.get("temperature") is not None:
        request.temperature = float(params["temperature"])
    choice = params.get("tool_choice")
    if choice is not None:
        offered = {str(getattr(t, "name", "")) for t in request.tools}
        if choice in ("auto", "required", "none") or choice in offered:
            request.tool_choice = str(choice)
        else:  # the API would refuse the request: the run goes on without the forced choice
            logger.warning("a tool asked for tool_choice=%r, which is not a tool offered this turn (%s); ignored",
                           choice, ", ".join(sorted(offered)) or "none")


def _unique_call_ids(message: AssistantMessage) -> None:
    """Some OpenAI-compatible servers send calls without ids, or the same id twice in one turn;
    results are matched by id, so each call gets a unique one (the history keeps the new ids, and
    they are what goes back to the server)."""
    seen: set[str] = set()
    for index, call in enumerate(message.tool_calls):
        if not call.id or call.id in seen:
            call.id = f"call_{index}_{uuid.uuid4().hex[:12]}"
        seen.add(call.id)


def _announce(batch: PendingBatch) -> Generator[Op, Any, None]:
    """A ToolCallFinished for every call that got its result outside the executor (the gate, a
    rejection, a frontend answer, a failed run), once."""
    for slot in batch.slots:
        if slot.item is not None and not slot.announced:
            slot.announced = True
            yield Emit(_finished_event(slot))


def _finished_event(slot: CallSlot) -> ToolCallFinished:
    assert slot.item is not None
    error = slot.item.output.as_text() if slot.item.status != "ok" else None
    return ToolCallFinished(slot.call.id, slot.call.name, slot.item.status, slot.item.output, 0.0, error,
                            dict(slot.call.arguments))


def _check_results(calls: list[ToolCall], results: Any) -> None:
    ids = [getattr(r, "call_id", None) for r in results]
    if ids != [c.id for c in calls]:
        raise RuntimeError(f"the executor returned results for {ids}, expected {[c.id for c in calls]}")


def _run_failure(first: CallSlot, results: list[ToolResult], failures: dict[str, BaseException]
                 ) -> ToolRunFailed:
    exc = first.failure
    if isinstance(exc, ToolRunsExceeded):
        exc.results = results
        exc.failures = failures
        return exc
    failure = ToolRunFailed(
        f"tool call {first.call.id} ({first.call.name}) failed and the run fails (on_error='fail-run', "
        f"no error handler result): {exc}", results, failures)
    failure.__cause__ = exc
    return failure


__all__ = ["CallModel", "Emit", "Execute", "Loop", "LoopGen", "LoopHost", "Op", "apply_next_turn", "slot_result"]
