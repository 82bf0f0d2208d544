"""The template: a single-threaded process that forks every worker of one pool.

Why it exists: forking from a host that runs threads can copy a lock some other thread holds (the
logging module's, an allocator's, a driver's), and the child then deadlocks on it. The template is
forked from the host once, when the pool starts; afterwards the host never forks again. Every worker,
first or replacement, is forked from the template, which only ever runs this loop.

It also owns the workers as their parent: it reaps them (so there are no zombies), reports each exit
status to the host (so a crash can be named: "killed by SIGSEGV"), carries out the kill escalation of
a timed-out worker (SIGTERM to its process group, SIGKILL after the grace period) while the host goes
on, and kills every worker when the host goes away, even by SIGKILL (its control socket reaches EOF).

Control messages (host -> template, one pickle per SOCK_SEQPACKET message):
    ("spawn", wid)            + two fds (the worker's call read end, result write end)
    ("tools", seq, last, chunk)   dill bytes of {name: Tool}, in chunks, for tools added later
    ("term", pid, grace)      stop a worker: SIGTERM its group now, SIGKILL after `grace` seconds
    ("exit", grace)           end: let workers leave, SIGKILL what is left after `grace`, exit
Replies (template -> host):
    ("spawned", wid, pid)     ("exited", pid, wait_status)
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import socket
import time
from typing import Any

from toolfork.executor.backends.base import Hooks
from toolfork.executor.backends.fork_worker import worker_main

MAX_MESSAGE = 1 << 16


def template_main(ctrl: socket.socket, tools: dict[str, Any], hooks: Hooks) -> None:
    """Runs in the template process (started by multiprocess with the fork start method)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the host; it closes us
    # Everything inherited from the host goes to the collector's permanent generation: a worker's
    # collections then never walk (and so never copy-on-write) the host's objects.
    gc.freeze()
    children: set[int] = set()
    kill_at: dict[int, float] = {}

    def kill_all(sig: int) -> None:
        for pid in list(children):
            _killpg(pid, sig)

    def on_sigterm(signum: int, frame: Any) -> None:
        kill_all(signal.SIGKILL)
        _reap(children, None, block=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, on_sigterm)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    tool_chunks: list[bytes] = []
    exiting_until: float | None = None

    while True:
        timeout = None
        deadlines = list(kill_at.values()) + ([exiting_until] if exiting_until is not None else [])
        if deadlines:
            timeout = max(0.0, min(deadlines) - time.monotonic())
        try:
            watched: list[Any] = [ctrl, wake_r]
            ready, _, _ = select.select(watched, [], [], timeout)
        except InterruptedError:
            ready = []
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        _reap(children, ctrl, block=False)
        for pid in [p for p in kill_at if p not in children]:
            del kill_at[pid]
        now = time.monotonic()
        for pid, when in list(kill_at.items()):
            if now >= when:
                _killpg(pid, signal.SIGKILL)
                del kill_at[pid]
        if exiting_until is not None:
            if not children:
                os._exit(0)
            if now >= exiting_until:
                kill_all(signal.SIGKILL)
                _reap(children, None, block=True)
                os._exit(0)
        if ctrl not in ready:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(ctrl, MAX_MESSAGE, 2)
        except OSError:
            data, fds = b"", []
        if not data:  # the host is gone (closed, crashed or SIGKILLed): take every worker with us
            kill_all(signal.SIGKILL)
            _reap(children, None, block=True)
            os._exit(0)
        msg = pickle.loads(data)
        kind = msg[0]
        if kind == "spawn":
            call_fd, result_fd = fds
            pid = os.fork()
            if pid == 0:
                ctrl.close()
                os.close(wake_r)
                os.close(wake_w)
                signal.set_wakeup_fd(-1)
                worker_main(call_fd, result_fd, tools, hooks, os.getppid())
            os.close(call_fd)
            os.close(result_fd)
            children.add(pid)
            _send(ctrl, ("spawned", msg[1], pid))
        elif kind == "term":
            _, pid, grace = msg
            if pid in children:
                _killpg(pid, signal.SIGTERM)
                kill_at[pid] = time.monotonic() + grace
        elif kind == "tools":
            _, _seq, last, chunk = msg
            tool_chunks.append(chunk)
            if last:
                import dill

                tools.update(dill.loads(b"".join(tool_chunks)))
                tool_chunks.clear()
        elif kind == "exit":
            exiting_until = time.monotonic() + msg[1]
            if not children:
                os._exit(0)


def _killpg(pid: int, sig: int) -> None:
    """Signal a worker's whole process group (the worker is its leader, its tool's children share it)."""
    try:
        os.killpg(pid, sig)
        return
    except ProcessLookupError:
        pass  # no such group yet: the worker has not reached its setpgid
    except OSError:
        pass
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _reap(children: set[int], ctrl: socket.socket | None, *, block: bool) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        except InterruptedError:
            continue
        if pid == 0:
            return
        children.discard(pid)
        if ctrl is not None:
            _send(ctrl, ("exited", pid, status))


def _send(ctrl: socket.socket, msg: Any) -> None:
    try:
        ctrl.send(pickle.dumps(msg))
    except OSError:
        pass


__all__ = ["template_main"]
