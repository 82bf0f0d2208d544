"""A session as a capability of a backend: what ``Executor.session`` asks of a backend, and the place
for the state the backend gives back.

Why: where a session's state can live is the backend's to say, as where a call runs is (fork: a process
of its own; sequential: the host; a backend without sessions refuses, in its own words from its
``Capabilities``). The session (``executor.session.Session``) keeps the rules every session shares
(order, admission, counting, tracing, lost or restored), and talks to its place through this protocol
only, so it never imports a backend's internals.

    Executor.session ──SessionSpec──> Backend.open_session ──> SessionPlace
    Session.run ── each call ──> SessionPlace.call ──(result, why lost or None)──> restore? / SessionLost
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from toolfork.executor.types import ToolCall, ToolResult
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


__all__ = ["AFTER_RESULT", "CHECKPOINTS", "ProcessGone", "SessionPlace", "SessionSpec", "SessionUnavailable"]
