"""What a backend can do, declared once by the backend instead of being guessed from its mode string.

Why: the mode string ("fork", "sequential", "ray") is the user's way to choose a backend; what the rest
of toolfork decides from it (can this Executor enforce ``Limits``? recycle workers? host a session? stop
a call at its deadline? be used from a forked copy?) depends on what the backend can do, and is read
here. A new backend declares its ``Capabilities`` as a class attribute and every rule below follows,
with the backend's own words for what it cannot do::

    Backend.capabilities ──> Governance      (refuses Limits / worker recycling it cannot honour)
                        ├──> Executor        (whether a forked copy may use it)
                        ├──> session.open_session (where a session's state lives, or a refusal)
                        └──> agent.timeouts  (which timeouts cannot be enforced, so are lifted)

The value is known before the backend starts (a class attribute), so the Executor can refuse what
cannot be honoured before any process exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

#: The capabilities a backend may lack, each with the refusal's words in ``Capabilities.why_not``.
NAMES = ("host_calls", "kills_at_deadline", "limits", "recycles", "sandbox", "sessions")


@dataclass(frozen=True)
class Capabilities:
    """What one kind of backend can do (see the module docstring)."""

    name: str  # the mode that chooses it, for messages
    in_host: bool  # its calls run in the host process: no child (no hooks), nothing of its own to end
    kills_at_deadline: bool  # a call past its deadline is stopped where it runs, wherever the host thread is
    limits: bool  # it can enforce ``Limits`` on a call (rlimits, the sandbox)
    sandbox: bool  # a sandboxed call gets a process of its own (so it cannot run among a session's calls)
    has_workers: bool  # its calls run in worker processes (its own or a cluster's)
    recycles: bool  # it can replace a worker between calls (max_calls_per_worker, max_worker_memory_mb)
    sessions: bool  # ``Executor.session`` can pin a state where its calls run
    host_calls: bool  # a session's calls can ask the host to run its ``host_tools`` (``ToolRuntime.call_host``)
    why_not: Mapping[str, str] = field(default_factory=dict, hash=False)  # capability -> why this backend lacks it
    lines: bool = False  # it runs a job's lines without a per-call object in the host (``Backend.open_lane``)

    def __post_init__(self) -> None:
        missing = [n for n in NAMES if not getattr(self, n) and not self.why_not.get(n)]
        if missing:
            raise ValueError(f"backend {self.name!r}: say why it cannot do {', '.join(missing)} (why_not)")
        unknown = set(self.why_not) - set(NAMES)
        if unknown:
            raise ValueError(f"backend {self.name!r}: why_not names unknown capabilities {sorted(unknown)}")
        object.__setattr__(self, "why_not", MappingProxyType(dict(self.why_not)))

    def refusal(self, capability: str) -> str:
        """Why this backend cannot do ``capability`` (one of ``NAMES``), in words for an error message."""
        return self.why_not.get(capability, "")


__all__ = ["NAMES", "Capabilities"]
