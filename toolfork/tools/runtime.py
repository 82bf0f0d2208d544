"""What a running tool may ask of the executor, without importing it.

A tool that declares a parameter annotated ``ToolRuntime`` receives one at call time. The executor
(in the worker, or in the host for inline and sequential calls) supplies a concrete subclass; the tool
layer only knows this interface, so ``toolfork.tools`` never imports ``toolfork.executor``.

What the agent adds (``run_id``, ``agent_id``, ``step_index``) rides in the batch's context under a
reserved key, which every backend already sends to where the call runs (a forked worker, a Ray task);
the runtime takes it out of ``context`` here, so a tool never sees it there. ``tool_call`` is set by
the executor's call wrapper (``toolfork.executor.invoke``) from the call it runs. What a tool asks of
the next model request (``set_next_turn_params``) goes back the same way, in ``context_updates``.

``idempotency_key`` is made the same way, where the call runs: the batch's context carries one job key
(``JOB_CONTEXT_KEY``: a journal's, so it is the same on every resume of that job, else the Executor's
own), and the key is a hash of it and the call id. No frame carries a field per call for it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

from toolfork.tools.values import as_value

# Reserved context keys: the agent's identity for the batch (host -> call), and what a call asks of the
# next model request (call -> host). Neither is ever visible in ``ToolRuntime.context``.
AGENT_CONTEXT_KEY = "__toolfork_agent__"
NEXT_TURN_KEY = "__toolfork_next_turn__"
JOB_CONTEXT_KEY = "__toolfork_job__"  # the job key behind ``ToolRuntime.idempotency_key`` (host -> call)
NEXT_TURN_PARAMS: tuple[str, ...] = ("model", "temperature", "tool_choice", "instructions")
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")  # MCP's, in order

# How a call reaches the client that asked for it (set by a server that has one, e.g. ``toolfork mcp
# serve``, before its pool forks, so its workers have it too): (call_id, what, params, seconds left)
# -> the client's answer as plain data. None: no client behind the calls of this process.
ClientLink = Callable[[str, str, dict[str, Any], "float | None"], Any]
_client_link: list[ClientLink | None] = [None]
_NO_META: Mapping[str, str] = MappingProxyType({})

# The state of the session a call runs in (``Executor.session``): set once in a session's own process,
# around each call in the host for a sequential session; None outside sessions.
SESSION_STATE: ContextVar[Any] = ContextVar("toolfork_session_state", default=None)


class ClientUnavailable(RuntimeError):
    """The call has no client to ask (not served over MCP), or the client cannot do what was asked."""


class HostToolError(RuntimeError):
    """``ToolRuntime.call_host`` did not get a value: the host refused the call (a tool the session may
    not call, no host tools at all) or the host tool failed; the message says which, and why."""


def set_client_link(link: ClientLink | None) -> None:
    """Install (or remove, with None) the way calls of this process reach their client."""
    _client_link[0] = link


class ToolRuntime:
    """The per-call handle a tool gets: identity, deadline, progress and context updates.

    ``deadline`` is a ``time.monotonic()`` value (the clock is system-wide on Linux, so it means the
    same in the worker and the host) or None when the call is unbounded.
    """

    __slots__ = ("_job_key", "agent_id", "call_id", "context", "context_updates", "deadline", "meta", "run_id",
                 "state", "step_index", "tool_call", "tool_name")

    def __init__(
        self,
        call_id: str,
        tool_name: str = "",
        deadline: float | None = None,
        context: dict[str, Any] | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> None:
        self.call_id = call_id
        # The call's ``ToolCall.meta`` (string keys and values), read-only; empty when it has none.
        self.meta: Mapping[str, str] = MappingProxyType(dict(meta)) if meta else _NO_META
        self.tool_name = tool_name
        self.deadline = deadline
        # A snapshot of the host's context when the batch was dispatched (read-only by convention).
        self.context: dict[str, Any] = dict(context) if context else {}
        # What this call asked the host to merge, returned with its result (None: nothing asked).
        self.context_updates: dict[str, Any] | None = None
        # Set when an agent runs the call (None under a bare Executor): the chat() run, the agent, and
        # the 0-based index of the model step whose answer asked for this call.
        agent = self.context.pop(AGENT_CONTEXT_KEY, None)
        self.context.pop(NEXT_TURN_KEY, None)
        self._job_key: str | None = self.context.pop(JOB_CONTEXT_KEY, None)
        identity = agent if isinstance(agent, dict) else {}
        self.run_id: str | None = identity.get("run_id")
        self.agent_id: str | None = identity.get("agent_id")
        self.step_index: int | None = identity.get("step_index")
        # The ToolCall being run (id, name, raw arguments); set by the executor before the tool runs.
        self.tool_call: Any = None
        # The object the session's factory built, when the call runs in a session (else None).
        self.state: Any = SESSION_STATE.get()

    @property
    def idempotency_key(self) -> str | None:
        """A key for this call's side effect: the same every time this call of this job runs (a retry,
        a ``--resume`` that runs it again), different for another call or another job. Pass it to an
        API that takes one, or record it with the effect and skip the effect when it is there already.
        None when the tool is called directly, outside an executor."""
        if self._job_key is None:
            return None
        return hashlib.sha256(f"{self._job_key}\0{self.call_id}".encode("utf-8", "surrogatepass")).hexdigest()[:32]

    def remaining(self) -> float | None:
        """Seconds left before the executor kills this call, or None when unbounded."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def emit_progress(self, value: Any) -> None:
        """Report progress; the host sees it live as a ``CallProgress`` event. The value becomes data by
        the values rule (``toolfork.tools.values``), in every mode."""
        self.deliver_progress(as_value(value, "a progress value is"))

    def deliver_progress(self, value: Any) -> None:
        """Where a progress value, already data, goes: each place a call runs has its own (a tool calls
        ``emit_progress``); dropped by default."""

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a log message to the client of this call (MCP ``notifications/message``), if it wants
        that level; a no-op where there is no client. Delivered before the call's result."""
        if level not in LOG_LEVELS:
            raise ValueError(f"log: level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
        link = _client_link[0]
        if link is not None:
            link(self.call_id, "log", {"level": level, "data": data, "logger": logger}, self.remaining())

    def elicit(self, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        """Ask the client's user for input shaped by ``schema`` (a flat JSON Schema object); returns
        ``{"action": "accept" | "decline" | "cancel", "content": {...} | None}``. Over MCP a request to
        the client mid-call, or on a 2026-07-28 session an input-required round (the tool waits, the
        call is resumed by the client's retry). Waits at most until the call's deadline
        (``TimeoutError``); ``ClientUnavailable`` where no client can be asked."""
        return dict(self._ask("elicit", {"message": message, "schema": schema}))

    def sample(self, messages: str | list[dict[str, Any]], max_tokens: int = 256,
               **options: Any) -> dict[str, Any]:
        """Ask the client's model (MCP sampling). ``messages``: a prompt, or MCP sampling messages
        (``{"role": "user", "content": {"type": "text", "text": ...}}``); ``options``: the rest of
        ``sampling/createMessage`` (``system_prompt``, ``temperature``, ...). Returns the client's
        answer (``{"role", "content", "model", "stop_reason"}``); bounded like ``elicit``."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        return dict(self._ask("sample", {"messages": messages, "max_tokens": max_tokens, **options}))

    def call_host(self, name: str, /, **arguments: Any) -> Any:
        """Run the tool ``name`` in the host's pool and return its value (its data, else its text): for a
        call of a fork session opened with ``host_tools=[name, ...]`` (a sandboxed one too), to reach what
        the session's process cannot (its network, credentials, files). Waits at most what is left of
        this call's timeout; ``HostToolError`` when the host refuses or the tool fails. See
        ``docs/sessions.md``."""
        raise HostToolError(f"call_host({name!r}): this call does not run in a session opened with host_tools")

    def _ask(self, what: str, params: dict[str, Any]) -> Any:
        link = _client_link[0]
        if link is None:
            raise ClientUnavailable(f"{what}: this call has no MCP client to ask (it is not served over MCP)")
        return link(self.call_id, what, params, self.remaining())

    def set_context(self, updates: dict[str, Any]) -> None:
        """Ask the host to merge ``updates`` into its context (in call order, last call wins). The values
        become data by the values rule (``toolfork.tools.values``), in every mode."""
        if not isinstance(updates, dict):
            raise TypeError(f"set_context: updates must be a dict, got {type(updates).__name__}")
        updates = as_value(updates, "a context update is")
        if self.context_updates is None:
            self.context_updates = {}
        self.context_updates.update(updates)
        self.context.update(updates)

    def set_next_turn_params(self, **params: Any) -> None:
        """Change the next model request of the agent run: ``model``, ``temperature``, ``tool_choice``
        (``"auto"``, ``"required"``, ``"none"`` or a tool name) and ``instructions`` (replaces the system
        prompt for that request). Applies to the one request after this batch; calls of one batch merge in
        call order (last wins). Ignored outside an agent."""
        unknown = sorted(set(params) - set(NEXT_TURN_PARAMS))
        if unknown:
            raise ValueError(f"set_next_turn_params: unknown parameter(s) {', '.join(unknown)} "
                             f"(valid: {', '.join(NEXT_TURN_PARAMS)})")
        for key, value in params.items():
            if key == "temperature":
                ok = value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
            else:
                ok = value is None or (isinstance(value, str) and bool(value))
            if not ok:
                want = "a number" if key == "temperature" else "a non-empty string"
                raise ValueError(f"set_next_turn_params: {key} must be {want} or None, got {value!r}")
        if self.context_updates is None:
            self.context_updates = {}
        merged = dict(self.context_updates.get(NEXT_TURN_KEY) or {})
        merged.update(params)
        self.context_updates[NEXT_TURN_KEY] = merged


__all__ = ["AGENT_CONTEXT_KEY", "JOB_CONTEXT_KEY", "LOG_LEVELS", "NEXT_TURN_KEY", "NEXT_TURN_PARAMS", "ClientLink",
           "ClientUnavailable", "HostToolError", "ToolRuntime", "set_client_link"]
