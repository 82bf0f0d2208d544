"""A session's processes: the supervisor the template forks, the session process that holds the state
and runs the calls, and its checkpoint.

Why a supervisor: a checkpoint is a paused fork of the session process, kept to take over when a call
crashes or hangs. When the session process dies its children go to the nearest subreaper, and the
template kills every child of its own that is not a worker. So the template forks one supervisor per
session (a subreaper): the session process and, after its death, its checkpoint are the supervisor's,
which knows them, reaps them, reports how the session process died, and hands a checkpoint the new
channels.

    host ──("session",) + channels + control──> template ──fork──> supervisor ──fork──> session process
    host ═══ calls / results (the worker's frames) ═════════════════════════════════> session process
    host <──control: kill | resume + channels / exited, resumed, lost──> supervisor
    session process ──fork (after each frame of calls)──> checkpoint (paused, its own process group)
    session process ──("checkpoint", pid) + the checkpoint's socket──> supervisor

The session process runs the worker loop (``fork.worker``) with the session's frames added: OPEN
(build the state with the factory, fork the first checkpoint) and SNAPSHOT (send the state back). A
tool reaches the state as ``runtime.state`` (``tools.runtime.SESSION_STATE``, set once here).

A checkpoint closes its copies of the channels and waits on its own socket to the supervisor: EOF
(a newer checkpoint replaced it, the session closed) ends it; three descriptors make it the session
process (they take the old channels' numbers, so the worker loop goes on with the state as it was
before the failed call).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import time
from typing import TYPE_CHECKING, Any, NoReturn

from toolfork.executor.backends.fork.worker import become_subreaper, child_pids, die_with_parent, worker_main
from toolfork.executor.invoke import error_info
from toolfork.executor.wire import WakePipe
from toolfork.executor.wire.frames import ChannelDamaged
from toolfork.tools.runtime import SESSION_STATE

if TYPE_CHECKING:
    from toolfork.executor import framing
    from toolfork.executor.backends.base import Hooks
    from toolfork.executor.backends.fork.worker import Channels

OPEN = "O"  # host -> session process: (OPEN, pickle of (factory, args, kwargs), checkpoint); reply (OPEN, error, pid)
SNAPSHOT = "N"  # host -> session process: (SNAPSHOT,); reply (SNAPSHOT, state, error)
MAX_MESSAGE = 1 << 12


class SessionProcess:
    """The session's part of the worker loop, in the session process (see ``worker.ServedSession``)."""

    def __init__(self, up: socket.socket) -> None:
        self.up = up  # to the supervisor: each new checkpoint
        self.checkpoints = False
        self.checkpoint: int | None = None  # the pid of the checkpoint of the state as it is now

    def handle(self, msg: tuple[Any, ...], channels: Channels, writer: framing.FrameWriter) -> None:
        kind = msg[0]
        if kind == OPEN:
            try:
                factory, args, kwargs = pickle.loads(msg[1])  # dill's output too (it names its loaders)
                SESSION_STATE.set(factory(*args, **kwargs))
            except Exception as exc:
                writer.send((OPEN, error_info(exc, prefix="the session's factory failed"), os.getpid()))
                return
            writer.send((OPEN, None, os.getpid()))
            self.checkpoints = bool(msg[2])
            self.after_frame(channels)
        elif kind == SNAPSHOT:
            state = SESSION_STATE.get()
            try:
                writer.send((SNAPSHOT, state, None))
            except Exception as exc:
                writer.send((SNAPSHOT, None, error_info(
                    exc, prefix=f"the session's state (a {type(state).__name__}) could not be sent to the host")))
        else:
            raise ChannelDamaged(f"a frame of unknown kind {kind!r} on a session's call pipe")

    def after_frame(self, channels: Channels | None = None) -> None:
        """With checkpoints: fork a paused copy of this process (the state as it is now), hand it to the
        supervisor, let the previous one go. In the copy, this returns when it takes over."""
        if not self.checkpoints:
            return
        self._channels = channels if channels is not None else self._channels
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            self.checkpoint = None
            self._wait_as_checkpoint(theirs)
            self.after_frame()  # taken over: a checkpoint of its own before the next call, too
            return
        try:  # its own group before this process runs another call (a timeout kills this one's group)
            os.setpgid(pid, pid)
        except OSError:
            pass
        theirs.close()
        try:
            socket.send_fds(self.up, [pickle.dumps(("checkpoint", pid))], [ours.fileno()])
        finally:
            ours.close()
        previous, self.checkpoint = self.checkpoint, pid
        if previous is not None:
            try:
                os.kill(previous, signal.SIGKILL)
                os.waitpid(previous, 0)
            except OSError:
                pass

    _channels: Channels

    def _wait_as_checkpoint(self, sock: socket.socket) -> None:
        os.setpgid(0, 0)  # the session process's group is killed at a timeout: not its checkpoint
        numbers = (self._channels.call_fd, self._channels.result_fd, self._channels.side_fd)
        for fd in numbers:
            os.close(fd)  # the host must see EOF when the session process dies
        try:
            _data, fds, _flags, _addr = socket.recv_fds(sock, 16, 3)
        except OSError:
            fds = []
        sock.close()
        if len(fds) != 3:
            os._exit(0)
        for new, old in zip(fds, numbers, strict=True):
            os.dup2(new, old, inheritable=False)
            os.close(new)
        die_with_parent()  # the supervisor's now


def supervise_session(fds: tuple[int, int, int], ctl_fd: int, tools: dict[str, Any], hooks: Hooks) -> NoReturn:
    """The supervisor, forked by the template: forks the session process, then serves the host's control
    messages until the host closes its end (or the template goes). Never returns."""
    try:
        _supervise(fds, ctl_fd, tools, hooks)
    finally:
        os._exit(0)


def _supervise(fds: tuple[int, int, int], ctl_fd: int, tools: dict[str, Any], hooks: Hooks) -> None:
    os.setpgid(0, 0)
    die_with_parent()
    become_subreaper()
    ctl = socket.socket(fileno=ctl_fd)
    up, down = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    me = os.getpid()
    pid = os.fork()
    if pid == 0:
        ctl.close()
        up.close()
        worker_main(*fds, tools, hooks, me, session=SessionProcess(down))
    for fd in fds:
        os.close(fd)
    down.close()
    up.setblocking(False)  # (socket.recv_fds ignores its flags before Python 3.13)
    running: int | None = pid  # the session process
    checkpoint: tuple[int, socket.socket] | None = None
    kill_at: float | None = None

    def kill_everything() -> NoReturn:
        for p in [running, checkpoint[0] if checkpoint else None, *child_pids()]:
            if p is not None:
                _kill(p)
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                os._exit(0)
            except InterruptedError:
                continue
            for p in child_pids():
                _kill(p)

    signal.signal(signal.SIGTERM, lambda *_: kill_everything())
    wake = WakePipe()
    signal.set_wakeup_fd(wake.write_fd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    watched: list[Any] = [ctl, up, wake.fd]
    while True:
        timeout = None if kill_at is None else max(0.0, kill_at - time.monotonic())
        try:
            ready = select.select(watched, [], [], timeout)[0]
        except InterruptedError:
            ready = []
        if wake.fd in ready:
            wake.drain()
        # Read what the session process said before reaping it: it may have named a new checkpoint and died.
        while up in watched:
            try:
                data, got, _flags, _addr = socket.recv_fds(up, MAX_MESSAGE, 1)
            except BlockingIOError:
                break
            except OSError:
                data, got = b"", []
            if not data:
                watched.remove(up)
            elif got:
                if checkpoint is not None:
                    checkpoint[1].close()
                checkpoint = (pickle.loads(data)[1], socket.socket(fileno=got[0]))
        while True:  # reap
            try:
                dead, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if dead == 0:
                break
            if dead == running:
                running, kill_at = None, None
                _send(ctl, ("exited", status))
                keep = checkpoint[0] if checkpoint else None
                for p in child_pids():  # what the dead process's calls started
                    if p != keep:
                        _kill(p)
            elif checkpoint is not None and dead == checkpoint[0]:
                checkpoint[1].close()
                checkpoint = None
        if kill_at is not None and running is not None and time.monotonic() >= kill_at:
            _kill(running)
            kill_at = None
        if ctl in ready:
            try:
                data, got, _flags, _addr = socket.recv_fds(ctl, MAX_MESSAGE, 3)
            except OSError:
                data, got = b"", []
            if not data:
                kill_everything()
            msg = pickle.loads(data)
            if msg[0] == "kill" and running is not None:
                try:
                    os.killpg(running, signal.SIGTERM)
                except OSError:
                    pass
                kill_at = time.monotonic() + msg[1]
            elif msg[0] == "resume":
                if running is None and checkpoint is not None:
                    try:
                        socket.send_fds(checkpoint[1], [b"go"], got)
                        running = checkpoint[0]
                        _send(ctl, ("resumed", running))
                    except OSError as exc:
                        _send(ctl, ("lost", f"its checkpoint could not take over: {exc}"))
                    checkpoint[1].close()
                    checkpoint = None
                else:
                    _send(ctl, ("lost", "it has no checkpoint to take over" if running is None
                                else "its process is still running"))
            for fd in got:
                os.close(fd)


def _kill(pid: int) -> None:
    """SIGKILL a process and its group (a session process leads its own, and so does a checkpoint)."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _send(ctl: socket.socket, msg: Any) -> None:
    try:
        ctl.send(pickle.dumps(msg))
    except OSError:
        pass


__all__ = ["OPEN", "SNAPSHOT", "SessionProcess", "supervise_session"]
