"""The template's care, as the worker core sees it: replacing a template that died, teaching it tools.

The template (``fork.template``) forks every worker; the host talks to it through a ``TemplateLink``
(``fork.template_link``). This part of ``WorkerCore`` holds what the core does about the template
beyond one call's path:

    core.check_template: broken (dead, stopped) ──> _replace_template: its workers killed with it, what
                                                    they sent read, running items fail "crashed" naming
                                                    the template, the rest go back; a new TemplateLink
                                                    forks a new template from the host with every tool
    pool.add_tools ──> teach_template (the template learns them now) + ship_tools (live workers: idle
                       ones now, busy ones before their next work, never into a busy worker's pipe)

and the template link's facts the clients read (``template_pid``, ``template_gone``, ``exit_status``,
``open_session``). The look at the template itself (``check_template``: due at most every
``TEMPLATE_CHECK_S``) stays in the core: it runs on every round of the hot path, which must not change
module for it. ``TemplateCare`` is a part of ``WorkerCore`` (its base), as ``fork.faults.FaultRules`` is.
"""

from __future__ import annotations

import logging
import selectors
import signal
import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from toolfork.executor.backends.fork.faults import FaultRules
from toolfork.executor.backends.fork.outcomes import crashed_result
from toolfork.executor.backends.fork.template_link import TemplateLink, signal_groups
from toolfork.executor.backends.fork.workers import Client
from toolfork.executor.wire import ceiling, framing

if TYPE_CHECKING:
    from toolfork.executor.backends.base import WorkerSetup
    from toolfork.tools.tool import Tool

TEMPLATE_KEY = object()  # selector key data of the template's control socket

log = logging.getLogger("toolfork.executor")


def own_ceilings(tools: Mapping[str, Tool]) -> dict[str, int]:
    """Tool name -> its ceiling in bytes (``wire.ceiling``), for the tools that set ``max_result_mb``."""
    return {name: ceiling.of(t.max_result_mb) for name, t in tools.items()
            if getattr(t, "max_result_mb", None) is not None}


class TemplateCare(FaultRules):
    """What the worker core does about its template (see the module docstring); a base of ``WorkerCore``."""

    # The core's state the care acts on, beyond the fault rules' (set by WorkerCore.__init__).
    size: int
    template_restarts: int  # templates replaced
    _tools: dict[str, Tool]  # what a replacement template is forked with: every tool the pool has
    _hooks: WorkerSetup
    _kill_grace: float
    _ceilings: dict[str, int]
    _sel: selectors.DefaultSelector

    @property
    def template_pid(self) -> int | None:
        return self._link.pid

    def exit_status(self, pid: int) -> int | None:
        """The wait status of a worker that ended (waiting a moment for the template's report), or None."""
        return self._link.exit_status(pid)

    @property
    def template_gone(self) -> bool:
        return self._link.gone

    def open_session(self) -> tuple[tuple[int, int, socket.socket], socket.socket]:
        """A session's process, forked by the template's sessions' supervisor (see ``fork.session_worker``):
        the host's ends of its channels and of its control socket. Any thread (one message to the template)."""
        return self._link.open_session()

    def _replace_template(self, client: Client) -> None:
        """The template died or was stopped (a tool can signal its worker's parent): its workers are
        killed with it; what they sent is taken, their running items fail "crashed" naming the template,
        the items queued behind them go back; a new template is forked from the host (the same fork as
        at the pool's start, with the same hazard if the host runs threads) and starts every worker."""
        old = self._link
        cause = old.broken or "died"
        self.template_restarts += 1
        log.warning("the toolfork template process %s %s; its workers are ended with it and a new template is "
                    "forked from this process", old.pid, cause)
        workers = list(self._workers.values())
        # In its process group: the worker and what its call started.
        signal_groups([w.pid for w in workers if w.pid is not None and w.pid > 0], signal.SIGKILL)
        self._unwatch(old.ctrl.fileno())
        old.abandon()  # workers it started and the host never heard of die with it (PR_SET_PDEATHSIG)
        for w in workers:
            if w.wid in self._workers:
                self.read(w, client)  # results written before the end are theirs
            if w.wid in self._workers:  # else its death was read first, and counted by crashed()
                self.count_restart("template")
                self._retire(w, kill=False)
                if w.inflight:
                    current = w.inflight.popleft()
                    client.fail(current, crashed_result(current.call_id, current.name, self._template_death(),
                                                        w.pid, time.monotonic() - w.running_since))
                self.requeue(w, client, died=False)
        self._workers.clear()
        self._owed_tools.clear()
        self.idle.clear()
        self._link = TemplateLink(self._tools, self._hooks, self._kill_grace, self._workers)
        self._sel.register(self._link.ctrl, selectors.EVENT_READ, TEMPLATE_KEY)
        for _ in range(self.size):
            self.idle.append(self._spawn())

    def teach_template(self, blob: bytes, tools: Mapping[str, Tool]) -> None:
        """The template learns ``tools`` at once (workers it forks from now on have them); ``blob`` is
        their dill. Live workers get them by ``ship_tools``; a replacement template is forked with them."""
        self._tools.update(tools)
        self._ceilings = own_ceilings(self._tools)
        self._link.send_tools(blob)

    def ship_tools(self, shipped: list[bytes]) -> None:
        """Idle workers get tool frames now; a busy one, before its next work. Never written to a
        busy worker: it does not read its call pipe while its tool runs (maybe hangs), a write could
        fill that pipe and block the driver, and no deadline would be kept meanwhile."""
        for w in list(self._workers.values()):
            if w.inflight:
                self._owed_tools.setdefault(w.wid, []).extend(shipped)
                continue
            try:  # an idle worker reads them at once
                for frame in shipped:
                    framing.write_all(w.call_fd, frame)
            except OSError:  # it died: its replacement is forked from a template that has the tools
                if w in self.idle:
                    self._count_death()
                    self.drop(w, kill=True)


__all__ = ["TEMPLATE_KEY", "TemplateCare", "own_ceilings"]
