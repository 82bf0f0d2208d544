"""Sessions' processes: the supervisor the template forks, each session's process that holds its state
and runs its calls, and its checkpoint.

Why a supervisor: a checkpoint is a paused fork of the session process, kept to take over when a call
crashes or hangs. When the session process dies its children go to the nearest subreaper, and the
template kills every child of its own that is not a worker. So the template forks one supervisor (a
subreaper) for the sessions: the session processes and, after such a process's death, its checkpoint
are the supervisor's, which knows them, reaps them, reports how a session process died, and hands a
checkpoint the new channels. One for all the sessions, not one each: opening a session is then one
fork, by a process that is warm already. Each session has its own control socket to it.

    host ──("session",) + channels + control──> template ──fds──> supervisor ──fork──> session process
    host ═══ calls / results (the worker's frames) ═════════════════════════════════> session process
    host <──control (per session): kill [+ channels] | resume + channels / forked, exited, resumed, lost──> supervisor
    session process ──fork (after each frame of calls)──> checkpoint (paused, its own process group)
    session process ──("checkpoint", pid) + the checkpoint's socket──> supervisor
    checkpoint ──fork (a moment after it, while it waits)──> its reserve (its own checkpoint once it took over)

Each session process is the subreaper of what its calls start; when one dies, those come to the
supervisor, which kills every child that is no live session's process or checkpoint. The supervisor
goes with the template (and with every session process and checkpoint); when the tools change the
template forks a new one for the sessions opened after, and the old one leaves after its last session.

The session process runs the worker loop (``fork.worker``) with the session's frames added: OPEN
(build the state with the factory, fork the first checkpoint) and SNAPSHOT (send the state back). A
tool reaches the state as ``runtime.state`` (``tools.runtime.SESSION_STATE``, set once here).

A checkpoint closes its copies of the channels and waits on its own socket to the supervisor: EOF
(a newer checkpoint replaced it, the session closed) ends it; three descriptors make it the session
process (they take the old channels' numbers, so the worker loop goes on with the state as it was
before the failed call).
"""

from __future__ import annotations

import errno
import os
import pickle
import select
import signal
import socket
import time
from typing import TYPE_CHECKING, Any, NoReturn

from toolfork.executor.backends.fork import forking, host_line, prefault, session_keeper
from toolfork.executor.backends.fork.host_line import HostLine
from toolfork.executor.backends.fork.limits import raise_descriptor_limit
from toolfork.executor.backends.fork.reset import reap_children
from toolfork.executor.backends.fork.worker import (
    become_subreaper,
    child_pids,
    die_with_parent,
    kill_group,
    lead_group,
    worker_main,
)
from toolfork.executor.invoke import error_info
from toolfork.executor.sessions.place import AFTER_RESULT
from toolfork.executor.types import ErrorInfo
from toolfork.executor.wire import WakePipe
from toolfork.executor.wire.frames import ChannelDamaged
from toolfork.executor.wire.pipes import close_quietly, readable
from toolfork.governance import cgroup
from toolfork.tools.runtime import SESSION_STATE

if TYPE_CHECKING:
    from toolfork.executor.backends.base import WorkerSetup
    from toolfork.executor.backends.fork.worker import Channels
    from toolfork.executor.wire import framing
    from toolfork.governance.limits import Limits

# host -> session process: (OPEN, pickle of (factory, args, kwargs), checkpoint[, sandbox Limits]); reply
# (OPEN, error, pid, supervisor)
OPEN = "O"
SNAPSHOT = "N"  # host -> session process: (SNAPSHOT,); reply (SNAPSHOT, state, error)
# host -> a spare session process: (ENTER, limits): enter that sandbox now, ahead of its OPEN, all but the
# steps that depend on its paths; reply (ENTER, error or None). The OPEN that follows carries the session's
# Limits (equal but for read_paths/write_paths): the factory is loaded, the paths locked, then it runs.
ENTER = "E"
MAX_MESSAGE = 1 << 12
KEEPER_GRACE_S = 2.0  # a sandboxed session's keeper has this long past a kill's grace before its sandbox goes
TAKEOVER_PAUSE_S = 0.02  # (checkpoint=AFTER_RESULT) how long a copy that took over waits before it forks its own
RESERVE_DELAY_S = 0.03  # how long a checkpoint waits before it forks its reserve (see _wait_as_checkpoint)
NAMED = b"n"  # a checkpoint that took over -> its reserve: you are my checkpoint now (and get your own)


class SessionProcess:
    """The session's part of the worker loop, in the session process (see ``worker.ServedSession``)."""

    def __init__(self, up: socket.socket) -> None:
        self.up = up  # to the supervisor (in a sandbox: to its keeper): each new checkpoint
        self.checkpoints = False
        self.after_result = False  # checkpoint=AFTER_RESULT: the copy from before a call goes after its result
        self.paused = True  # the next call did not come while the last checkpoint was taken (see after_frame)
        self.checkpoint: int | None = None  # the pid of the checkpoint of the state as it is now
        # (a checkpoint that took over) the copy it forked of itself as it waited, with the socket that reaches
        # it: its own checkpoint (see _wait_as_checkpoint)
        self.reserve: tuple[int, socket.socket] | None = None
        self.limits: Limits | None = None  # the sandbox's, once entered at OPEN (see fork.session_keeper)
        self.ahead: Limits | None = None  # a spare's: the sandbox entered at ENTER, less its paths (not locked)

    def handle(self, msg: tuple[Any, ...], channels: Channels, writer: framing.FrameWriter) -> None:
        kind = msg[0]
        if kind == OPEN:
            if len(msg) > 3 and msg[3] is not None:
                writer.use_data_only()  # a sandboxed session's host reads this process as data from the first
            try:  # its modules imported here, before the sandbox's paths are locked (a spare's too)
                factory, args, kwargs = _loads(msg[1])
            except Exception as exc:
                writer.send((OPEN, error_info(exc, prefix="the session's factory failed"), os.getpid(), os.getppid()))
                return
            limits = msg[3] if len(msg) > 3 else None
            if limits is not None:  # the sandbox, once, before the factory runs: everything after is inside
                self.enter(limits, channels, writer, OPEN)
            elif self.ahead is not None:  # an OPEN without its sandbox must never run a factory half inside one
                raise ChannelDamaged("an OPEN without Limits reached a spare that entered a sandbox ahead")
            try:
                SESSION_STATE.set(factory(*args, **kwargs))
            except Exception as exc:
                writer.send((OPEN, error_info(exc, prefix="the session's factory failed"), os.getpid(), os.getppid()))
                return
            host_line.LINE[0] = HostLine(channels.call_fd, writer)  # its calls' way to the host's tools (if it allows)
            writer.send((OPEN, None, os.getpid(), os.getppid()))
            self.checkpoints = bool(msg[2])
            self.after_result = msg[2] == AFTER_RESULT
            self.after_frame(channels)
        elif kind == ENTER and self.limits is None and self.ahead is None:  # a spare, ahead of its session
            self.enter(msg[1], channels, writer, ENTER)
            writer.send((ENTER, None))
        elif kind == SNAPSHOT:
            state = SESSION_STATE.get()
            try:
                writer.send((SNAPSHOT, state, None))
            except Exception as exc:
                writer.send((SNAPSHOT, None, error_info(
                    exc, prefix=f"the session's state (a {type(state).__name__}) could not be sent to the host")))
        else:
            raise ChannelDamaged(f"a frame of unknown kind {kind!r} on a session's call pipe")

    def enter(self, limits: Limits, channels: Channels, writer: framing.FrameWriter, kind: str) -> None:
        """Enter the sandbox of ``limits`` (see ``fork.session_keeper``); returns in the session process
        inside it. If it cannot be entered, the reply to ``kind`` says why and this process leaves."""
        writer.use_data_only()  # the host reads this process as data from now on (a refusal too)
        keep = (channels.call_fd, channels.result_fd, channels.side_fd)
        try:
            if kind == ENTER:  # a spare: the steps that fit any paths now, the rest at its OPEN
                session_keeper.enter_ahead(limits, keep, self.up)
                self.ahead = session_keeper.without_paths(limits)
                return
            if self.ahead is None:
                self.up = session_keeper.enter(limits, keep, self.up)
            elif session_keeper.without_paths(limits) != self.ahead:
                raise OSError(errno.EINVAL, "the session's Limits are not those its spare entered ahead "
                                            "(other than read_paths/write_paths)")
            else:
                self.up = session_keeper.finish(limits, keep, self.up)
        except OSError as exc:
            refused = ErrorInfo("LimitsNotEnforceable", f"its sandbox could not be entered: {exc}")
            writer.send((OPEN, refused, 0, 0) if kind == OPEN else (ENTER, refused))
            os._exit(0)
        self.limits = limits

    def before_result(self) -> None:
        """The call ended (it did not crash or time out): the checkpoint of the state from before it is no
        longer needed, and it goes before the result does. It is a copy of this process and holds what
        the state held then: a socket or a file lock the call closed must be free once the host has the
        call's result. The next checkpoint is forked after the result (``after_frame``). With
        ``AFTER_RESULT`` it goes there too, after the result, before the next frame is read."""
        line = host_line.LINE[0]
        if line is not None:  # the next call is the running one now (none may ask for this one any more)
            line.finished += 1
        if self.after_result:
            return
        previous, self.checkpoint = self.checkpoint, None
        if previous is not None:
            _end_checkpoint(previous)

    def after_frame(self, channels: Channels | None = None, *, hot: bool = True) -> None:
        """With checkpoints: fork a paused copy of this process (the state as it is now), hand it to the
        supervisor, let the previous one go. In the copy, this returns when it takes over."""
        if not self.checkpoints:
            return
        self._channels = channels if channels is not None else self._channels
        # The previous copy holds an older state: it is killed first (it exits while this one forks) and
        # reaped once the new one is named, so no call runs while it is alive, and none can take it over.
        previous, self.checkpoint = self.checkpoint, None

        def called() -> bool:  # the next call is here: what is left to do before reading it is not copied ahead
            return bool(readable([self._channels.call_fd], 0))

        # the pages written since the last fork (see fork.prefault), unless the next call is here already
        # (``hot``: False for a copy that just took over: every page is its own then, none is known hot)
        # (nor after a frame whose copying ahead the next call cut short: they come back to back)
        runs = prefault.hot_runs() if hot and self.after_result and self.paused and not called() else []
        if previous is not None:
            kill_group(previous)  # with the reserve it forked (see _wait_as_checkpoint)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = forking.fork(forking.KEEP_ALL)  # the state's own descriptors are part of its copy
        except OSError:  # no room for a copy (a process bound its calls filled): none until the next frame
            ours.close()
            theirs.close()
            _reap_checkpoint(previous)
            return
        if pid == 0:
            ours.close()
            self._wait_as_checkpoint(theirs)
            if self.after_result:  # the failed call's error goes first: the rest waits for the next call, or a moment
                came = readable([self._channels.call_fd], TAKEOVER_PAUSE_S)
                if self._take_reserve():  # its checkpoint is there already: no fork before the next call
                    if not came:  # and this frame's hot pages are copied ahead
                        self.paused = prefault.copy_ahead(runs, called) and not called()
                    return
            self.after_frame(hot=False)  # taken over: a checkpoint of its own before the next call, too
            return
        lead_group(pid)  # before this process runs another call (a timeout kills this one's group)
        theirs.close()
        try:
            socket.send_fds(self.up, [b"c%d" % pid], [ours.fileno()])
        finally:
            ours.close()
        self.checkpoint = pid
        _reap_checkpoint(previous)
        self.paused = prefault.copy_ahead(runs, called) and not called()

    _channels: Channels

    def _wait_as_checkpoint(self, sock: socket.socket) -> None:
        """A checkpoint waits on ``sock`` (to the supervisor, or the keeper): three descriptors make it the
        session process (this returns), EOF ends it. Where ``_reserves`` says so, once it has waited
        ``RESERVE_DELAY_S`` (a model's turn, or a call that runs longer) it forks its reserve: a copy of
        itself as it waits, so of the state the checkpoint holds and of nothing later, which becomes its
        own checkpoint if it takes over (``_take_reserve``), so that no fork stands between a rollback and
        the next call. The reserve is in its group (a kill of the checkpoint is a kill of both), holds none
        of the channels, and waits on a socket of its own for ``NAMED`` (then it waits here as a
        checkpoint, its socket handed to the supervisor) or EOF (this one ended: so does it)."""
        os.setpgid(0, 0)  # the session process's group is killed at a timeout: not its checkpoint
        numbers = (self._channels.call_fd, self._channels.result_fd, self._channels.side_fd)
        for fd in numbers:
            os.close(fd)  # the host must see EOF when the session process dies
        reserve: tuple[int, socket.socket] | None = None
        while reserve is None and self._reserves() and not readable([sock.fileno()], RESERVE_DELAY_S):
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                pid = forking.fork(forking.KEEP_ALL)
            except OSError:  # no room for it: a copy that takes over forks its checkpoint then
                ours.close()
                theirs.close()
                break
            if pid == 0:  # the reserve
                ours.close()
                sock.close()
                sock = theirs
                try:
                    named = sock.recv(16) == NAMED
                except OSError:
                    named = False
                if not named:
                    os._exit(0)
                continue  # a checkpoint now: it gets a reserve of its own in turn
            theirs.close()
            reserve = (pid, ours)
        try:
            _data, fds = forking.recv_fds(sock, 16, 3)
        except OSError:
            fds = []
        sock.close()
        if len(fds) != 3:
            close_quietly(fds)
            os._exit(0)  # (its reserve sees EOF, if the kill of its group did not end it already)
        for new, old in zip(fds, numbers, strict=True):
            os.dup2(new, old, inheritable=False)
            os.close(new)
        die_with_parent()  # the supervisor's now
        become_subreaper()  # as the session process was: what its calls start, and its checkpoint's reserve
        self.reserve = reserve

    def _reserves(self) -> bool:
        """Whether a checkpoint forks a reserve as it waits: with ``AFTER_RESULT`` (the copy from before a
        call goes after its result, not before it), unless its sandbox counts processes (``processes``:
        the reserve would be one more, and take a place of the calls')."""
        return self.after_result and (self.limits is None or self.limits.processes is None)

    def _take_reserve(self) -> bool:
        """Just after taking over: the reserve this process forked as it waited becomes its checkpoint
        (named to the supervisor as a forked one is). False when there is none, or it is gone."""
        reserve, self.reserve = self.reserve, None
        if reserve is None:
            return False
        pid, sock = reserve
        try:
            alive = os.waitpid(pid, os.WNOHANG)[0] == 0  # (one that died is reaped here: its pid is not signalled)
        except OSError:
            alive = False
        try:
            if alive:
                lead_group(pid)  # before this process runs a call (a timeout kills this one's group)
                sock.send(NAMED)  # (before the supervisor can send it anything)
                socket.send_fds(self.up, [b"c%d" % pid], [sock.fileno()])
                self.checkpoint = pid
                return True
        except OSError:
            _end_checkpoint(pid)
        finally:
            sock.close()
        return False


def _end_checkpoint(pid: int) -> None:
    """A paused checkpoint copy goes, with the reserve it forked (in its group: ``kill_group``): killed
    and reaped (one already gone is no error)."""
    kill_group(pid)
    _reap_checkpoint(pid)


def _reap_checkpoint(pid: int | None) -> None:
    """Reap a killed checkpoint, then the reserve of its group (killed with it), which comes to this
    process (a subreaper) as the checkpoint exits: neither outlives this call."""
    if pid is None:
        return
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass
    while True:
        try:
            os.waitpid(-pid, 0)
        except OSError:  # (ChildProcessError: none is left in its group)
            return


def _loads(blob: bytes) -> Any:
    """The factory and its arguments, as the host wrote them: by reference with pickle, or by value with
    dill (a lambda, a local function), which only dill reads back (its pickles name dill's own loaders
    under Python 2's module names)."""
    try:
        return pickle.loads(blob)
    except Exception:
        import dill

        return dill.loads(blob)


def supervise_sessions(mux_fd: int, tools: dict[str, Any], hooks: WorkerSetup) -> NoReturn:
    """The sessions' supervisor, forked by the template once (again after its tools change): forks a
    session process for each session the template hands it, and serves each session's control socket.
    Ends when the template closes ``mux_fd`` and no session is left, or with the template. Never returns."""
    try:
        _Supervisor(socket.socket(fileno=mux_fd), tools, hooks).serve()
    finally:
        cgroup.remove_all()  # sandboxed sessions' cgroups (under this process's pid)
        os._exit(0)


class _Session:
    """The supervisor's view of one session: its control socket, the socket its process names each new
    checkpoint on, its process, its checkpoint, and when a kill turns into SIGKILL."""

    __slots__ = ("checkpoint", "ctl", "kill_at", "resume_fds", "running", "sandboxed", "up")

    def __init__(self, ctl: socket.socket, up: socket.socket, running: int) -> None:
        self.ctl = ctl
        self.up = up
        self.running: int | None = running
        self.checkpoint: tuple[int, socket.socket] | None = None
        self.kill_at: float | None = None
        self.resume_fds: list[int] | None = None  # a kill's resume: the checkpoint's channels, once reaped
        # Said by the host before the session's OPEN: ``up`` then reaches its keeper, and ``running`` is
        # its sandbox's outer for the session's whole life (see fork.session_keeper)
        self.sandboxed = False

    def sockets(self) -> list[socket.socket]:
        return [self.ctl, self.up, *([self.checkpoint[1]] if self.checkpoint else [])]


class _Supervisor:
    """See ``supervise_sessions`` and the module docstring. One thread; every socket non-blocking where
    it is drained in a loop."""

    def __init__(self, mux: socket.socket, tools: dict[str, Any], hooks: WorkerSetup) -> None:
        self.mux: socket.socket | None = mux
        self.tools = tools
        self.hooks = hooks
        self.by_ctl: dict[int, _Session] = {}
        self.by_up: dict[int, _Session] = {}
        self.wake = WakePipe()

    def serve(self) -> None:
        os.setpgid(0, 0)
        signal.signal(signal.SIGTERM, lambda *_: self.kill_everything())
        # The template's death is a SIGTERM here, not a SIGKILL: the supervisor kills every session's
        # process and, as they come to it, what those started (a factory's daemon too), then leaves.
        die_with_parent(signal.SIGTERM)
        if os.getppid() == 1 or not os.path.exists(f"/proc/{os.getppid()}"):  # it died before the prctl
            self.kill_everything()
        become_subreaper()
        raise_descriptor_limit()  # two or three descriptors a session here
        signal.set_wakeup_fd(self.wake.write_fd)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        while self.mux is not None or self.by_ctl:
            deadlines = [s.kill_at for s in self.by_ctl.values() if s.kill_at is not None]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            poller = select.poll()  # not select(): hundreds of sessions pass its 1024 descriptors
            for fd in (self.wake.fd, *self.by_ctl, *self.by_up, *([self.mux.fileno()] if self.mux else [])):
                poller.register(fd, select.POLLIN)
            try:
                ready = {fd for fd, _ in poller.poll(None if timeout is None else timeout * 1000)}
            except InterruptedError:
                ready = set()
            if self.wake.fd in ready:
                self.wake.drain()
            # What a session process said before reaping it: it may have named a new checkpoint and died.
            for fd in ready & self.by_up.keys():
                self.read_checkpoints(self.by_up[fd])
            self.reap()
            now = time.monotonic()
            for s in self.by_ctl.values():
                if s.kill_at is not None and s.running is not None and now >= s.kill_at:
                    kill_group(s.running)
                    s.kill_at = None
            if self.mux is not None and self.mux.fileno() in ready:
                self.open_one()
            for fd in ready & self.by_ctl.keys():
                told = self.by_ctl.get(fd)  # (ended by an earlier message of this round: gone)
                if told is not None:
                    self.control(told)

    def open_one(self) -> None:
        """The template handed over a session: its three channels and its control socket."""
        assert self.mux is not None
        try:
            data, fds = forking.recv_fds(self.mux, 16, 4)
        except OSError:
            data, fds = b"", []
        if not data:  # the template closed it (its tools changed, it is closing, or it died)
            self.mux.close()
            self.mux = None
            return
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            return
        up, down = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        me = os.getpid()

        def cleanup() -> None:  # the supervisor's sockets, closed by their objects (see fork.forking)
            self.wake.close()
            for other in self.by_ctl.values():
                for sock in other.sockets():
                    sock.close()
            if self.mux is not None:
                self.mux.close()
            up.close()

        # The session process: its three channels and its socket to us; nothing of the other sessions.
        pid = forking.fork([*fds[:3], down.fileno()], cleanup)
        if pid == 0:
            worker_main(fds[0], fds[1], fds[2], self.tools, self.hooks, me, session=SessionProcess(down))
        for fd in fds[:3]:
            os.close(fd)
        down.close()
        up.setblocking(False)  # (socket.recv_fds ignores its flags before Python 3.13)
        s = _Session(socket.socket(fileno=fds[3]), up, pid)
        self.by_ctl[s.ctl.fileno()] = s
        self.by_up[up.fileno()] = s
        _send(s.ctl, ("forked", pid, me))  # the host watches its sessions' supervisor (stopped, dead)

    def read_checkpoints(self, s: _Session) -> None:
        """What a session's process says (b"c<pid>" and its new checkpoint's socket), or a sandboxed
        session's keeper (``_keeper_word``); read as words, never unpickled."""
        for data, got in session_keeper.words(s.up, MAX_MESSAGE):
            if not data:  # its process and checkpoints are gone: nothing more will come (poll would spin)
                self.by_up.pop(s.up.fileno(), None)
                close_quietly(got)
                return
            if s.sandboxed:
                close_quietly(got)
                self._keeper_word(s, data)
                continue
            named = session_keeper.checkpoint_named(data, got)
            if named is not None:
                if s.checkpoint is not None:
                    s.checkpoint[1].close()
                s.checkpoint = named

    @staticmethod
    def _keeper_word(s: _Session, data: bytes) -> None:
        """A sandboxed session's keeper said: b"x<status>" its session process ended, b"r" its checkpoint
        took over, b"l<why>" it could not, b"b" a call's CPU budget is set. Told the host in its words;
        the pid the host knows stays the outer's."""
        word, rest = data[:1], data[1:]
        if word == b"x":
            status = session_keeper.word_int(rest)
            if status is not None and 0 <= status < 1 << 16:
                s.kill_at = None
                _send(s.ctl, ("exited", status))
        elif word == b"r":
            _send(s.ctl, ("resumed", s.running))
        elif word == b"l":
            _send(s.ctl, ("lost", rest[:300].decode("ascii", errors="replace")))
        elif word == b"b":
            _send(s.ctl, ("budgeted",))

    def reap(self) -> None:
        """Reap what died; tell a session its process's end. Whatever died, what it started (handed to
        us now) goes too, and so does what that started in turn, as it comes."""
        reaped = reap_children()
        if not reaped:
            return
        for s in list(self.by_up.values()):  # a dead process's last word (its newest checkpoint) is in by now
            self.read_checkpoints(s)
        for dead, status in reaped:
            for s in self.by_ctl.values():
                if dead == s.running:
                    s.running, s.kill_at = None, None
                    _send(s.ctl, ("exited", status))
                    if s.sandboxed:
                        cgroup.remove(dead)  # its sandbox's cgroup, now empty
                    elif s.resume_fds is not None:  # the kill came with its resume: the checkpoint takes over
                        fds, s.resume_fds = s.resume_fds, None
                        self.resume(s, fds)
                elif s.checkpoint is not None and dead == s.checkpoint[0]:
                    s.checkpoint[1].close()
                    s.checkpoint = None
        self.kill_leftovers()

    def kill_leftovers(self) -> None:
        """Children that are no session's process or checkpoint came from a dead session process (each
        live one is the subreaper of what its own calls start): they go. The children are listed first,
        and what the sessions' processes said is read after: a child is ours once its parent is gone, and
        a process says everything it says (the checkpoint it forked last) before it goes. Read before the
        list, a checkpoint named and orphaned in between would be taken for a leftover and killed, and its
        session lost at its next crash."""
        children = child_pids()
        for s in list(self.by_up.values()):
            self.read_checkpoints(s)
        keep = {p for s in self.by_ctl.values() for p in (s.running, s.checkpoint[0] if s.checkpoint else None)}
        for p in children:
            if p not in keep:
                kill_group(p)

    def control(self, s: _Session) -> None:
        try:
            data, got = forking.recv_fds(s.ctl, MAX_MESSAGE, 3)
        except OSError:
            data, got = b"", []
        if not data:  # the host closed the session: its processes go
            self.end(s)
            return
        msg = pickle.loads(data)  # the host's
        if s.sandboxed or msg[0] == "sandbox":
            self.to_keeper(s, msg, got)
        elif msg[0] == "kill" and s.running is not None:
            try:
                os.killpg(s.running, signal.SIGTERM)
            except OSError:
                pass
            s.kill_at = time.monotonic() + msg[1]
            if len(msg) > 2:  # with its resume: the checkpoint takes over at the reap
                if len(got) == 3:
                    s.resume_fds, got = got, []
                else:
                    _send(s.ctl, ("lost", "its checkpoint's channels did not come with the kill"))
        elif msg[0] == "resume" or (msg[0] == "kill" and len(msg) > 2):  # (a kill's resume, its process gone)
            self.resume(s, got)
            got = []
        for fd in got:
            os.close(fd)

    @staticmethod
    def resume(s: _Session, fds: list[int]) -> None:
        """The session's checkpoint takes over with the channels ``fds`` (closed here), its answer told."""
        try:
            if s.running is None and s.checkpoint is not None:
                try:
                    socket.send_fds(s.checkpoint[1], [b"go"], fds)
                    s.running = s.checkpoint[0]
                    _send(s.ctl, ("resumed", s.running))
                except OSError as exc:
                    _send(s.ctl, ("lost", f"its checkpoint could not take over: {exc}"))
                s.checkpoint[1].close()
                s.checkpoint = None
            else:
                _send(s.ctl, ("lost", "it has no checkpoint to take over" if s.running is None
                                      else "its process is still running"))
        finally:
            for fd in fds:
                os.close(fd)

    @staticmethod
    def to_keeper(s: _Session, msg: tuple[Any, ...], got: list[int]) -> None:
        """The host's word for a sandboxed session, passed on to its keeper (see fork.session_keeper);
        ``sandbox`` itself comes first, before the session's OPEN."""
        kind = msg[0]
        if kind == "sandbox":
            s.sandboxed = True
            _send(s.ctl, ("sandboxing", s.running, os.getpid()))
            _prepare_sandbox(bool(msg[1]) if len(msg) > 1 else True)
            return
        if s.running is None:  # its sandbox is gone: every process of it
            if kind == "resume" or (kind == "kill" and len(msg) > 2):
                _send(s.ctl, ("lost", "its sandbox is gone, and its checkpoint with it"))
            elif kind == "budget":
                _send(s.ctl, ("budgeted",))
            return
        try:
            if kind == "kill" and len(msg) > 2:  # with its resume: the keeper resumes at the reap
                socket.send_fds(s.up, [b"K%r" % float(msg[1])], got)
                s.kill_at = time.monotonic() + float(msg[1]) + KEEPER_GRACE_S
            elif kind == "kill":
                s.up.send(b"k%r" % float(msg[1]))
                # the keeper ends the session process; if it does not, the whole sandbox goes
                s.kill_at = time.monotonic() + float(msg[1]) + KEEPER_GRACE_S
            elif kind == "resume":
                socket.send_fds(s.up, [b"r"], got)
            elif kind == "budget":
                s.up.send(b"b%r" % float(msg[1]))
        except OSError:
            kill_group(s.running)

    def end(self, s: _Session) -> None:
        for p in (s.running, s.checkpoint[0] if s.checkpoint else None):
            if p is not None:
                kill_group(p)
        for fd in s.resume_fds or ():
            os.close(fd)
        del self.by_ctl[s.ctl.fileno()]
        self.by_up.pop(s.up.fileno(), None)
        for sock in s.sockets():
            sock.close()

    def kill_everything(self) -> NoReturn:
        for s in self.by_ctl.values():
            for p in (s.running, s.checkpoint[0] if s.checkpoint else None):
                if p is not None:
                    kill_group(p)
        for p in child_pids():
            kill_group(p)
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                cgroup.remove_all()
                os._exit(0)
            except InterruptedError:
                continue
            for p in child_pids():
                kill_group(p)


def _prepare_sandbox(no_network: bool) -> None:
    """Build the sandbox's seccomp filter and find the cgroup mounts here, once, so the session processes
    forked from now on enter their sandbox without (a failure is the sandbox's to report, when entered)."""
    from toolfork.governance import seccomp

    cgroup.mount_points()
    cgroup.hierarchy()
    try:
        seccomp.prepare(no_network)
    except OSError:
        pass


def _send(ctl: socket.socket, msg: Any) -> None:
    try:
        ctl.send(pickle.dumps(msg))
    except OSError:
        pass


__all__ = ["ENTER", "OPEN", "SNAPSHOT", "SessionProcess", "supervise_sessions"]
