"""The effective limits of a tool's calls: the one rule, and a table of it per tool.

Why one place: the host decides with it whether a call's limits can be enforced and how the call is
routed (``Governance``, every mode), and the fork worker applies it to each call it runs
(``executor.backends.fork.limited``, also for the line lane, whose calls are never resolved in the
host). Both must reach the same answer for the same tool and Executor::

    Executor(limits=default) ──> Governance.effective ── resolve(tool) ──> limits_for(name)  (host)
                         └─ WorkerSetup.limits ──> worker: EffectiveLimits(default).of(tool)       (worker)

The rule: a tool's own limits over the Executor's default, field by field (``Limits.merged_over``);
None when that limits nothing (no limits, or only ``enforce`` said), so an unlimited call pays nothing.
"""

from __future__ import annotations

from typing import Any

from .limits import Limits


class EffectiveLimits:
    """Each tool's effective limits under one Executor's default, worked out once per tool name."""

    __slots__ = ("default", "known")

    def __init__(self, default: Limits | None) -> None:
        self.default = default if default is not None and default.set_fields() else None
        # tool name -> its effective limits, as worked out so far (a hot loop may read it first: ``of``
        # fills it, ``forget`` empties it in place)
        self.known: dict[str, Limits | None] = {}

    def resolve(self, tool: Any) -> Limits | None:
        """The rule, for ``tool`` (anything with ``limits``), without remembering it."""
        own: Limits | None = tool.limits
        default = self.default
        if own is None and default is None:
            return None
        limits = own.merged_over(default) if own is not None else default
        return limits if limits is not None and limits.set_fields().keys() - {"enforce"} else None

    def of(self, tool: Any) -> Limits | None:
        """``tool``'s effective limits (None: none), remembered by its name until ``forget``."""
        name = tool.name
        try:
            return self.known[name]
        except KeyError:
            limits = self.known[name] = self.resolve(tool)
            return limits

    def forget(self) -> None:
        """Tools were added or replaced: work their limits out again."""
        self.known.clear()


__all__ = ["EffectiveLimits"]
