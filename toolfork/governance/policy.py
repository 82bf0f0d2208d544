"""`Governance`: one Executor's limits, caps, rate limits and worker recycling, decided once.

Why one object: every backend, `toolfork run`, `toolfork mcp serve`, the agent and the adapters reach
tools through an Executor, so the rules live on the Executor and every path asks the same object:

* which `Limits` a tool's calls run under (`limits_for`: the rule of ``effective``, the same one the
  fork worker applies), and whether the backend can enforce them (`register` fails closed, naming the
  tool, the field and why, unless the limits say enforce="best-effort", which logs instead);
* whether a call may start now (`admit`: a slot under its tool's and its group's caps and a token of
  its tool's rate limit, both or neither; never waits) and when to look again (`wake_at`), so the fork
  pool's driver keeps a waiting call off the workers and keeps starting other calls; `acquire` is the
  waiting form, for code that runs calls in its own thread (sequential mode; an inline call is
  parked instead, see ``executor/inline.py``);
* when a warm worker has done enough (`max_calls_per_worker`, `max_worker_memory_mb`), which the worker
  core checks between calls.

What the backend can do (enforce limits, recycle workers) is read from its declared ``Capabilities``,
never from its mode string.

A tool with no governance setting and an Executor with no default limits cost nothing: `gated` is
false for it and the pool takes its usual path.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .caps import ConcurrencyCaps, Slot
from .effective import EffectiveLimits
from .enforceable import Unenforceable, check
from .limits import Limits
from .ratelimit import RateLimit, TokenBucket

if TYPE_CHECKING:
    from typing import Protocol

    class Capabilities(Protocol):
        """What governance reads of the backend's declared capabilities (``executor.backends.capabilities``;
        named here so governance, below the executor, imports nothing of it)."""

        @property
        def limits(self) -> bool: ...
        @property
        def recycles(self) -> bool: ...
        @property
        def has_workers(self) -> bool: ...

        def refusal(self, capability: str) -> str: ...

    class Tool(Protocol):
        """What governance reads of a tool: its settings (``tools.settings``; named here so governance,
        which the tools import for ``Limits``, imports nothing of them)."""

        @property
        def name(self) -> str: ...
        @property
        def inline(self) -> bool: ...
        @property
        def limits(self) -> Limits | None: ...
        @property
        def max_concurrency(self) -> int | None: ...
        @property
        def concurrency_group(self) -> str | None: ...
        @property
        def rate_limit(self) -> str | None: ...

log = logging.getLogger("toolfork.governance")

WAIT_SLICE_S = 0.05  # how often a waiting `acquire` looks at its stop condition


def _count(setting: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{setting} must be a whole number of at least 1, or None; got {value!r}")
    return value


class Governance:
    """The governance of one Executor (see the module docstring). Thread-safe."""

    def __init__(self, capabilities: Capabilities, *, limits: Limits | None = None,
                 concurrency: Mapping[str, int] | None = None, max_calls_per_worker: int | None = None,
                 max_worker_memory_mb: int | None = None) -> None:
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be a toolfork.Limits or None, got {type(limits).__name__}")
        self.capabilities = capabilities
        self.effective = EffectiveLimits(limits)
        self.default = self.effective.default
        self.caps = ConcurrencyCaps(concurrency)  # a bad cap: CapError, a ValueError naming it
        self.max_calls_per_worker = _count("max_calls_per_worker", max_calls_per_worker)
        self.max_worker_memory_mb = _count("max_worker_memory_mb", max_worker_memory_mb)
        if (self.max_calls_per_worker or self.max_worker_memory_mb) and not capabilities.recycles:
            why = capabilities.refusal("recycles")
            if capabilities.has_workers:  # workers it cannot replace: the setting would be silently wrong
                raise ValueError(f"max_calls_per_worker and max_worker_memory_mb recycle workers; {why}")
            log.warning("max_calls_per_worker / max_worker_memory_mb: %s", why)
        self._limits: dict[str, Limits | None] = {}
        self._buckets: dict[str, TokenBucket] = {}
        self._gated: set[str] = set()
        # Tools whose calls each go to a worker alone, never in a chunk of quick calls: gated ones (each
        # holds its own slot) and restricted ones (each runs in a process of its own).
        self.alone: set[str] = set()
        self.any_gated = False  # whether any tool is gated (read on every round of a backend's driver)
        self._cond = threading.Condition()
        self.skipped: list[Unenforceable] = []  # what enforce="best-effort" let through, for the curious

    # ------------------------------------------------------------------ tools

    def register(self, tools: Iterable[Tool]) -> None:
        """Take each tool's settings; refuse (naming the tool and the setting) what cannot be honoured.
        All or nothing: a refused tool leaves the governance as it was."""
        tools = list(tools)
        staged_limits = {t.name: self.effective.resolve(t) for t in tools}
        for t in tools:
            self.caps.validate(t.name, max_concurrency=t.max_concurrency, concurrency_group=t.concurrency_group)
            limits = staged_limits[t.name]
            if limits is not None:
                self.skipped.extend(self._check(t, limits))
        for t in tools:
            name = t.name
            self._limits[name] = staged_limits[name]
            gated = t.max_concurrency is not None or t.concurrency_group is not None or t.rate_limit is not None
            if gated:
                self.caps.register(name, max_concurrency=t.max_concurrency, concurrency_group=t.concurrency_group)
            if t.rate_limit is not None:
                self._buckets[name] = TokenBucket(t.rate_limit)
            else:
                self._buckets.pop(name, None)
            for members, member in ((self._gated, gated), (self.alone, gated or self.restricted(name))):
                if member:
                    members.add(name)
                else:
                    members.discard(name)
        self.any_gated = bool(self._gated)

    def _check(self, t: Tool, limits: Limits) -> list[Unenforceable]:
        """Fail closed (``enforceable.check``), where the calls run where nothing can limit them too."""
        nowhere = None
        if t.inline:
            nowhere = "it is inline: its calls run in the host process, where a call cannot be limited"
        elif not self.capabilities.limits:
            nowhere = self.capabilities.refusal("limits")
        return check(limits, where=f"tool {t.name!r}", nowhere=nowhere)

    def limits_for(self, name: str) -> Limits | None:
        """The limits a call of tool ``name`` runs under (None: none)."""
        return self._limits.get(name)

    def restricted(self, name: str) -> bool:
        """Whether ``name``'s calls are sandboxed (no network, Landlock paths, ``sandbox=True``): each
        such call runs in a process of its own, and what it sends back crosses as data only."""
        limits = self._limits.get(name)
        return limits is not None and limits.sandboxed

    def gated(self, name: str) -> bool:
        """Whether ``name``'s calls wait for a cap or a rate limit before they start."""
        return name in self._gated

    @property
    def recycles(self) -> bool:
        return self.max_calls_per_worker is not None or self.max_worker_memory_mb is not None

    # ------------------------------------------------------------------ admission

    def admit(self, name: str, now: float | None = None) -> Slot | None:
        """A slot for one call of ``name`` if its caps have room and its rate limit a token, else None;
        never waits. A tool that is not gated gets None too: ask ``gated`` first."""
        with self._cond:
            return self._admit(name, time.monotonic() if now is None else now)

    def _admit(self, name: str, now: float) -> Slot | None:
        if not self.caps.can_acquire(name):
            return None
        bucket = self._buckets.get(name)
        if bucket is not None and not bucket.try_acquire(now):
            return None
        return self.caps.try_acquire(name)

    def admits(self, item: Any) -> bool:
        """Whether a call may start now (``item`` has ``name`` and ``slot``: a backend's Dispatch); a
        gated tool's call takes its slot and token here, into ``item.slot``. What a backend's scheduler
        hands ``Hub.take_next``."""
        name = item.name
        if name not in self._gated:
            return True
        item.slot = self.admit(name)
        return item.slot is not None

    def give_back(self, item: Any) -> None:
        """``item``'s call left where it ran (finished, failed, stopped, or sent back unstarted): its slot,
        if it holds one, goes back to its tool's caps, once."""
        slot = item.slot
        if slot is not None:
            item.slot = None
            self.release(slot)

    def release(self, slot: Slot) -> None:
        """A call that held a slot is done (finished, failed, cancelled, or sent back unstarted)."""
        with self._cond:
            self.caps.release(slot)
            self._cond.notify_all()

    def rate_of(self, name: str) -> RateLimit | None:
        """``name``'s rate limit, or None (for a backend that spaces the starts where the calls run)."""
        bucket = self._buckets.get(name)
        return None if bucket is None else bucket.rate

    def wake_at(self, names: Iterable[str]) -> float | None:
        """When a call of one of ``names`` (all refused just now) could get a token: the earliest, among
        those whose caps have room, of their buckets' next token. None: only a release can let one in."""
        best: float | None = None
        with self._cond:
            for name in names:
                bucket = self._buckets.get(name)
                if bucket is None or not self.caps.can_acquire(name):
                    continue
                at = bucket.next_ready()
                best = at if best is None else min(best, at)
        return best

    def acquire(self, name: str, stopped: Callable[[], bool] = lambda: False) -> Slot | None:
        """``admit``, waiting as long as it takes (in this thread), or None once ``stopped()`` says so.
        For calls that run in the caller's own thread (sequential mode, inline tools)."""
        with self._cond:
            while True:
                now = time.monotonic()
                slot = self._admit(name, now)
                if slot is not None:
                    return slot
                if stopped():
                    return None
                bucket = self._buckets.get(name)
                wait = WAIT_SLICE_S
                if bucket is not None and self.caps.can_acquire(name):
                    wait = min(wait, max(0.0, bucket.next_ready(now) - now))
                self._cond.wait(wait)


__all__ = ["Governance"]
