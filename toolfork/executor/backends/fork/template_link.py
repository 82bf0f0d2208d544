"""The host's link to the template process: start it, have it fork and stop workers, read what it
reports (a worker's pid, a worker's death and wait status), keep it running, and end it.

Why a class of its own: the template is the only process the host forks (see ``fork.template``), and
everything the host says to it goes over one control socket. The scheduler (``fork.pool``) decides
which worker to start or stop and when; this link only carries those decisions out and answers what
the template said, so the control protocol and the template's liveness rules live in one place.
"""

from __future__ import annotations

import enum
import logging
import os
import pickle
import select
import signal
import socket
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from toolfork.executor.backends.base import WorkerSetup
from toolfork.executor.backends.fork import template_messages as messages
from toolfork.executor.backends.fork.template import MAX_MESSAGE, template_main
from toolfork.executor.backends.fork.worker import signal_quietly
from toolfork.executor.backends.host_fds import HOST_FDS
from toolfork.executor.wire import oob
from toolfork.executor.wire.pipes import close_quietly

if TYPE_CHECKING:
    from toolfork.governance.limits import Limits

SPAWN_ACK_TIMEOUT = 10.0
TEMPLATE_CHECK_S = 0.5  # how often the template is looked at while the host waits for it
PIPE_SIZE = 1 << 20
F_SETPIPE_SZ = 1031

log = logging.getLogger("toolfork.executor")



class LinkState(enum.Enum):
    """Where the host stands with its template (``TemplateLink.state``)."""

    SERVING = "serving"  # it answers on its control socket: workers can be forked and stopped
    BROKEN = "broken"  # it died or was stopped (``broken`` says which); the core replaces it, never asks it again


class TemplateGone(RuntimeError):
    """The template process could not be started again after it died or was stopped (the worker core
    replaces it; see ``WorkerCore.check_template``)."""

    def __init__(self, cause: str = "died") -> None:
        super().__init__(f"the toolfork template process {cause}, and no new one could be started")


class HasPid(Protocol):
    pid: int | None


class TemplateLink:
    """One pool's template process and its control socket. ``workers`` (worker id -> worker) is the
    pool's own table: the link sets a worker's ``pid`` when the template reports it forked."""

    def __init__(self, tools: Mapping[str, Any], hooks: WorkerSetup, kill_grace: float,
                 workers: Mapping[int, HasPid]) -> None:
        self._kill_grace = kill_grace
        self._workers = workers
        self.ctrl, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        import multiprocess  # here: a process that never starts a pool does not pay its 8 ms import

        ctx = multiprocess.get_context("fork")
        _note_running_loop()
        self._template = ctx.Process(
            target=_template_entry,
            args=(template_end, self.ctrl.fileno(), tools, hooks),
            name="toolfork-template",
            daemon=True,
        )
        self._template.start()
        self._pid: int | None = self._template.pid  # kept: the process object is closed once the template ended
        template_end.close()
        try:  # what multiprocess gave the template to show the host its end by: its children get none
            sentinel = os.fstat(self._template.sentinel)
            self.ctrl.send(pickle.dumps(messages.Sentinel(sentinel.st_dev, sentinel.st_ino)))
        except OSError:
            pass  # the template is gone already: noticed as any death
        HOST_FDS.add(self.ctrl.fileno())
        self._process_fds = _process_pipes(self._template)
        HOST_FDS.update(self._process_fds)
        self._exit_status: dict[int, int] = {}
        # Pids the template reported dead. A worker's death is acted on when it is reported, not only
        # at EOF of its result pipe: a process the tool started may hold a copy of that pipe.
        self.deaths: list[int] = []
        self.checked_at = time.monotonic()
        # Why this template can no longer be used (it died, or was stopped), or None while it serves.
        # Set by what notices it; the worker core then replaces the template (``WorkerCore.check_template``).
        self.broken: str | None = None
        self._finalizer = weakref.finalize(self, _emergency_close, self._template, self.ctrl)

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def state(self) -> LinkState:
        return LinkState.SERVING if self.broken is None else LinkState.BROKEN

    @property
    def gone(self) -> bool:
        """``state is LinkState.BROKEN``, read on every worker's death."""
        return self.broken is not None

    def _break(self, cause: str) -> None:
        if self.broken is None:
            self.broken = cause

    # ----------------------------------------------------------------- workers

    def spawn(self, wid: int, sandbox: Limits | None = None) -> tuple[int, int, socket.socket]:
        """Have the template fork worker ``wid``; returns the host's ends (call write fd, result read fd
        (non-blocking), side socket). A template that cannot be told is marked broken (the worker then
        never starts: its pipes are at EOF, and the core replaces the template)."""
        return self._send_channels(messages.Spawn(wid, sandbox))

    def open_session(self) -> tuple[tuple[int, int, socket.socket], socket.socket]:
        """Have the template hand a new session to the sessions' supervisor, which forks its process (see
        ``fork.session_worker``): the host's ends of the session process's channels (as ``spawn``'s),
        and of the session's control socket to the supervisor."""
        ctl, ctl_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        HOST_FDS.add(ctl.fileno())
        try:
            return self._send_channels(messages.OpenSession(), ctl_theirs.fileno()), ctl
        finally:
            ctl_theirs.close()

    def _send_channels(self, msg: messages.Spawn | messages.OpenSession,
                       *extra: int) -> tuple[int, int, socket.socket]:
        ours, theirs = worker_channels()
        try:
            socket.send_fds(self.ctrl, [pickle.dumps(msg)], [*theirs, *extra])
        except OSError:
            self._break("died (its control socket is closed)")
        finally:
            for fd in theirs:
                os.close(fd)
        return ours

    @staticmethod
    def forget_fds(fds: Iterable[int]) -> None:
        """The host's ends of a worker that left are closed (by its owner): forked templates need not
        close them any more."""
        HOST_FDS.difference_update(fds)

    def term(self, pid: int) -> None:
        """Have the template stop a worker's process group (SIGTERM, SIGKILL after the grace)."""
        try:
            self.ctrl.send(pickle.dumps(messages.Term(pid, self._kill_grace)))
        except OSError:  # the template is gone, and its workers with it (PR_SET_PDEATHSIG)
            self._break("died (its control socket is closed)")

    def send_tools(self, blob: bytes) -> None:
        """The template learns tools added later (dill bytes of {name: Tool}), in messages it can read.
        A template that cannot be told is marked broken: its replacement is forked with every tool."""
        step = MAX_MESSAGE // 2  # the template reads messages of up to MAX_MESSAGE bytes
        chunks = [blob[i : i + step] for i in range(0, len(blob), step)] or [b""]
        try:
            for i, chunk in enumerate(chunks):
                self.ctrl.send(pickle.dumps(messages.AddTools(i, i == len(chunks) - 1, chunk)))
        except OSError:
            self._break("died (its control socket is closed)")

    # ----------------------------------------------------------------- what the template says

    def handle(self) -> None:
        """Read every message the template has sent (non-blocking)."""
        while True:
            try:
                data = self.ctrl.recv(MAX_MESSAGE, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._break("died")
                return
            msg = pickle.loads(data)
            if isinstance(msg, messages.Spawned):
                w = self._workers.get(msg.wid)
                if w is not None:
                    w.pid = msg.pid
            elif isinstance(msg, messages.Exited):
                self._exit_status[msg.pid] = msg.status
                self.deaths.append(msg.pid)
                if len(self._exit_status) > 4096:  # only recent ones are ever asked for
                    for pid in list(self._exit_status)[:2048]:
                        del self._exit_status[pid]

    def take_deaths(self) -> set[int]:
        """Pids reported dead since the last call."""
        dead, self.deaths = set(self.deaths), []
        return dead

    def wait(self, done: Callable[[], bool], timeout: float) -> None:
        """Read the template's messages until ``done()`` or ``timeout``, keeping the template running."""
        end = time.monotonic() + timeout
        while not done() and self.broken is None:
            left = end - time.monotonic()
            if left <= 0:
                return
            ready = select.select([self.ctrl], [], [], min(left, TEMPLATE_CHECK_S))[0]
            if ready:
                self.handle()
            else:
                self.check()

    def wait_pid(self, w: HasPid) -> int | None:
        """``w``'s pid, waiting for the template to report it forked; None if the template broke first
        (died, stopped, or too slow to answer: it is replaced then)."""
        if w.pid is None:
            self.wait(lambda: w.pid is not None, SPAWN_ACK_TIMEOUT)
            if w.pid is None:
                self._break("did not report a worker it was asked to start within "
                            f"{SPAWN_ACK_TIMEOUT:g}s" if process_state(self._pid or 0) not in (None, b"Z", b"X")
                            else "died")
        return w.pid

    def exit_status(self, pid: int | None) -> int | None:
        """The wait status of a dead worker (waiting a moment for the template's report), or None."""
        if pid is None:
            return None
        self.wait(lambda: pid in self._exit_status, 2.0)
        return self._exit_status.pop(pid, None)

    def check(self, *, now: bool = False) -> None:
        """Whether the template still serves: a tool can SIGSTOP it (its worker's parent), and then no
        worker is started, reaped or killed; or kill it. Seen stopped or dead, it is marked broken (the
        core replaces it). Looked at most every TEMPLATE_CHECK_S, unless ``now``; one read of
        /proc/PID/stat (a dead template's EOF on the control socket is noticed at once besides)."""
        at = time.monotonic()
        if self.broken is not None or (not now and at < self.checked_at + TEMPLATE_CHECK_S):
            return
        self.checked_at = at
        pid = self._pid
        if pid is None:
            return
        state = process_state(pid)
        if state in (b"T", b"t"):
            self._break("was stopped (SIGSTOP, from a tool or from outside)")
        elif state in (None, b"Z", b"X"):
            self._break("died")

    def abandon(self) -> None:
        """A broken template is killed, reaped and let go (its workers die with it: PR_SET_PDEATHSIG)."""
        try:
            self._template.kill()
            self._template.join(5.0)
        except ValueError:  # let go already (its death noticed again while it was being replaced)
            pass
        self._let_go()

    # ----------------------------------------------------------------- shutdown

    def shutdown(self, pids: list[int]) -> None:
        """End the template (its workers' ends were closed or stopped by the owner): it lets its
        workers go and exits; if it does not in time, it and the workers ``pids`` are killed."""
        try:
            self.ctrl.send(pickle.dumps(messages.Exit(self._kill_grace)))
        except OSError:
            pass
        self._template.join(self._kill_grace + 2.0)
        if self._template.is_alive():
            self._template.kill()
            self._template.join(2.0)
            signal_groups(pids, signal.SIGKILL)
        self._let_go()

    def _let_go(self) -> None:
        """The template is ended: its control socket closes, and nothing is left to do at collection."""
        HOST_FDS.discard(self.ctrl.fileno())
        self.ctrl.close()
        self._finalizer.detach()
        HOST_FDS.difference_update(self._process_fds)
        try:  # multiprocess's two pipes to it go too (a replaced template's would stay open in the host)
            self._template.close()
        except ValueError:  # it still runs (not reaped in time): they go with the object
            pass

    def kill(self, pids: Iterable[int]) -> None:
        """Kill the workers ``pids`` and the template at once, closing nothing (see ``ForkBackend.close``)."""
        signal_groups(pids, signal.SIGKILL)
        try:
            self._template.kill()
        except ValueError:  # its process object is closed: it ended and was reaped already
            pass


def signal_groups(pids: Iterable[int], sig: int) -> None:
    """Signal workers' process groups from the host (the template cannot: it is gone or stopped); a
    group already gone is skipped."""
    for pid in pids:
        signal_quietly(os.killpg, pid, sig)


def worker_channels() -> tuple[tuple[int, int, socket.socket], tuple[int, int, int]]:
    """A worker's three channels: the host's ends (call write fd, result read fd (non-blocking), side
    socket; listed in ``HOST_FDS``) and the worker's (call read fd, result write fd, side socket fd)."""
    call_r, call_w = os.pipe()
    result_r, result_w = os.pipe()
    try:
        import fcntl

        fcntl.fcntl(result_r, F_SETPIPE_SZ, PIPE_SIZE)  # fewer wake-ups for large results
    except OSError:
        pass
    side, side_worker = oob.side_socketpair()
    os.set_blocking(result_r, False)
    HOST_FDS.update((call_w, result_r, side.fileno()))
    return (call_w, result_r, side), (call_r, result_w, side_worker.detach())


def process_state(pid: int) -> bytes | None:
    """A process's state letter in /proc/PID/stat (Linux): T stopped, Z a zombie...; None when there is
    no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]


def _process_pipes(process: Any) -> tuple[int, ...]:
    """The host's ends of the two pipes multiprocess keeps to a process it started (its ``sentinel``, and
    the one whose EOF tells the process the host is gone): the host's own, as its channels are."""
    popen = getattr(process, "_popen", None)
    args = getattr(getattr(popen, "finalizer", None), "_args", None)  # multiprocess closes them through it
    return tuple(fd for fd in args if isinstance(fd, int) and fd >= 0) if isinstance(args, tuple) else ()


def _template_entry(ctrl: socket.socket, host_ctrl_fd: int, tools: dict[str, Any], hooks: WorkerSetup) -> None:
    close_quietly([*HOST_FDS.still_ours(), host_ctrl_fd])
    HOST_FDS.clear()
    _stdin_from_null()
    _null_event_fds()
    template_main(ctrl, tools, hooks)


def _stdin_from_null() -> None:
    """Descriptor 0 of the template, and so of every worker, is the null device, as ``sys.stdin``
    already is (multiprocess points it there, on a descriptor of its own, which goes): the host's stdin
    (the calls ``toolfork run -`` reads) is the host's, and a tool reading descriptor 0 takes nothing."""
    import sys

    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # inheritable: a program a tool starts has a stdin
    os.close(null)
    try:
        old = sys.stdin.fileno() if sys.stdin is not None else 0
    except (OSError, ValueError):
        old = 0
    if old > 2:
        close_quietly([old])
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # the process's stdin: never closed


# The asyncio loops that ran where a template was forked (an Executor made or used inside ``async``
# code): their self-pipe and epoll are the host's. Each template's copy of them is made the null device.
_LOOPS: weakref.WeakSet[Any] = weakref.WeakSet()


def _note_running_loop() -> None:
    import sys

    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return
    try:
        _LOOPS.add(asyncio.get_running_loop())
    except (RuntimeError, TypeError):
        pass


def _null_event_fds() -> None:
    """In the template: every epoll it inherited (no process below can use the host's: one that could
    would change what the host is woken for) and the self-pipe of each loop in ``_LOOPS`` (a tool
    reading it would take the loop's wake-ups) name the null device. Not closed: the host's objects the
    template copied (a loop, a selector) still hold the numbers, which must not name anything else later."""
    fds = set()
    for loop in list(_LOOPS):
        for name in ("_ssock", "_csock"):
            sock = getattr(loop, name, None)
            if sock is not None:
                fds.add(sock.fileno())
    try:
        for name in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{name}") == "anon_inode:[eventpoll]":
                    fds.add(int(name))
            except OSError:
                continue
    except OSError:
        pass
    fds = {fd for fd in fds if fd > 2}
    if fds:
        null = os.open(os.devnull, os.O_RDONLY)
        for fd in fds:
            os.dup2(null, fd, inheritable=False)
        os.close(null)


def _emergency_close(template: Any, ctrl: socket.socket) -> None:
    """Garbage-collected without close(): closing the socket makes the template kill its workers."""
    try:
        ctrl.close()
    except OSError:
        pass
    try:
        template.join(2.0)
    except Exception:
        pass


__all__ = ["HOST_FDS", "SPAWN_ACK_TIMEOUT", "TEMPLATE_CHECK_S", "LinkState", "TemplateGone", "TemplateLink",
           "process_state", "signal_groups", "worker_channels"]
