"""mpire's ``WorkerPool`` as a benchmark peer: it sells itself as faster than multiprocessing.

Used the way its documentation recommends for repeated maps: ``start_method="fork"``, ``keep_alive=True``
(workers survive between maps as long as the map's parameters stay the same), ``task_timeout`` for the
per-call timeout and ``worker_init`` / ``worker_exit`` for the per-worker hooks (toolfork's
``on_worker_start``; trivial here, as in every peer). A batch is one ``map``.

mpire's ``task_timeout`` (and a crashed worker) fails the whole ``map``: the exception leaves ``run``,
and the workloads record every call of that batch as failed, as for any peer whose run raises. A map's
``task_timeout`` is the largest timeout of its tasks (mpire has one per map, not per task).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from toolfork.bench.base import Outcome, Peer, Task, exc_text
from toolfork.bench.calls import FUNCTIONS


def _mpire_call(fn: str, kwargs: dict[str, Any]) -> Any:
    return FUNCTIONS[fn](**kwargs)


def _mpire_init() -> None:
    """worker_init: what a real pool would set up per worker (a client, a connection)."""


def _mpire_exit() -> None:
    """worker_exit: its counterpart."""


def _timeout_of(tasks: Sequence[Task]) -> float | None:
    timeouts = [t.timeout for t in tasks if t.timeout is not None]
    return max(timeouts) if timeouts else None


class MpirePeer(Peer):
    name = "mpire"
    description = "mpire.WorkerPool (fork, keep_alive, task_timeout, worker_init/worker_exit)"
    timeout_support = "kill"  # task_timeout stops the worker, but fails the whole map
    requires: ClassVar[tuple[str, ...]] = ("mpire",)

    def start(self) -> None:
        from mpire import WorkerPool

        self.pool = WorkerPool(n_jobs=self.workers, start_method="fork", keep_alive=True)

    def run(self, tasks: Sequence[Task]) -> list[Outcome]:
        values = self.pool.map(
            _mpire_call,
            [(t.fn, t.kwargs) for t in tasks],
            iterable_len=len(tasks),
            worker_init=_mpire_init,
            worker_exit=_mpire_exit,
            task_timeout=_timeout_of(tasks),
        )
        return [Outcome("ok", v) for v in values]

    def submit_one(self, task: Task) -> Any:
        return self.pool.apply_async(_mpire_call, (task.fn, task.kwargs), worker_init=_mpire_init,
                                     worker_exit=_mpire_exit, task_timeout=task.timeout)

    def result_one(self, handle: Any) -> Outcome:
        try:
            return Outcome("ok", handle.get())
        except TimeoutError as exc:
            return Outcome("timeout", error=exc_text(exc))
        except Exception as exc:
            return Outcome("error", error=exc_text(exc))

    def close(self) -> None:
        self.pool.terminate()


__all__ = ["MpirePeer"]
