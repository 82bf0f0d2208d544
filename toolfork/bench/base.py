"""The benchmark's base types: a call of a batch (``Task``), what came of it (``Outcome``) and the
executor interface every peer implements (``Peer``).

They live apart from the peers and the workloads so that both, and the peers kept in modules of their
own, depend on this one module and never on each other.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import importlib.util
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Task:
    """One call of a batch: a function of ``calls.FUNCTIONS`` by name, its arguments, a timeout."""

    fn: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None


@dataclass
class Outcome:
    status: str  # ok | error | timeout | crashed | cancelled
    value: Any = None
    error: str | None = None


class Peer(ABC):
    """One way of running a batch of calls in parallel.

    ``timeout_support`` says what a per-call timeout means for this executor: "kill" (the stuck call
    is stopped), "abandon" (the caller stops waiting; the call keeps running) or "none" (the executor
    has no timeout at all, so the hang workload is not run and is reported as such).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    timeout_support: ClassVar[str] = "kill"
    in_process: ClassVar[bool] = False  # calls run inside the host (no worker processes)
    honours_limits: ClassVar[bool] = False  # applies a tool's declared ``limits`` (or refuses to start)
    shared_processes: ClassVar[bool] = False  # processes outlive one pool (a Ray cluster)
    limit_factor: ClassVar[float] = 1.0  # slow start-up: the harness stretches time limits
    requires: ClassVar[tuple[str, ...]] = ()  # importable modules needed
    # With --quick, only these workloads (None: all). For executors whose start-up alone would eat the
    # quick run's two minutes; the full run always does every workload.
    quick_workloads: ClassVar[tuple[str, ...] | None] = None
    # ``run`` may be called from several threads at once on one pool (the callers workload needs it;
    # without it that workload is "n/a"). Off unless an executor says so: a custom peer that is not
    # thread-safe must not be made to look broken.
    concurrent_callers: ClassVar[bool] = False
    # How a call gets a process of its own, forked for it and gone after it (the fresh workload):
    # "per tool" (a setting of the tool, toolfork's ``@tool(fresh_process=True)``: the workload's fresh
    # calls go to the tool ``<fn>_fresh`` of ``calls.toolfork_tools``, its warm calls to ``<fn>``),
    # "every call" (every call is forked for itself, so the plain call is the fresh one and there is no
    # warm worker to compare with) or None (the workload shows "n/a").
    fresh_process: ClassVar[str | None] = None

    def __init__(self, workers: int) -> None:
        self.workers = workers

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this executor cannot run here (shown as "n/a: ..."), or None."""
        for module in cls.requires:
            if importlib.util.find_spec(module) is None:
                return f"n/a: {module} not installed"
        return None

    @classmethod
    def version(cls) -> str | None:
        if not cls.requires:
            return None
        try:
            from importlib.metadata import version

            return version(cls.requires[0])
        except Exception:
            return None

    @classmethod  # noqa: B027 - most peers need no session set-up
    def setup_session(cls) -> None:
        """Once per runner process, before any pool (Ray starts its local instance here)."""

    @classmethod  # noqa: B027 - most peers need no session set-up
    def teardown_session(cls) -> None:
        """Once per runner process, after the last pool."""

    @abstractmethod
    def start(self) -> None:
        ...

    @abstractmethod
    def run(self, tasks: Sequence[Task]) -> list[Outcome]:
        ...

    @abstractmethod
    def close(self) -> None:
        ...

    def submit_one(self, task: Task) -> Any:
        """Start one call on its own and return a handle that ``result_one`` waits on: the way a host
        with one call at a time (an MCP server, an agent framework's per-call tasks) uses the executor.

        Executors with a per-call API (``submit``, ``schedule``, ``apply_async``, ``.remote``) override
        this pair and hand back their own future, so that nothing of ours is timed on top of it. The
        default is built on ``run``: a batch of one on a thread of its own when ``run`` may be called
        concurrently, otherwise right here (the call is then done before the next is submitted).
        """
        future: cf.Future[Outcome] = cf.Future()

        def one() -> None:
            try:
                future.set_result(self.run([task])[0])
            except Exception as exc:
                future.set_result(Outcome("error", error=exc_text(exc)))

        if self.concurrent_callers:
            threading.Thread(target=one, name="bench-submit-one", daemon=True).start()
        else:
            one()
        return future

    def result_one(self, handle: Any) -> Outcome:
        """Wait for a call started by ``submit_one`` and return its outcome."""
        return handle.result()  # type: ignore[no-any-return]  # the default handle is a Future[Outcome]


def exc_text(exc: BaseException) -> str:
    """An exception as an outcome's error text: type and message, at most 500 characters."""
    return f"{type(exc).__name__}: {exc}"[:500]



__all__ = ["Outcome", "Peer", "Task", "exc_text"]
