"""Which of a Limits' fields cannot be enforced here, and why; and the fail-closed rule on top of it.

Why one function: the Executor must refuse to start when a tool asked for a limit this OS, kernel or
permission set cannot give it (`enforce="strict"`, the default), or log what it will not apply
(`enforce="best-effort"`); every mechanism's probe is asked the same way here, so no caller can forget
one. `network=True` asks for nothing and is always enforceable.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from . import landlock, netns, rlimits
from .limits import Limits

log = logging.getLogger("toolfork.governance")


@dataclass(frozen=True)
class Unenforceable:
    """One field that cannot be enforced here: the field, the value asked for, and why not."""

    field: str
    value: object
    reason: str

    def __str__(self) -> str:
        return f"{self.field}={self.value!r} cannot be enforced here: {self.reason}"


class LimitsNotEnforceable(RuntimeError):
    """Limits asked (strictly) for something this host cannot enforce; names each field and why."""

    def __init__(self, where: str, missing: list[Unenforceable]) -> None:
        self.missing = missing
        lines = "; ".join(str(m) for m in missing)
        super().__init__(f"{where}: {lines} (or pass enforce='best-effort' to run without them)")


def unenforceable(limits: Limits) -> list[Unenforceable]:
    """The fields of `limits` that cannot be enforced here, each with why (OS, permission, kernel)."""
    found = []
    for name in rlimits.RLIMIT_OF:
        value = getattr(limits, name)
        if value is not None:
            verdict = rlimits.probe(name)
            if not verdict.ok:
                found.append(Unenforceable(name, value, verdict.reason))
    if limits.network is False:
        verdict = netns.probe()
        if not verdict.ok:
            found.append(Unenforceable("network", False, verdict.reason))
    for name in ("read_paths", "write_paths"):
        value = getattr(limits, name)
        if value is not None:
            verdict = landlock.probe()
            if not verdict.ok:
                found.append(Unenforceable(name, list(value), verdict.reason))
    return found


def check(limits: Limits, *, where: str = "Limits") -> list[Unenforceable]:
    """Fail closed: raise LimitsNotEnforceable if a strict limit cannot be enforced; under
    enforce="best-effort" log each one at WARNING instead. Returns what will not be applied."""
    missing = unenforceable(limits)
    if missing and limits.strict:
        raise LimitsNotEnforceable(where, missing)
    for item in missing:
        log.warning("%s: not applied (enforce='best-effort'): %s", where, item)
    return missing
