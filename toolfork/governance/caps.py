"""Concurrency caps: at most N calls of a tool (`max_concurrency`) or of a group of tools
(`concurrency_group`, with the group's cap given to the Executor) running at once.

Why a ledger and not a semaphore: a scheduler must not park a worker or a thread on a cap, and must
keep dispatching other tools' calls while one tool is at its cap; so a slot is taken with
`try_acquire` (never waits) and handed back with `release`, and the scheduler decides what to run next.
A `Slot` is released exactly once (releasing it again is a bug, and raises), so a call that is
cancelled or fails after taking its slot cannot free someone else's. Bad settings (a cap that is not a
positive whole number, a group no cap is given for) are refused when the tool is registered, naming the
setting. All methods are safe to call from several threads.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field


class CapError(ValueError):
    """A concurrency setting is invalid; the message names the setting, the tool and the value."""


def _check_cap(setting: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise CapError(f"{setting}={value!r} must be a whole number of at least 1")
    return value


@dataclass(frozen=True)
class _Rule:
    max_concurrency: int | None
    group: str | None


@dataclass(eq=False)
class Slot:
    """One running call's place under its tool's and its group's caps."""

    tool: str
    group: str | None
    released: bool = field(default=False)


class ConcurrencyCaps:
    """The caps of one Executor, shared by every batch, thread and task that uses it."""

    def __init__(self, groups: Mapping[str, int] | None = None) -> None:
        self._groups: dict[str, int] = {}
        for name, cap in (groups or {}).items():
            if not isinstance(name, str) or not name:
                raise CapError(f"concurrency: group name {name!r} must be a non-empty string")
            self._groups[name] = _check_cap(f"concurrency[{name!r}]", cap)
        self._rules: dict[str, _Rule] = {}
        self._running_tool: dict[str, int] = {}
        self._running_group: dict[str, int] = dict.fromkeys(self._groups, 0)
        self._lock = threading.Lock()

    def validate(self, tool: str, *, max_concurrency: int | None = None,
                 concurrency_group: str | None = None) -> None:
        """Raise CapError, naming the setting, if ``register`` would refuse these caps (nothing changes)."""
        if max_concurrency is not None:
            _check_cap(f"max_concurrency of tool {tool!r}", max_concurrency)
        if concurrency_group is not None and concurrency_group not in self._groups:
            known = ", ".join(sorted(self._groups)) or "none"
            raise CapError(f"concurrency_group={concurrency_group!r} of tool {tool!r} has no cap: give it in "
                           f"concurrency={{...}} (groups with a cap: {known})")

    def register(self, tool: str, *, max_concurrency: int | None = None, concurrency_group: str | None = None) -> None:
        """Declare a tool's caps (call once per tool; a tool never registered is free)."""
        self.validate(tool, max_concurrency=max_concurrency, concurrency_group=concurrency_group)
        cap = max_concurrency
        with self._lock:
            self._rules[tool] = _Rule(cap, concurrency_group)
            self._running_tool.setdefault(tool, 0)

    def _fits(self, tool: str) -> tuple[bool, _Rule]:
        rule = self._rules.get(tool, _Rule(None, None))
        if rule.max_concurrency is not None and self._running_tool.get(tool, 0) >= rule.max_concurrency:
            return False, rule
        if rule.group is not None and self._running_group[rule.group] >= self._groups[rule.group]:
            return False, rule
        return True, rule

    def can_acquire(self, tool: str) -> bool:
        """Whether a call of `tool` would get a slot now (a look only; nothing is taken)."""
        with self._lock:
            return self._fits(tool)[0]

    def try_acquire(self, tool: str) -> Slot | None:
        """Take a slot for one call of `tool`, or None if its tool or group is at its cap; never waits."""
        with self._lock:
            fits, rule = self._fits(tool)
            if not fits:
                return None
            self._running_tool[tool] = self._running_tool.get(tool, 0) + 1
            if rule.group is not None:
                self._running_group[rule.group] += 1
            return Slot(tool, rule.group)

    def release(self, slot: Slot) -> None:
        """Hand a slot back (when its call finished, failed, timed out or was cancelled)."""
        with self._lock:
            if slot.released:
                raise RuntimeError(f"a slot of tool {slot.tool!r} was released twice")
            slot.released = True
            self._running_tool[slot.tool] -= 1
            if slot.group is not None:
                self._running_group[slot.group] -= 1

    def running(self, tool: str) -> int:
        """Calls of `tool` holding a slot now."""
        with self._lock:
            return self._running_tool.get(tool, 0)

    def running_in_group(self, group: str) -> int:
        """Calls of the tools of `group` holding a slot now."""
        with self._lock:
            return self._running_group[group]
