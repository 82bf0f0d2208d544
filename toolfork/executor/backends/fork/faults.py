"""The fault rules of the worker core: what happens to a worker that died, timed out, was stopped or left.

``WorkerCore`` (``fork.core``) is one object, changed by one thread at a time; its rules are in three
rooms by job. This one holds what happens to a worker that must go, and to its items:

    the template reports deaths ──> bury ──> crashed: running item fails "crashed" (or "error",
    EOF / bytes not a frame ──────────────> crashed   a limit it died of), the rest requeue
    a deadline passed (core.expire) ──> time_out: fails "timeout" ──> stop
    cancel / damage / recycling ──> stop / replace / drop ──> _retire (forget, maybe kill) ──> _refill

``requeue`` gives the items that never started back to the client (a worker that *died* counts against
them: ``MAX_REQUEUES``); ``_retire`` forgets a worker (its fds, its selector key, its owed tools) and has
the template stop its process group if asked; ``_refill`` gives its slot to its lender or a new worker.
``count_restart`` counts each worker ended early once, by cause; ``_count_death`` tells a worker's own
death from its template's (looked at now), and ``_template_death`` is the error of an item whose worker
ended with the template. None of this runs on a call that succeeds: the hot path (``read``, ``send``,
``select``, ``take``) stays in the core, and reaches here only on a fault.

``FaultRules`` is a part of ``WorkerCore`` (its base), not an object of its own: the rules act on the
core's table, declared below and set by ``WorkerCore.__init__``.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from toolfork.executor.backends.fork.outcomes import (
    death_result,
    describe_exit,
    not_started_result,
    timeout_result,
)
from toolfork.executor.backends.fork.workers import Client, Worker
from toolfork.executor.wire.frames import damaged_result
from toolfork.executor.wire.pipes import close_quietly

if TYPE_CHECKING:
    from toolfork.executor.backends.fork.template_link import TemplateLink
    from toolfork.governance.limits import Limits
    from toolfork.governance.policy import Governance

MAX_REQUEUES = 3  # an item whose worker died before starting it this many times fails instead

log = logging.getLogger("toolfork.executor")


class FaultRules:
    """The rules for a worker that must go (see the module docstring); a base of ``WorkerCore``."""

    # The core's state the rules act on (set by WorkerCore.__init__).
    governance: Governance  # the limits a worker died of
    restarts: dict[str, int]  # workers ended early, by cause
    idle: deque[Worker]
    _workers: dict[int, Worker]
    _link: TemplateLink
    _owed_tools: dict[int, list[bytes]]

    if TYPE_CHECKING:  # the core's own, that the rules call
        def read(self, w: Worker, client: Client) -> None: ...
        def learn(self, name: str, duration: float) -> None: ...
        def _spawn(self, sandbox: Limits | None = None) -> Worker: ...
        def _unwatch(self, fd: int) -> None: ...

    def count_restart(self, cause: str) -> None:
        """A worker ended early for ``cause`` (one of ``stats.RESTART_CAUSES``), counted once, where it is retired."""
        self.restarts[cause] = self.restarts.get(cause, 0) + 1

    def _count_death(self) -> None:
        """A worker found dead: with its template (PR_SET_PDEATHSIG; the template is looked at now, so a
        template's death is not mistaken for its workers' crashes before it is noticed), or by itself."""
        self._link.check(now=True)
        self.count_restart("template" if self._link.gone else "crash")

    def _template_death(self) -> tuple[str, str]:
        """(error type, message) of an item whose worker ended with its template."""
        return "WorkerCrashed", (f"the toolfork template process (which starts and watches the workers) "
                                 f"{self._link.broken or 'died'}, and the worker was ended with it")

    def bury(self, client: Client) -> None:
        """Workers the template reported dead that are still ours: take what they wrote, then treat
        them as crashed (a worker never exits by itself while its call pipe is open)."""
        if not self._link.deaths:
            return
        dead = self._link.take_deaths()
        for w in [w for w in self._workers.values() if w.pid in dead]:
            self.read(w, client)
            if w.wid in self._workers:
                self.crashed(w, client)

    def crashed(self, w: Worker, client: Client) -> None:
        """``w`` died (EOF, a reported death) or wrote what is not a frame: its running item fails, the
        items behind it go back, a fresh worker takes the slot."""
        if w.reader.damaged is not None:  # bytes that are not a frame: fail its item, replace it
            if w.inflight:
                current = w.inflight.popleft()
                log.warning("worker %s (tool %r, call %s): %s", w.pid, current.name, current.call_id,
                            w.reader.damaged)
                client.fail(current, damaged_result(current.call_id, current.name, w.reader.damaged, w.pid,
                                                    time.monotonic() - w.running_since))
            self.count_restart("damaged")
            self.replace(w, client)
            return
        self._link.wait_pid(w)  # its exit status is reported by pid: learn the pid before forgetting the worker
        self._count_death()
        self._retire(w, kill=False)
        if w in self.idle:
            self.idle.remove(w)
        if w.inflight:
            current = w.inflight.popleft()
            status = self._link.exit_status(w.pid)
            described = self._template_death() if self._link.gone else describe_exit(status)
            result = death_result(current.call_id, current.name, status, described,
                                  self.governance.limits_for(current.name), w.pid, time.monotonic() - w.running_since)
            if result.status == "crashed":
                log.warning("worker %s died running tool %r (call %s): %s", w.pid, current.name, current.call_id,
                            described[1])
            client.fail(current, result)
            self.requeue(w, client, died=True)
        self._refill(w)

    def replace(self, w: Worker, client: Client) -> None:
        """A worker that must not take more work: the items behind its running one go back; it is
        stopped and a fresh worker takes the slot."""
        self.requeue(w, client, died=False)
        self.drop(w, kill=True)

    def requeue(self, w: Worker, client: Client, *, died: bool) -> None:
        """Items queued behind a stopped worker's running one never started: back to the client. Only a
        worker that died counts against them (an item that keeps killing workers fails instead)."""
        back: list[Any] = []
        for item in w.inflight:
            if not client.wanted(item):
                continue
            if died:
                item.requeues += 1
                if item.requeues > MAX_REQUEUES:
                    client.fail(item, not_started_result(item.call_id, item.name, item.requeues, w.pid))
                    continue
            back.append(item)
        w.inflight.clear()
        w.chunks.clear()
        if back:
            client.put_back(back)

    def time_out(self, w: Worker, now: float, client: Client) -> None:
        """``w``'s running item passed its deadline at ``now`` (``WorkerCore.expire`` finds it): it fails
        "timeout"; the worker is stopped and replaced."""
        current = w.inflight.popleft()
        elapsed = now - w.running_since
        self.learn(current.name, elapsed)  # a tool that hangs is no longer sent in chunks
        log.warning("tool %r (call %s) passed its timeout of %ss; killing worker %s", current.name,
                    current.call_id, current.timeout, w.pid)
        client.fail(current, timeout_result(current.call_id, current.name, current.timeout, w.pid, elapsed))
        self.stop(w, client, cause="timeout")

    def stop(self, w: Worker, client: Client, cause: str = "cancel") -> None:
        """``w``'s running item is settled already (timed out, cancelled): the rest go back, the worker
        is killed and replaced."""
        self.count_restart(cause)
        self.requeue(w, client, died=False)
        self.drop(w, kill=True)

    def drop(self, w: Worker, *, kill: bool) -> None:
        """``w`` leaves the pool (its process group stopped by the template if ``kill``); its slot goes
        to a fresh worker (or back to the worker that lent it)."""
        if w in self.idle:
            self.idle.remove(w)
        self._retire(w, kill=kill)
        self._refill(w)

    def _retire(self, w: Worker, *, kill: bool) -> None:
        """Forget a worker; if ``kill``, have the template stop its process group (with grace)."""
        pid = self._link.wait_pid(w) if kill else None  # while it is still ours: its "spawned" names it by wid
        self._workers.pop(w.wid, None)
        self._owed_tools.pop(w.wid, None)
        self._unwatch(w.result_fd)
        self._link.forget_fds((w.call_fd, w.result_fd, w.side.sock.fileno()))
        close_quietly((w.call_fd, w.result_fd))
        w.side.close()  # a large frame still in flight on it is freed with it
        if pid is not None:
            self._link.term(pid)

    def _refill(self, gone: Worker) -> None:
        """A worker left: its slot goes to its lender (a one-shot's), else to a new worker. A lender that
        left while its slot is lent gets no replacement: the one-shot holds that slot, and finding its
        lender gone when it is done, hands the slot to a new worker then (one slot, one worker: the pool
        never grows past its size)."""
        if gone.lender is not None:
            lender, gone.lender = gone.lender, None
            if lender.wid in self._workers:
                self.idle.append(lender)
                return
        elif any(w.lender is gone for w in tuple(self._workers.values())):
            return
        if self._link.gone:  # the template's replacement starts every worker
            return
        self.idle.append(self._spawn())


__all__ = ["MAX_REQUEUES", "FaultRules"]
