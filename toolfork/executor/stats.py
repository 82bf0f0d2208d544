"""What an Executor has done and is doing, as one value: ``Executor.stats()`` returns an ``ExecutorStats``.

Two sources, each counted where it is already cheap::

    the batches (CallBook.finish, the owner's thread) ──> CallTally: finished calls by (tool, status)
    the backend (fork core, under the driver's lock)   ──> Load: busy / idle workers, calls queued,
                                                            worker restarts by cause, template restarts
                                              both ──> ExecutorStats (a frozen snapshot)

Calls are counted with no lock of their own: each batch counts into a dict only its owner's thread
writes (one batch is iterated by one thread at a time), registered with the tally when the batch
starts and folded into the totals when it ends, both under the Executor's lock, which those two moments
take already. A snapshot copies the live dicts (a dict copy is one step for the interpreter). The
backend's numbers come from its own bookkeeping (``Backend.load``); the fork core counts restarts with
a plain increment on the path that replaces the worker, which only the driver runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

#: The tool name calls to unknown tools are counted under (a model can invent any number of names).
UNKNOWN_TOOL = "(unknown)"

#: Why a fork worker was replaced (``ExecutorStats.restarts`` keys).
RESTART_CAUSES = ("crash", "timeout", "cancel", "recycle", "damaged", "template")


@dataclass(frozen=True)
class Load:
    """What a backend can tell about its workers now (``Backend.load``)."""

    workers: int = 0  #: processes (or Ray tasks) that can run calls at once; 0 in the host
    busy: int = 0  #: of them, running a call now (in the host: calls running now)
    idle: int = 0  #: of them, waiting for a call
    queued: int = 0  #: calls pulled from their batch and not yet handed to a worker (waiting for one, or a cap)
    restarts: Mapping[str, int] = field(default_factory=dict)  #: workers replaced, by cause
    template_restarts: int = 0  #: fork template processes replaced (every worker goes with one)


@dataclass(frozen=True)
class ExecutorStats:
    """A snapshot of one Executor (``Executor.stats()``); numbers since the Executor was built.

    ``calls`` maps (tool name, status) to the number of results delivered so far (a call retried by
    its tool's ``retries`` counts once, with its last status; calls to unknown tools count under
    ``"(unknown)"``). ``restarts`` maps a cause to the workers replaced for it: ``crash`` (died: a
    signal, an exit, the OOM killer), ``timeout`` (killed at its call's deadline), ``cancel`` (killed
    because its call was cancelled), ``recycle`` (``max_calls_per_worker``/``max_worker_memory_mb``),
    ``damaged`` (its channel carried what was not its call's frame), ``template`` (ended with its
    template). Fork mode only: the other modes have no workers to replace (their dict is empty).
    """

    mode: str
    workers: int  #: fork: pool size; ray: tasks in flight at most; sequential: 0
    busy: int  #: fork: workers running a call; ray: tasks in flight; sequential: calls running in the host
    idle: int  #: fork: workers waiting for a call; ray: free task slots; sequential: 0
    queued: int  #: calls pulled from their batch and not yet sent (waiting for a worker, a cap or a token)
    calls: Mapping[tuple[str, str], int]  #: finished calls by (tool, status)
    restarts: Mapping[str, int]  #: workers replaced, by cause (see the class docstring)
    template_restarts: int  #: fork template processes replaced

    @property
    def calls_by_status(self) -> dict[str, int]:
        """Finished calls by status, over all tools."""
        out: dict[str, int] = {}
        for (_, status), n in self.calls.items():
            out[status] = out.get(status, 0) + n
        return out

    @property
    def calls_total(self) -> int:
        return sum(self.calls.values())


class CallTally:
    """Finished calls by (tool, status) of one Executor. ``open``/``close`` and ``snapshot`` are called
    under the Executor's lock; the batch's own dict is written by its owner alone, with no lock."""

    __slots__ = ("_done", "_live")

    def __init__(self) -> None:
        self._done: dict[tuple[str, str], int] = {}
        self._live: dict[int, dict[tuple[str, str], int]] = {}

    def open(self) -> dict[tuple[str, str], int]:
        """A new batch's counts (the caller holds the Executor's lock)."""
        counts: dict[tuple[str, str], int] = {}
        self._live[id(counts)] = counts
        return counts

    def close(self, counts: dict[tuple[str, str], int]) -> None:
        """A batch ended: its counts join the totals (the caller holds the Executor's lock)."""
        self._live.pop(id(counts), None)
        _add(self._done, counts)

    def snapshot(self) -> dict[tuple[str, str], int]:
        """The totals with the live batches' counts so far (the caller holds the Executor's lock)."""
        out = dict(self._done)
        for counts in list(self._live.values()):
            _add(out, counts.copy())
        return out


def _add(into: dict[tuple[str, str], int], counts: Mapping[tuple[str, str], int]) -> None:
    for key, n in counts.items():
        into[key] = into.get(key, 0) + n


def frozen(mapping: Mapping[str, int] | Mapping[tuple[str, str], int]) -> Mapping:  # type: ignore[type-arg]
    """A read-only copy, for a snapshot's fields."""
    return MappingProxyType(dict(mapping))


__all__ = ["RESTART_CAUSES", "UNKNOWN_TOOL", "CallTally", "ExecutorStats", "Load", "frozen"]
