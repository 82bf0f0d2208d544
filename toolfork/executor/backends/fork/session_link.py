"""The host's side of one session's process: open it, run one call at a time on it, tell a fault, have its
checkpoint take over, snapshot its state, close it.

Why apart from the worker core: a session's calls go to one process only, one after the other, driven
by the thread that runs the session (``Session.run``); nothing is scheduled. The process is the
template's like a worker (see ``fork.session_worker``), but the core's table of workers never holds
it, so the pool's calls and the sessions never wait for each other. The fault rules are the worker
core's, reused: ``timeout_result``, ``crashed_result`` (with the wait status the supervisor reports),
``limit_result``, and the frame checks of ``wire.frames``.

    Session.run ──call frame──> session process ──result frame──> Session.run
                └─kill / resume──> supervisor ──exited / resumed / lost──┘
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import pickle
import signal
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolfork.executor import tracing
from toolfork.executor.backends.fork.limits import raise_descriptor_limit
from toolfork.executor.backends.fork.outcomes import death_result, describe_exit, timeout_result
from toolfork.executor.backends.fork.session_keeper import without_paths
from toolfork.executor.backends.fork.session_worker import ENTER, OPEN, SNAPSHOT
from toolfork.executor.backends.fork.template_link import (
    HOST_FDS,
    TEMPLATE_CHECK_S,
    TemplateLink,
    process_state,
    worker_channels,
)
from toolfork.executor.sessions.place import AFTER_RESULT, HostTools, ProcessGone, SessionSpec
from toolfork.executor.types import ErrorInfo, ToolResult
from toolfork.executor.wire import ceiling, frames, framing, oob
from toolfork.executor.wire.frames import HostCall, Leaving, Progress, Spans, damaged_result, unreadable_result
from toolfork.executor.wire.pipes import close_quietly, readable

if TYPE_CHECKING:
    from toolfork.executor.backends.fork.core import WorkerCore
    from toolfork.executor.types import ToolCall
    from toolfork.executor.wire.callitem import CallItem, TraceParent
    from toolfork.governance.limits import Limits
    from toolfork.governance.policy import Governance
    from toolfork.tools.tool import Tool

REPLY_TIMEOUT = 10.0  # how long the supervisor may take to answer (it does nothing else)
GONE_WAIT_S = 2.0  # the longest a close waits for the session's process to end (see SessionProcessLink.close)
GONE_POLL_S = 0.002
SPARES = 2  # session processes forked ahead, waiting for a session to open on them
SANDBOXED_SPARES = 1  # per sandbox: session processes that entered it ahead (three processes each)
SANDBOXES_WITH_SPARES = 4  # the sandboxes used last keep theirs
AHEAD_DELAY_S = 0.01  # a session asked for ahead (``SessionSpares.prepare``) is opened this long after

log = logging.getLogger("toolfork.executor")


class SupervisorWatch:
    """The sessions' supervisors this executor's sessions were forked by, looked at as the template is
    (``TEMPLATE_CHECK_S``; a dead one's EOF on each session's control socket is seen at once). A tool can
    stop its session's supervisor (SIGSTOP: nothing is reaped, killed or resumed then): one found stopped
    is killed, so each of its sessions sees its end (their processes die with it), and the template
    forks a new one for the next session. Looked at by every session thread that waits. Any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pids: set[int] = set()
        self._checked_at = 0.0

    def add(self, pid: int) -> None:
        with self._lock:
            self._pids.add(pid)

    def check(self, *, now: bool = False) -> bool:
        """Look (at most every ``TEMPLATE_CHECK_S`` unless ``now``); whether one was found stopped or dead."""
        at = time.monotonic()
        with self._lock:
            if not now and at < self._checked_at + TEMPLATE_CHECK_S:
                return False
            self._checked_at = at
            pids = list(self._pids)
        found = False
        for pid in pids:
            state = process_state(pid)
            found = found or state in _GONE
            if state in (b"T", b"t"):
                log.warning("the sessions' supervisor process %s was stopped (SIGSTOP, from a tool or from outside); "
                            "it is killed, its sessions are lost, and a new one serves the next sessions", pid)
                with contextlib.suppress(OSError):  # gone already: what killing it wanted
                    os.kill(pid, signal.SIGKILL)
            elif state in (None, b"Z", b"X"):
                with self._lock:
                    self._pids.discard(pid)
        return found


class Fault(Exception):
    """The session process is gone, or must go: ``result`` is the call's outcome."""

    def __init__(self, result: ToolResult | None, reason: str) -> None:
        super().__init__(reason)
        self.result = result
        self.reason = reason


class SessionProcessLink:
    """One session process (see the module docstring). One thread at a time (the session's lock)."""

    def __init__(self, core: WorkerCore, governance: Governance, kill_grace: float,
                 watch: SupervisorWatch | None = None) -> None:
        self._governance = governance
        self._limits_for: Callable[[str], Limits | None] = governance.limits_for
        self._sandbox: Limits | None = None  # a sandboxed session's Limits (set at its OPEN)
        self._kill_grace = kill_grace
        self._checkpoint = False  # its OPEN asked for checkpoints: a timed-out call's kill asks for the resume too
        self._after_result = False  # checkpoint=AFTER_RESULT (see sessions.place)
        self._resuming: tuple[int, int, socket.socket] | None = None  # the channels a kill's resume was sent
        self._watch = watch if watch is not None else SupervisorWatch()
        channels, self._ctl = core.open_session()
        self._use(channels)
        self.pid: int | None = None
        self._exit_status: int | None = None
        self._supervisor_gone = False
        self.seq = 0  # the calls this session's state has run: the next call's seq
        self.host: HostTools | None = None  # what its calls may ask the host to run (set when it opens)
        self._closed = False
        self.interrupted = False  # closed from another thread while a call ran

    def _use(self, channels: tuple[int, int, socket.socket]) -> None:
        self._call_fd, self._result_fd, side = channels
        self._side = oob.SidePort(side)
        self._reader = framing.FrameReader(self._result_fd, self._side)
        if self._sandbox is not None:  # nothing a sandboxed session's process sends is unpickled here
            self._reader.use_data_only()
        self._pending: deque[Any] = deque()

    def _drop_channels(self) -> None:
        fds = (self._call_fd, self._result_fd, self._side.sock.fileno())
        TemplateLink.forget_fds(fds)
        close_quietly(fds[:2])
        self._side.close()

    # ----------------------------------------------------------------- requests

    def open(self, blob: bytes, checkpoint: bool | str, timeout: float | None = None, sandbox: Limits | None = None,
             limits_for: Callable[[str], Limits | None] | None = None) -> ErrorInfo | None:
        """Build the state in the session process (``blob``: dill bytes of (factory, args, kwargs)); with
        ``sandbox``, the process enters that sandbox first (see ``fork.session_keeper``) and what it sends
        is read as data only from then on; ``limits_for``: a call's limits, by tool name. Returns the
        factory's error (or the sandbox's), or None; raises ``Fault`` if the process died, or, its process
        killed, with the reason "timeout" when the factory did not return within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._checkpoint = bool(checkpoint)
        self._after_result = checkpoint == AFTER_RESULT
        if limits_for is not None:
            self._limits_for = limits_for
        entered = self._sandbox is not None  # a spare that was sent ENTER ahead
        if sandbox is not None:
            if not entered:
                self._say_sandbox(sandbox)
            said = self._control(lambda m: m[0] == "sandboxing", time.monotonic() + REPLY_TIMEOUT)
            self.pid = said[1]  # the sandbox's outer: pids inside it mean nothing here, and are its to choose
            self._watch.add(said[2])
        if entered:
            error = self._reply(ENTER, deadline)[1]
            if error is not None:
                return self._error(error)
        if sandbox is not None:
            self._sandbox = sandbox  # a spare's was its sandbox less the paths, which this OPEN locks
        self._send((OPEN, blob, checkpoint) if sandbox is None else (OPEN, blob, checkpoint, sandbox))
        try:
            reply = self._reply(OPEN, deadline)
        except Fault as fault:
            if fault.reason == "timeout":
                self._stop()
            raise
        if sandbox is None:
            self.pid = reply[2]
            self._watch.add(reply[3])  # its supervisor, watched from now on
        return None if reply[1] is None else self._error(reply[1])

    def enter(self, sandbox: Limits) -> None:
        """A spare enters the sandbox of ``sandbox`` ahead of its session (``open`` reads how it went)."""
        self._say_sandbox(sandbox)
        self._send((ENTER, sandbox))

    def _say_sandbox(self, sandbox: Limits) -> None:
        """Tell the supervisor the session is sandboxed (before its process enters), and read it as data."""
        self._sandbox = sandbox
        self._reader.use_data_only()
        try:
            self._ctl.send(pickle.dumps(("sandbox", sandbox.network is False)))
        except OSError as exc:
            raise Fault(None, f"its supervisor is gone ({exc})") from None

    def _error(self, error: Any) -> ErrorInfo:
        if not isinstance(error, ErrorInfo):
            self._stop()
            raise Fault(None, f"its process answered with a {type(error).__name__} for an error")
        return error

    def snapshot(self) -> Any:
        """The state, sent back; ``Fault`` when the process died sending it (its end is known by then)."""
        try:
            self._send((SNAPSHOT,))
            reply = self._reply(SNAPSHOT)
        except Fault:
            self._await_exit()  # reaped: its checkpoint may take over
            raise
        if reply[2] is not None:
            raise RuntimeError(getattr(reply[2], "message", None) or "the session's state could not be sent")
        return reply[1]

    def call(self, item: CallItem, most: int = ceiling.DEFAULT) -> ToolResult:
        """Run one call; its result, or ``Fault`` (whose result is the call's) when the process is lost.
        ``most``: the bytes its frames may rebuild into here (its tool's ceiling, ``wire.ceiling``)."""
        call_id, name, _, timeout = item[:4]
        self._reader.ceiling = most
        start = time.monotonic()
        if self._sandbox is not None:
            self._budget(name)
        frame = frames.calls_frame([item])
        try:
            self._send(frame)
        except Fault as fault:  # its process is gone: how it ended is the call's result
            raise self._fault(fault, call_id, name, timeout, start) from None
        except Exception as exc:  # the arguments could not be sent: only this call fails
            return ToolResult(call_id, name, "error", error=ErrorInfo(
                type(exc).__name__, f"the arguments of call {call_id!r} could not be sent to the session's "
                                    f"process: {exc}"))
        deadline = None if timeout is None else start + timeout
        while True:
            try:
                f = self._next(deadline)
            except Fault as fault:
                raise self._fault(fault, call_id, name, timeout, start) from None
            msg = frames.decode(f)
            if msg is None:
                if type(f) is tuple and f and f[0] == framing.BAD_FRAME:
                    self.seq += 1
                    return unreadable_result(call_id, name, f, self.pid, time.monotonic() - start)
                raise self._damaged(call_id, name, frames.describe_shape(f), start)
            if msg.seq != self.seq:
                if msg.seq < self.seq and type(msg) is Progress:
                    continue
                raise self._damaged(call_id, name, f"a frame for call #{msg.seq} while #{self.seq} was running",
                                    start)
            if type(msg) is HostCall:  # the call asks the host to run one of the session's host tools, and waits
                self._answer(msg, call_id, name, deadline, timeout, start)
                continue
            if isinstance(msg, (Progress, Spans)):  # progress is not reported: a session's run returns results
                if type(msg) is Spans:  # the tool's own spans: to the host's exporters, as the pool's are
                    # (a sandboxed session's: data about this call, bound to its span and its time)
                    tracing.export(msg.spans, None if self._sandbox is None else tracing.CallWindow(
                        item[6], time.time_ns() - int((time.monotonic() - start) * 1e9), time.time_ns()))
                continue
            result = msg.rebuilt(call_id, name, self.pid)
            if type(msg) is Leaving:  # its tool closed the process's channels: it leaves
                self._stop()
                raise Fault(result, result.error.message if result.error else "its process left")
            self.seq += 1
            return result

    def _answer(self, msg: HostCall, call_id: str, name: str, deadline: float | None, timeout: float | None,
                start: float) -> None:
        """Run a host call of the running call ``call_id`` (of tool ``name``; see ``fork.host_line``) and send
        its answer, on the call pipe; ``Fault`` (with that call's result) when the call ends here."""
        host = self.host
        if host is None:
            answer: tuple[str, Any, str | None] = ("error", None, f"call_host({msg.name!r}): this session was "
                                                   "opened without host_tools")
        else:
            answer = host.answer(call_id, msg.name, msg.arguments,
                                 None if deadline is None else deadline - time.monotonic())
        if deadline is not None and time.monotonic() >= deadline:
            # The call's time ran out while the host worked for it: it times out now, while its process
            # still waits for the answer (it must not finish, and let its checkpoint go, as it is killed).
            raise self._fault(Fault(None, "timeout"), call_id, name, timeout, start)
        try:
            try:
                self._send(frames.host_answer_frame(*answer))
            except Fault:
                raise
            except Exception as exc:  # a value the session's process could not be sent
                self._send(frames.host_answer_frame("error", None, f"host tool {msg.name!r}: its value could not "
                                                    f"be sent to the session's process: {type(exc).__name__}: {exc}"))
        except Fault as fault:
            raise self._fault(fault, call_id, name, timeout, start) from None

    def _budget(self, name: str) -> None:
        """A sandboxed session's call with ``cpu_s``: its keeper counts the CPU of the call's processes
        from now (the word is answered before the call is sent)."""
        limits = self._limits_for(name)
        if limits is None or limits.cpu_s is None:
            return
        try:
            self._ctl.send(pickle.dumps(("budget", limits.cpu_s)))
            self._control(lambda m: m[0] == "budgeted", time.monotonic() + REPLY_TIMEOUT)
        except (OSError, Fault):
            pass  # its supervisor is gone: the call finds its process gone too

    def restore(self) -> str | None:
        """After a fault: the checkpoint takes over with fresh channels. None when it did, else why not.
        After a timeout the resume went with the kill (``_stop``): only its answer is read here."""
        ours, self._resuming = self._resuming, None
        if ours is None:
            ours, theirs = worker_channels()
            try:
                socket.send_fds(self._ctl, [pickle.dumps(("resume",))], list(theirs))
            except OSError as exc:
                self._drop_other(ours)
                return f"its supervisor is gone ({exc})"
            finally:
                for fd in theirs:
                    os.close(fd)
        try:
            reply = self._control(lambda m: m[0] in ("resumed", "lost"), time.monotonic() + REPLY_TIMEOUT)
        except Fault as fault:
            self._drop_other(ours)
            return fault.reason
        if reply[0] != "resumed":
            self._drop_other(ours)
            return str(reply[1])
        self._drop_channels()
        self._use(ours)
        self.pid = reply[1]
        self._exit_status = None
        return None

    def interrupt(self) -> None:
        """From another thread, while a call runs: the session's process is killed (the call fails, the
        session is closing). One message to the supervisor."""
        self.interrupted = True
        try:
            self._ctl.send(pickle.dumps(("kill", 0.0)))
        except OSError:
            pass

    def stirred(self) -> bool:
        """An open session waiting for its first call says nothing: whether its process or supervisor said
        something since, or ended (a session opened ahead is then not handed out)."""
        while not self._supervisor_gone and readable([self._ctl.fileno()], 0):
            self._control_message()  # (its supervisor's "forked" may wait unread since the open)
        return bool(self._pending) or self._exit_status is not None or self._supervisor_gone or bool(
            readable([self._result_fd], 0))

    def close(self, wait: bool = False) -> None:
        """The session process and its checkpoint end (the supervisor kills them at EOF of its socket).
        Once: the descriptors' numbers may name something else afterwards.

        ``wait``: return only once the session's process is gone (a zombie, or no process), at most
        ``GONE_WAIT_S``. ``max_sessions`` bounds processes, and the supervisor ends this one a moment after
        the EOF: under load a session opened right after a close could otherwise start first. (Not from a
        finalizer: that may run in any thread, at any time.)"""
        if self._closed:
            return
        self._closed = True
        self._drop_channels()
        if self._resuming is not None:
            self._drop_other(self._resuming)
            self._resuming = None
        HOST_FDS.discard(self._ctl.fileno())
        self._ctl.close()
        if wait and self.pid is not None and self.pid > 0 and not self._supervisor_gone:
            end = time.monotonic() + GONE_WAIT_S
            while process_state(self.pid) not in _GONE_FOR_GOOD and time.monotonic() < end:
                time.sleep(GONE_POLL_S)

    # ----------------------------------------------------------------- faults

    def _fault(self, fault: Fault, call_id: str, name: str, timeout: float | None, start: float) -> Fault:
        duration = time.monotonic() - start
        if fault.reason == "timeout":
            self._stop(resume=self._checkpoint and not self.interrupted)
            return Fault(timeout_result(call_id, name, timeout, self.pid, duration), "it timed out")
        status = self._await_exit()
        described = describe_exit(status) if not self._supervisor_gone else (
            "WorkerCrashed", "the session's supervisor process is gone (it, or the executor's template, died or "
                             "was stopped)")
        result = death_result(call_id, name, status, described, self._limits_for(name), self.pid, duration)
        return Fault(result, result.error.message if result.status == "error" and result.error else described[1])

    def _damaged(self, call_id: str, name: str, reason: str, start: float) -> Fault:
        self._stop()
        return Fault(damaged_result(call_id, name, reason, self.pid, time.monotonic() - start), reason)

    def _stop(self, resume: bool = False) -> None:
        """Kill the session process (SIGTERM to its group, SIGKILL after the grace) and wait for its end.
        ``resume``: the checkpoint's new channels go with the kill, and it takes over as soon as the
        process is reaped (its answer is read by ``restore``): no round trip after the end."""
        theirs: tuple[int, ...] = ()
        if resume:
            self._resuming, channels = worker_channels()
            theirs = tuple(channels)
        try:
            if theirs:  # AFTER_RESULT: the process whose checkpoint takes over is killed at once (no grace)
                grace = 0.0 if self._after_result else self._kill_grace
                socket.send_fds(self._ctl, [pickle.dumps(("kill", grace, "resume"))], list(theirs))
            else:
                self._ctl.send(pickle.dumps(("kill", self._kill_grace)))
        except OSError:
            if self._resuming is not None:
                self._drop_other(self._resuming)
                self._resuming = None
            self._orphaned()
            return
        finally:
            for fd in theirs:
                os.close(fd)
        self._await_exit()

    def _orphaned(self) -> None:
        """The supervisor is gone: the session's process died with it (PR_SET_PDEATHSIG), and what its
        calls started in its process group is killed from here (nobody else is left to)."""
        self._supervisor_gone = True
        if self.pid is not None and self.pid > 0:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def _await_exit(self) -> int | None:
        if self._exit_status is None and not self._supervisor_gone:
            try:
                self._control(lambda m: m[0] == "exited", time.monotonic() + self._kill_grace + REPLY_TIMEOUT)
            except Fault:
                pass
        return self._exit_status

    # ----------------------------------------------------------------- wire

    def _send(self, msg: Any) -> None:
        try:
            framing.send(self._call_fd, msg, self._side)
        except (BrokenPipeError, ConnectionError) as exc:
            raise Fault(None, f"is gone ({exc})") from None

    def _reply(self, kind: str, deadline: float | None = None) -> tuple[Any, ...]:
        f = self._next(deadline)
        if type(f) is tuple and f and f[0] == framing.BAD_FRAME:
            raise RuntimeError(f"the session's process sent what the host cannot rebuild: {f[1]}: {f[2]}")
        if type(f) is not tuple or not f or f[0] != kind:
            self._stop()
            raise Fault(None, f"its process answered with {frames.describe_shape(f)}")
        return f

    def _next(self, deadline: float | None) -> Any:
        """The next frame of the session process; ``Fault`` (reason "timeout" at ``deadline``, else how
        it ended) when there is none to come."""
        reader = self._reader
        while not self._pending:
            self._pending.extend(reader.read())
            if self._pending:
                break
            if reader.damaged is not None:
                self._stop()
                raise Fault(None, reader.damaged)
            if reader.eof or self._exit_status is not None or self._supervisor_gone:
                raise Fault(None, "died")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise Fault(None, "timeout")
            ready = readable([self._result_fd, self._ctl.fileno()], _slice(left))
            if self._ctl.fileno() in ready:
                self._control_message()
            self._watch.check()
        return self._pending.popleft()

    def _control(self, done: Any, deadline: float) -> tuple[Any, ...]:
        """Read the supervisor's messages until one is ``done``; ``Fault`` when it is gone or silent."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Fault(None, "its supervisor did not answer")
            if not readable([self._ctl.fileno()], _slice(left)):
                self._watch.check()
                continue
            msg = self._control_message()
            if msg is None:
                raise Fault(None, "its supervisor is gone")
            if done(msg):
                return msg

    def _control_message(self) -> tuple[Any, ...] | None:
        try:
            data = self._ctl.recv(4096)
        except OSError:
            data = b""
        if not data:
            self._orphaned()
            return None
        msg: tuple[Any, ...] = pickle.loads(data)
        if msg[0] == "exited":
            self._exit_status = msg[1]
        elif msg[0] == "forked":
            self._watch.add(msg[2])
        return msg

    @staticmethod
    def _drop_other(channels: tuple[int, int, socket.socket]) -> None:
        call_fd, result_fd, side = channels
        TemplateLink.forget_fds((call_fd, result_fd, side.fileno()))
        os.close(call_fd)
        os.close(result_fd)
        side.close()


_GONE = (None, b"Z", b"X", b"T", b"t")  # a process's states in which it serves no more (see process_state)
_GONE_FOR_GOOD = (None, b"Z", b"X")  # ... and holds nothing any more (a stopped one still does)


def _slice(left: float | None) -> float:
    """How long one wait lasts: the supervisor is looked at between waits. ``poll`` counts whole
    milliseconds, rounded up: a wait that ends at a deadline asks for the whole milliseconds below it
    (the last fraction is polled for), so the deadline is seen on time, not up to a millisecond late."""
    if left is None or left >= TEMPLATE_CHECK_S:
        return TEMPLATE_CHECK_S
    return max(0.0, (math.floor(left * 1000) - 0.5) / 1000)


class SessionSpares:
    """Session processes forked ahead (``SPARES`` of them, asked of the template when one is taken), each
    waiting for its OPEN: opening a session is then one round trip to a process that is there already,
    not two forks. A spare has the tools the template had when it forked; when the tools change, the
    spares go. Any thread.

    Sandboxed sessions get spares of their own, per sandbox (the session's ``Limits`` less its paths): once
    a session of a sandbox opened, ``SANDBOXED_SPARES`` processes are sent ENTER ahead (for the sandboxes used last,
    ``SANDBOXES_WITH_SPARES`` of them), so the next open of that sandbox finds one inside already."""

    def __init__(self, core: WorkerCore, governance: Governance, kill_grace: float) -> None:
        raise_descriptor_limit()
        self.watch = SupervisorWatch()
        self._core = core
        self._make = lambda: SessionProcessLink(core, governance, kill_grace, self.watch)
        self._lock = threading.Lock()
        self._ready: deque[SessionProcessLink] = deque()
        self._entered: dict[Limits, deque[SessionProcessLink]] = {}  # per sandbox, the one used last last
        self._ahead: _Ahead | None = None  # the one session opened ahead (``prepare``), for the spec named last
        self._to_open: deque[tuple[_Ahead, Callable[[SessionSpares], SessionProcessLink]]] = deque()
        self._wake = threading.Condition(self._lock)
        self._opener: threading.Thread | None = None  # the thread that opens them
        self._tools: object = None
        self._closed = False

    def take(self, tools: object, *, fresh: bool = False, sandbox: Limits | None = None) -> SessionProcessLink:
        """A session process with the tools ``tools`` (any value that changes when they change);
        ``fresh``: the spares are let go first (one was found dead: its template was replaced);
        ``sandbox``: one that entered that sandbox ahead, where there is one."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this executor is closed")
            pid = self._core.template_pid
            if pid is not None and process_state(pid) in _GONE:  # its spares go with it (a moment later)
                fresh = True
            if self.watch.check(now=True):  # a supervisor stopped or dead: its spares are no use
                fresh = True
            if tools != self._tools or fresh:
                self._let_go()
                self._tools = tools
            if fresh:
                self._await_template()
            if sandbox is not None:
                return self._take_entered(sandbox)
            link = self._ready.popleft() if self._ready else self._make()
            while len(self._ready) < SPARES:
                self._ready.append(self._make())
            return link

    def _take_entered(self, sandbox: Limits) -> SessionProcessLink:
        sandbox = without_paths(sandbox)  # a spare fits any paths: its OPEN locks them
        waiting = self._entered.pop(sandbox, deque())
        self._entered[sandbox] = waiting  # the sandbox used last is the last to go
        return waiting.popleft() if waiting else self._make()

    def refill(self, tools: object, sandbox: Limits) -> None:
        """After a sandboxed session's open (not before: entering takes the CPU its OPEN needs), spares
        enter that sandbox ahead for the next one; the sandboxes used longest ago let theirs go."""
        with self._lock:
            if self._closed or tools != self._tools:
                return
            sandbox = without_paths(sandbox)
            waiting = self._entered.pop(sandbox, deque())
            self._entered[sandbox] = waiting
            while len(waiting) < SANDBOXED_SPARES:
                spare = self._make()
                try:
                    spare.enter(sandbox)
                except Fault:
                    spare.close()
                    break
                waiting.append(spare)
            while len(self._entered) > SANDBOXES_WITH_SPARES:
                for old in self._entered.pop(next(iter(self._entered))):
                    old.close()

    def prepare(self, key: tuple[Any, ...], opener: Callable[[SessionSpares], SessionProcessLink],
                on_discard: Callable[[], None] | None) -> bool:
        """Open a session ahead, in a thread of its own, for the next ``take_ready(key)``: ``opener`` sends it
        its OPEN (the whole of it: the sandbox locked, the factory run) on a link from the spares. One is
        kept: another ``key`` replaces it. ``on_discard`` is called once if it is let go unused (replaced,
        failed, its executor closed). False (and no call) when this executor is closed."""
        with self._lock:
            if self._closed:
                return False
            old, self._ahead = self._ahead, _Ahead(key, on_discard)
            entry = self._ahead
        if old is not None:
            old.discard()
        with self._lock:
            if self._opener is None:  # one thread opens them, one after the other, for as long as we are open
                self._opener = threading.Thread(target=self._open_each, name="toolfork-session-ahead", daemon=True)
                self._opener.start()
            self._to_open.append((entry, opener))
            self._wake.notify()
        return True

    def _open_each(self) -> None:
        while True:
            with self._lock:
                while not self._to_open and not self._closed:
                    self._wake.wait()
                if not self._to_open:
                    return
                entry, opener = self._to_open.popleft()
            time.sleep(AHEAD_DELAY_S)  # the open that asked for it returns first, its thread not slowed by ours
            if self._ahead is entry:  # (replaced before its turn: let go below, never opened)
                self._open_ahead(entry, opener)
            else:
                entry.discard()
                entry.done.set()

    def _open_ahead(self, entry: _Ahead, opener: Callable[[SessionSpares], SessionProcessLink]) -> None:
        link: SessionProcessLink | None = None
        try:
            if not self._closed:
                link = opener(self)
        except Exception as exc:  # the open that finds none will meet the same fault, and say it
            log.debug("a session opened ahead failed: %s", exc)
        with self._lock:
            keep = link is not None and self._ahead is entry and not self._closed
            if keep:
                entry.link = link
        if not keep:
            if link is not None:
                link.close()
            with self._lock:
                if self._ahead is entry:
                    self._ahead = None
            entry.discard()
        entry.done.set()

    def take_ready(self, key: tuple[Any, ...]) -> SessionProcessLink | None:
        """The session opened ahead for ``key`` (waiting for its open if it is under way), or None. One whose
        template or supervisor is gone, or whose process spoke or ended since, is let go, not handed out."""
        with self._lock:
            entry = self._ahead
            if entry is None or entry.key != key:
                return None
        entry.done.wait(REPLY_TIMEOUT)
        with self._lock:
            if self._ahead is not entry or entry.link is None:
                return None
            self._ahead = None
            link, entry.link = entry.link, None
            pid = self._core.template_pid
            fresh = not (pid is not None and process_state(pid) in _GONE) and not self.watch.check(now=True)
        if fresh and not link.stirred():
            entry.taken = True
            return link
        link.close()
        entry.discard()
        return None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._wake.notify()
            opener, entry, self._ahead = self._opener, self._ahead, None
        if opener is not None:
            opener.join(REPLY_TIMEOUT)  # (it ends the open under way, which sees us closed and lets it go)
        with self._lock:
            waiting = [e for e, _ in self._to_open]
            self._to_open.clear()
        for left in [*waiting, *([entry] if entry is not None else [])]:
            if left.link is not None:
                left.link.close()
                left.link = None
            left.discard()
        with self._lock:
            self._let_go()

    def _await_template(self) -> None:
        """A session's process was found dead as it opened: if its template is dead or stopped, the pool
        replaces it (its watcher looks every ``TEMPLATE_CHECK_S``); the next one is asked of the new one."""
        old = self._core.template_pid
        end = time.monotonic() + REPLY_TIMEOUT
        while (old is not None and self._core.template_pid == old and time.monotonic() < end
               and process_state(old) in _GONE):
            time.sleep(0.02)

    def _let_go(self) -> None:
        while self._ready:
            self._ready.popleft().close()
        for waiting in self._entered.values():
            while waiting:
                waiting.popleft().close()
        self._entered.clear()


class _Ahead:
    """A session opened ahead (``SessionSpares.prepare``): its key, its link once open, its discard."""

    def __init__(self, key: tuple[Any, ...], on_discard: Callable[[], None] | None) -> None:
        self.key = key
        self.link: SessionProcessLink | None = None
        self.done = threading.Event()
        self.taken = False
        self._on_discard = on_discard
        self._lock = threading.Lock()

    def discard(self) -> None:
        """Let it go unused: its ``on_discard``, once (never for one handed out)."""
        with self._lock:
            call, self._on_discard = (None if self.taken else self._on_discard), None
        if call is not None:
            try:
                call()
            except Exception:
                log.exception("a discarded session's on_discard failed")


class ProcessPlace:
    """A session's state in a process of its own (see ``backends.sessions``): a session process taken
    from the spares, its factory sent to it (by reference where pickle can; a lambda or a local function
    by value, with dill), and the link's faults turned into the call's result."""

    def __init__(self, spares: SessionSpares, spec: SessionSpec, governance: Governance) -> None:
        blob = spec_blob(spec)
        self.checkpoint = spec.checkpoint
        ready = spares.take_ready(spec_key(spec, blob))
        self.ahead = ready is not None  # opened ahead (``Executor.session_ahead``): nothing left to do here
        if ready is not None:
            self._link = ready
            self._link.host = spec.host_tools
            weakref.finalize(self, self._link.close)
            return
        self._link, error = _open_link(spares, spec, blob, governance)
        self._link.host = spec.host_tools
        weakref.finalize(self, self._link.close)  # a session dropped unclosed: its processes go when it does
        sandbox = spec.limits
        if sandbox is not None:
            spares.refill(spec.tools, sandbox)
        if error is not None:
            self._link.close()
            if sandbox is not None and error.type == "LimitsNotEnforceable":
                from toolfork.governance.enforceable import SandboxUnavailable

                raise SandboxUnavailable("session", sandbox, error.message)
            raise RuntimeError(f"{error.message}\n{error.traceback or ''}".rstrip())

    @staticmethod
    def prepare(spares: SessionSpares, spec: SessionSpec, governance: Governance,
                on_discard: Callable[[], None] | None) -> bool:
        """Open a session of ``spec`` ahead, in the background, for the next ``ProcessPlace`` of an equal
        spec (the same factory and arguments, checkpoint, timeout, tools and Limits, paths included): see
        ``SessionSpares.prepare``. Its OPEN is the one an open sends, so it is as locked before its factory
        runs. False when it will not be (the executor is closed)."""
        blob = spec_blob(spec)

        def opener(spares: SessionSpares) -> SessionProcessLink:
            link, error = _open_link(spares, spec, blob, governance)
            if error is not None:
                link.close()
                raise RuntimeError(error.message)
            if spec.limits is not None:
                spares.refill(spec.tools, spec.limits)
            return link

        return spares.prepare(spec_key(spec, blob), opener, on_discard)

    @property
    def pid(self) -> int | None:
        return self._link.pid

    def call(self, call: ToolCall, tool: Tool, timeout: float | None, context: dict[str, Any],
             trace: TraceParent | None) -> tuple[ToolResult, str | None]:
        try:
            item: CallItem = (call.id, call.name, call.arguments, timeout, context or None, call.meta, trace)
            return self._link.call(item, ceiling.of(tool.max_result_mb)), None
        except Fault as fault:
            result = fault.result if fault.result is not None else ToolResult(call.id, call.name, "crashed", error=(
                ErrorInfo("WorkerCrashed", f"tool '{call.name}' crashed: the session's process {fault.reason}")))
            return result, f"it {result.status}: {result.error.message if result.error else fault.reason}"

    def restore(self) -> str | None:
        if not self.checkpoint or self._link.interrupted:
            return ""
        return self._link.restore()

    def interrupt(self) -> None:
        self._link.interrupt()

    def snapshot(self) -> Any:
        try:
            return self._link.snapshot()
        except Fault as fault:
            raise ProcessGone(f"the session's process died while sending its state: {fault.reason}") from None

    def close(self) -> None:
        self._link.close(wait=True)


def spec_blob(spec: SessionSpec) -> bytes:
    """The factory and its arguments as its process reads them: by reference where pickle can be (the
    process is a fork of this one: it has the same classes), a lambda or a local function by value."""
    try:
        return _dumps((spec.factory, spec.args, spec.kwargs))
    except Exception as exc:
        raise TypeError(f"the session's factory and its arguments cannot be sent to its process: "
                        f"{type(exc).__name__}: {exc}") from None


def spec_key(spec: SessionSpec, blob: bytes) -> tuple[Any, ...]:
    """What a session opened ahead must share with the one it is handed to: all of its spec."""
    return blob, spec.checkpoint, spec.timeout, spec.tools, spec.limits, spec.host_tools


def _open_link(spares: SessionSpares, spec: SessionSpec, blob: bytes,
               governance: Governance) -> tuple[SessionProcessLink, ErrorInfo | None]:
    """A spare sent the OPEN of ``spec``: the link, and the factory's (or the sandbox's) error or None.
    Raises ``TimeoutError`` (the factory outlived the executor's timeout) or ``RuntimeError`` (the
    process died as it was built, twice)."""
    timeout = spec.timeout  # the factory is bounded as a call of the executor is
    sandbox = spec.limits
    limits_for = None if sandbox is None else (lambda name: sandbox.merged_over(governance.limits_for(name)))
    fresh = False
    while True:  # a sandboxed session takes a spare that entered its sandbox ahead, where there is one
        link = spares.take(spec.tools, fresh=fresh, sandbox=sandbox)
        try:
            return link, link.open(blob, spec.checkpoint, timeout, sandbox, limits_for)
        except Fault as fault:
            link.close()
            if fault.reason == "timeout":
                raise TimeoutError(f"the session's factory did not return within the executor's timeout "
                                   f"({timeout:g} s); its process was killed") from None
            if fresh:
                raise RuntimeError(f"the session's process died while it was built: {fault.reason}") from None
            fresh = True  # a spare forked by a template that died since is gone: a fresh one is not
        except BaseException:
            link.close()
            raise


def _dumps(value: Any) -> bytes:
    try:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    except Exception:  # a lambda, a local function: by value
        import dill

        return dill.dumps(value)  # type: ignore[no-any-return]


__all__ = ["Fault", "ProcessPlace", "SessionProcessLink", "SessionSpares", "SupervisorWatch"]
