"""A session as a capability of a backend: what ``Executor.session`` asks of a backend, and the place
for the state the backend gives back.

Why: where a session's state can live is the backend's to say, as where a call runs is (fork: a process
of its own; sequential: the host; a backend without sessions refuses, in its own words from its
``Capabilities``). The session (``executor.session.Session``) keeps the rules every session shares
(order, admission, counting, tracing, lost or restored), and talks to its place through this protocol
only, so it never imports a backend's internals.

    Executor.session ──SessionSpec──> Backend.open_session ──> SessionPlace
    Session.run ── each call ──> SessionPlace.call ──(result, why lost or None)──> restore? / SessionLost
                                     └─ a host call of the running call ──> HostTools.answer ──> the pool
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from toolfork.executor.types import ToolCall, ToolResult

if TYPE_CHECKING:
    from toolfork.executor.wire.callitem import TraceParent
    from toolfork.governance.limits import Limits
    from toolfork.tools.tool import Tool


class SessionUnavailable(NotImplementedError):
    """This executor's backend cannot hold a session; the message says why (its ``Capabilities``)."""


class ProcessGone(RuntimeError):
    """The process that held the state ended while it sent it (``SessionPlace.snapshot``)."""


# ``checkpoint=AFTER_RESULT``: a checkpoint, whose copy from before a call is ended (and the next copy
# forked) after the call's result has gone out, before the next call is read, so a call's result does
# not wait for it; ``True``: that copy is ended before the result goes out. Modes other than fork take
# it as True.
AFTER_RESULT = "after_result"
CHECKPOINTS = (False, True, AFTER_RESULT)


@dataclass(frozen=True)
class SessionSpec:
    """What a backend needs to open a session: the state's factory and its arguments, whether to keep a
    checkpoint, how long the factory may take, the names of the tools (a place made ahead for other
    tools is not used), and the sandbox's Limits."""

    factory: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    checkpoint: bool | str  # one of CHECKPOINTS
    timeout: float | None
    tools: tuple[str, ...]
    # the sandbox the session's process enters when it opens, before the factory runs (None: none)
    limits: Limits | None = None
    host_tools: HostTools | None = None  # what its calls may ask the host to run (``call_host``); None: nothing


@dataclass(frozen=True)
class HostTools:
    """The tools a session's calls may ask the host to run (``Executor.session(host_tools=...)``), by
    name, and the host's way to run one call of them (its Executor's ``run``: the pool, with every rule
    of a call, its arguments checked against the tool's schema)."""

    names: frozenset[str]
    run: Callable[[ToolCall], ToolResult]

    def answer(self, call_id: str, name: Any, arguments: dict[str, Any],
               left: float | None) -> tuple[str, Any, str | None]:
        """The answer to a host call of the call ``call_id`` (``left``: seconds that call has left, None:
        no bound): ``("ok", value, None)``, the value the tool's data or else its text, or
        ``("error", None, why)``. A name the session was not opened with is refused, never run."""
        if name not in self.names:
            allowed = ", ".join(sorted(self.names)) or "(none)"
            return "error", None, (f"tool {name!r} is not one this session may ask the host to run; its "
                                   f"host_tools are: {allowed}")
        if left is not None and left <= 0:
            return "error", None, f"tool {name!r} was not run in the host: the call that asked has no time left"
        result = self.run(ToolCall(f"{call_id}/host/{name}", name, arguments, timeout=left))
        if result.status != "ok" or result.output is None:
            error = result.error
            why = f"{error.type}: {error.message}" if error is not None else result.status
            return "error", None, f"host tool {name!r} {result.status}: {why}"
        out = result.output
        return "ok", (out.data if out.data is not None else out.as_text()), None


class SessionPlace(Protocol):
    """Where one session's state lives, and its calls run."""

    @property
    def pid(self) -> int | None:
        """The process that holds the state now."""

    def call(self, call: ToolCall, tool: Tool, timeout: float | None, context: dict[str, Any],
             trace: TraceParent | None) -> tuple[ToolResult, str | None]:
        """Run one call on the state: its result, and why the state is gone (None while it is not)."""

    def restore(self) -> str | None:
        """After a fault: the checkpoint takes over (None), or why it cannot ("" without one)."""

    def interrupt(self) -> None:
        """From another thread, while a call runs: stop it (the state is given up)."""

    def snapshot(self) -> Any:
        """The state, rebuilt here; ``ProcessGone`` when sending it ended its process."""

    def close(self) -> None:
        """End the state and everything of it. Safe to call twice."""


__all__ = ["AFTER_RESULT", "CHECKPOINTS", "HostTools", "ProcessGone", "SessionPlace", "SessionSpec",
           "SessionUnavailable"]
