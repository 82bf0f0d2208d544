"""The state of one ``chat()`` run, and the two ways it pauses: approval and frontend results.

A paused run is plain data (the pending assistant turn, what each of its calls is waiting for, the
results already known, the max-runs counts, the step count) so ``to_json()`` can carry it to
another process, hours later; ``Agent.resume_from(json)`` rebuilds it there with no shared objects.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from toolfork.agent.messages import (
    AssistantMessage,
    Message,
    ToolCallRequest,
    ToolResultItem,
    message_from_dict,
)
from toolfork.agent.runs import RunCounter

STATE_VERSION = 1

# What a call of a batch waits for before it has a result.
RUN, APPROVAL, FRONTEND, DONE = "run", "approval", "frontend", "done"
# Results supplied from outside: a tool whose on_tool_called returned None (a person answers), and a
# manual tool (no callable by design). Both are answered with submit_tool_results, like frontend calls.
HITL, MANUAL = "hitl", "manual"
SUPPLIED: tuple[str, ...] = (FRONTEND, HITL, MANUAL)


@dataclass
class CallSlot:
    """One call of the pending batch and where it stands."""

    call: ToolCallRequest
    kind: str = DONE
    run_key: str | None = None
    reason: str | None = None  # why approval is needed
    item: ToolResultItem | None = None  # the model's view of the result, once known
    announced: bool = False  # a ToolCallFinished event was published for it
    # In-process only: the executor's result and the exception that fails the run (never paused on).
    exec_result: Any = None
    failure: BaseException | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"call": self.call.to_dict(), "kind": self.kind, "run_key": self.run_key,
                "reason": self.reason, "item": None if self.item is None else self.item.to_dict(),
                "announced": self.announced}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallSlot:
        item = data.get("item")
        return cls(call=ToolCallRequest.from_dict(data["call"]), kind=data["kind"],
                   run_key=data.get("run_key"), reason=data.get("reason"),
                   item=None if item is None else ToolResultItem.from_dict(item),
                   announced=bool(data.get("announced", False)))


@dataclass
class PendingBatch:
    """An assistant turn with tool calls whose results are not all known yet."""

    assistant: AssistantMessage
    slots: list[CallSlot] = field(default_factory=list)
    gated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"assistant": self.assistant.to_dict(), "slots": [s.to_dict() for s in self.slots],
                "gated": self.gated}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingBatch:
        return cls(assistant=AssistantMessage.from_dict(data["assistant"]),
                   slots=[CallSlot.from_dict(s) for s in data["slots"]], gated=data.get("gated", True))

    def waiting(self, *kinds: str) -> list[CallSlot]:
        return [s for s in self.slots if s.kind in kinds and s.item is None]


@dataclass
class RunState:
    """Everything one ``chat()`` run carries from model call to model call."""

    counter: RunCounter
    step: int = 0
    pending: PendingBatch | None = None
    # One id per chat() run, kept across pauses (tools read it as ToolRuntime.run_id).
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # What the tools of the last batch asked of the next model request (ToolRuntime.set_next_turn_params).
    next_turn: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "counts": dict(self.counter.counts),
                "default_limit": self.counter.default_limit, "run_id": self.run_id,
                "next_turn": dict(self.next_turn),
                "pending": None if self.pending is None else self.pending.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        pending = data.get("pending")
        return cls(counter=RunCounter(data.get("default_limit", 10), data.get("counts", {})),
                   step=int(data.get("step", 0)),
                   pending=None if pending is None else PendingBatch.from_dict(pending),
                   run_id=str(data.get("run_id") or uuid.uuid4().hex),
                   next_turn=dict(data.get("next_turn") or {}))


@dataclass(frozen=True)
class PendingCall:
    """A call the run waits on: approval (``reason`` says why) or a supplied result. ``kind`` says what
    it waits for: "approval", or, for a ``ToolResultsRequest``, "frontend" (a FrontendTool), "hitl" (the
    tool's ``on_tool_called`` returned None: a person answers) or "manual" (a manual tool)."""

    id: str
    name: str
    arguments: dict[str, Any]
    reason: str | None = None
    kind: str = ""


class RunPaused(Exception):
    """The run stopped to wait for something from outside. Holds the whole state as JSON-ready data."""

    kind = ""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload
        run = payload["run"]
        waiting = (APPROVAL,) if self.kind == "approval" else SUPPLIED
        self.calls: list[PendingCall] = [
            PendingCall(id=s["call"]["id"], name=s["call"]["name"], arguments=dict(s["call"]["arguments"]),
                        reason=s.get("reason"), kind=s["kind"])
            for s in run["pending"]["slots"] if s["kind"] in waiting and s.get("item") is None
        ]
        super().__init__(self._describe())

    def _describe(self) -> str:
        return f"run paused: {len(self.calls)} call(s) waiting"

    @property
    def call_ids(self) -> list[str]:
        return [c.id for c in self.calls]

    @property
    def thread_id(self) -> str | None:
        return self.payload.get("thread_id")

    def to_json(self) -> str:
        return json.dumps(self.payload, ensure_ascii=False)

    def to_dict(self) -> dict[str, Any]:
        return json.loads(self.to_json())

    @staticmethod
    def from_json(text: str | bytes | dict[str, Any]) -> RunPaused:
        """Rebuild the pause (ApprovalRequest or ToolResultsRequest) from ``to_json()`` output."""
        from toolfork.agent.errors import ResumeError

        try:
            payload = text if isinstance(text, dict) else json.loads(text)
        except ValueError as exc:
            raise ResumeError(f"paused state is not valid JSON: {exc}") from exc
        if not isinstance(payload, dict) or "run" not in payload or "kind" not in payload:
            raise ResumeError("paused state JSON lacks 'kind' and 'run': not produced by RunPaused.to_json()")
        pending = payload["run"].get("pending") if isinstance(payload["run"], dict) else None
        if not isinstance(pending, dict) or not isinstance(pending.get("slots"), list):
            raise ResumeError("paused state JSON has no pending turn ('run.pending.slots'): nothing to resume")
        if payload.get("version") != STATE_VERSION:
            raise ResumeError(f"paused state version {payload.get('version')!r} is not supported "
                              f"(this toolfork writes version {STATE_VERSION})")
        kinds: dict[str, type[RunPaused]] = {"approval": ApprovalRequest, "tool_results": ToolResultsRequest}
        if payload["kind"] not in kinds:
            raise ResumeError(f"unknown paused state kind {payload['kind']!r}")
        return kinds[payload["kind"]](payload)

    def history(self) -> list[Message] | None:
        """The conversation carried in the state (None when the history is persistent)."""
        raw = self.payload.get("history")
        return None if raw is None else [message_from_dict(m) for m in raw]


class ApprovalRequest(RunPaused):
    """Calls whose ``approval_policy`` asked for a human decision; answer with ``agent.resume()``."""

    kind = "approval"

    def _describe(self) -> str:
        listing = ", ".join(f"{c.name} ({c.id})" + (f": {c.reason}" if c.reason else "") for c in self.calls)
        return f"run paused for approval of {len(self.calls)} call(s): {listing}"


class ToolResultsRequest(RunPaused):
    """Calls whose results come from outside: frontend tools, tools whose ``on_tool_called`` asked for a
    person ("hitl") and manual tools; each ``PendingCall.kind`` says which. Answer with
    ``agent.submit_tool_results()``."""

    kind = "tool_results"

    def _describe(self) -> str:
        listing = ", ".join(f"{c.name} ({c.id}, {c.kind})" for c in self.calls)
        return f"run paused for the results of {len(self.calls)} call(s) answered outside the agent: {listing}"

    @property
    def kinds(self) -> list[str]:
        """The kinds waited on, each once, in call order ("frontend", "hitl", "manual")."""
        return list(dict.fromkeys(c.kind for c in self.calls))


def build_payload(kind: str, run: RunState, discovered: list[str], history: list[Message] | None,
                  thread_id: str | None) -> dict[str, Any]:
    return {
        "version": STATE_VERSION,
        "kind": kind,
        "thread_id": thread_id,
        "run": run.to_dict(),
        "discovered": list(discovered),
        "history": None if history is None else [m.to_dict() for m in history],
    }


__all__ = [
    "APPROVAL",
    "DONE",
    "FRONTEND",
    "HITL",
    "MANUAL",
    "RUN",
    "SUPPLIED",
    "ApprovalRequest",
    "CallSlot",
    "PendingBatch",
    "PendingCall",
    "RunPaused",
    "RunState",
    "ToolResultsRequest",
    "build_payload",
]
