"""A sandboxed session: its process enters the sandbox once, when it opens, and a keeper inside holds it.

Why a keeper: the sandbox is a PID namespace, and when its first process (PID 1) ends the kernel kills
every process in it. A session's checkpoint must outlive the session process it copies (it takes over
when that process crashed, timed out or hit a limit), so the session process cannot be PID 1. The
process that enters the sandbox becomes the keeper instead: PID 1 of the namespace, it forks the
session process and stays, running no tool code, to reap it, kill what it leaves behind, hand the
checkpoint its channels, and stop a call whose processes together used their CPU budget (from the
session's cgroup). Nothing it is told from inside the sandbox is unpickled, there or outside::

    supervisor ──fork──> session process ── OPEN(limits) ──> sandbox.enter ──> outer (waits, outside)
                                                                   └──> keeper (PID 1, in the sandbox)
                                                                          └──fork──> session process
                                                                                        └──fork──> checkpoint
    host ═══ calls / results (data only) ════════════════════════════════════════> session process
    host ──ctl: sandbox, kill, resume, budget──> supervisor ──b"k" (b"K"+fds) b"r"+fds b"b"──> keeper
                                             <── exited, resumed, lost, budgeted ── b"x" b"r" b"l" b"b"
    session process ──b"c<pid>" + the checkpoint's socket──> keeper

The supervisor knows the outer's pid only (pids inside the namespace mean nothing outside, and are
the sandbox's to lie about). Closing the session kills the outer; the keeper dies with it
(``PR_SET_PDEATHSIG``), and with the keeper every process of the sandbox.
"""

from __future__ import annotations

import ctypes
import math
import os
import select
import signal
import socket
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from toolfork.executor.backends.fork import forking
from toolfork.executor.backends.fork.reset import reap_children
from toolfork.executor.backends.fork.worker import become_subreaper, child_pids, kill_group, lead_group
from toolfork.executor.wire.pipes import close_quietly
from toolfork.governance import sandbox as sandboxing
from toolfork.governance.limits import MAX_CPU_S, Limits
from toolfork.governance.rlimits import CGROUP_OOM_EXIT

if TYPE_CHECKING:
    from toolfork.governance.cgroup import CallGroup

# Processes of a sandboxed session besides its calls': the session process and its checkpoint (the one
# from before a call ends before the next is forked; the keeper is the "1" the sandbox counts for itself;
# a checkpoint forks no reserve where ``processes`` is set: see session_worker.SessionProcess._reserves).
OWN_PROCESSES = 2
CPU_POLL_S = 0.02  # how often the keeper looks at the CPU a call's processes used, while they use some
IDLE_POLL_S = 0.32  # ... doubling up to this while they use none (a session waiting between calls)
MAX_WORD = 4096
PR_SET_DUMPABLE = 4


def sandbox_of(limits: Limits) -> Limits:
    """The sandbox a session with ``limits`` enters: ``processes`` counts the session's own processes
    too; ``cpu_s`` is the keeper's, per call, so the sandbox's outer gets none (it would count the whole
    session), unless nothing else makes the session a cgroup (then a budget it never reaches)."""
    change: dict[str, Any] = {}
    if limits.processes is not None:
        change["processes"] = limits.processes + OWN_PROCESSES
    if limits.cpu_s is not None:
        change["cpu_s"] = None if limits.memory_mb is not None or limits.processes is not None else float(MAX_CPU_S)
    return limits.model_copy(update=change) if change else limits


def without_paths(limits: Limits) -> Limits:
    """What a spare enters ahead of its session (``enter_ahead``): ``limits`` less read_paths and
    write_paths, which ``finish`` applies at OPEN. Sessions whose Limits differ only there share spares."""
    if limits.read_paths is None and limits.write_paths is None:
        return limits
    return limits.model_copy(update={"read_paths": None, "write_paths": None})


def enter(limits: Limits, keep: tuple[int, ...], down: socket.socket) -> socket.socket:
    """In the session process, at OPEN: enter the sandbox of ``limits`` (keeping the descriptors
    ``keep`` and the supervisor's socket ``down``), fork the keeper's session process and return in it,
    with the socket it names its checkpoints on. The process that called this never returns (it is the
    sandbox's outer, or the keeper). Raises ``OSError`` naming the step where the sandbox failed."""
    sandboxing.enter(sandbox_of(limits), (*keep, down.fileno()), counters=True)
    return _keep(keep, down)


def enter_ahead(limits: Limits, keep: tuple[int, ...], down: socket.socket) -> None:
    """In a spare session process, at ENTER: the steps of the sandbox that do not depend on its paths
    (namespaces, cgroup, environment, /proc; see ``governance.sandbox.enter``), so it fits a session of
    ``limits`` whatever its read_paths/write_paths. Returns in the sandbox, not yet locked: ``finish``
    must run before any tool code. Raises ``OSError`` naming the step where the sandbox failed."""
    sandboxing.enter(sandbox_of(limits), (*keep, down.fileno()), counters=True, defer_paths=True)


def finish(limits: Limits, keep: tuple[int, ...], down: socket.socket) -> socket.socket:
    """At the OPEN of a spare that entered ahead: the session's paths (``limits``), no_new_privs and
    seccomp, then the keeper, as ``enter`` ends. Raises ``OSError`` naming the step that failed."""
    sandboxing.lock_paths(sandbox_of(limits))
    return _keep(keep, down)


def _keep(keep: tuple[int, ...], down: socket.socket) -> socket.socket:
    """Inside the sandbox: fork the session process and return in it; this process becomes the keeper."""
    inside, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    group = sandboxing.call_group()
    pid = forking.fork(forking.KEEP_ALL)
    if pid == 0:  # the session process: its channels and its socket to the keeper, nothing else
        os.setpgid(0, 0)
        become_subreaper()  # what its calls start stays below it (the keeper kills only what a dead one left)
        inside.close()
        down.detach()
        forking.close_all_but((*keep, theirs.fileno()))
        return theirs
    lead_group(pid)
    theirs.close()
    close_quietly(keep)  # the host sees EOF when the session process dies: the keeper holds no channel
    try:
        _Keeper(down, inside, pid, group).serve()
    finally:
        os._exit(0)


class _Keeper:
    """See the module docstring. One thread, PID 1 of the sandbox's namespace."""

    def __init__(self, down: socket.socket, inside: socket.socket, running: int, group: CallGroup | None) -> None:
        self.down = down
        self.inside = inside
        self.running: int | None = running
        self.checkpoint: tuple[int, socket.socket] | None = None
        self.group = group
        self.kill_at: float | None = None
        self.killing = False  # the supervisor asked for the running process's end (a timeout, a close)
        self.resume_fds: list[int] | None = None  # a kill's resume (b"K"): the checkpoint's channels, once reaped
        self.budget: tuple[float, float] | None = None  # (CPU used when the call started, its cpu_s)
        self.over_cpu = False
        self.poll_s = CPU_POLL_S
        self.seen_cpu = 0.0  # the CPU used at the last look
        self.hearing = True  # the session processes' socket is open (at EOF poll would spin)
        self.ooms = group.oom_kills() if group is not None else 0

    def serve(self) -> None:
        # PID 1 of a namespace gets no signal from inside it but those it handles: none but SIGCHLD's wake-up
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no /proc/1/mem for the processes it keeps
        read_wake, write_wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(write_wake)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.down.setblocking(False)
        self.inside.setblocking(False)
        while True:
            waits = [self.kill_at - time.monotonic()] if self.kill_at is not None else []
            if self.budget is not None and self.running is not None:
                waits.append(self.poll_s)
            poller = select.poll()
            for fd in (read_wake, self.down.fileno(), *([self.inside.fileno()] if self.hearing else [])):
                poller.register(fd, select.POLLIN)
            try:
                ready = {fd for fd, _ in poller.poll(max(0.0, min(waits)) * 1000 if waits else None)}
            except InterruptedError:
                ready = set()
            if read_wake in ready:
                try:
                    os.read(read_wake, 4096)
                except OSError:
                    pass
            if self.inside.fileno() in ready:
                self.read_checkpoints()
            self.reap()
            self.watch()
            if self.down.fileno() in ready and not self.control():
                return  # the supervisor is gone or let the session go: the sandbox goes with us

    def watch(self) -> None:
        """A kill's grace ended; a call's processes used their CPU budget together."""
        if self.running is None:
            return
        if self.kill_at is not None and time.monotonic() >= self.kill_at:
            kill_group(self.running)
            self.kill_at = None
        if self.budget is not None and self.group is not None:
            start, budget = self.budget
            used = self.group.cpu_s()
            busy, self.seen_cpu = used - self.seen_cpu > 0.001, used
            self.poll_s = CPU_POLL_S if busy else min(IDLE_POLL_S, self.poll_s * 2)
            if used - start >= budget:
                self.over_cpu = True
                self.budget = None
                kill_group(self.running)

    def control(self) -> bool:
        """One word of the supervisor's; False when it is gone."""
        try:
            data, fds = forking.recv_fds(self.down, MAX_WORD, 3)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        word, rest = data[:1], data[1:]
        if word in (b"k", b"K") and self.running is not None:
            self.killing = True
            try:
                os.killpg(self.running, signal.SIGTERM)
            except OSError:
                pass
            self.kill_at = time.monotonic() + _number(rest, 0.0)
            if word == b"K":  # with its resume: the checkpoint takes over as soon as the process is reaped
                self.resume_fds, fds = fds, []
        elif word in (b"r", b"K"):  # (a kill's resume whose process is gone already: at once)
            self._send(self.resume(fds))
        elif word == b"b":
            if self.group is not None:
                self.seen_cpu = self.group.cpu_s()
                self.budget = (self.seen_cpu, _number(rest, float(MAX_CPU_S)))
                self.poll_s = CPU_POLL_S
                self.ooms = self.group.oom_kills()
            self.over_cpu = False
            self._send(b"b")
        for fd in fds:
            os.close(fd)
        return True

    def resume(self, fds: list[int]) -> bytes:
        """The checkpoint takes over with the channels ``fds``: the word for the supervisor."""
        if self.running is not None:
            return b"lits process is still running"
        if self.checkpoint is None or len(fds) != 3:
            return b"lit has no checkpoint to take over"
        pid, sock = self.checkpoint
        self.checkpoint = None
        try:
            if pid not in child_pids():  # it is ours once the process that forked it is gone
                return b"lits checkpoint is gone"
            socket.send_fds(sock, [b"go"], fds)
        except OSError as exc:
            return b"lits checkpoint could not take over: " + str(exc).encode(errors="replace")[:200]
        finally:
            sock.close()
        self.running = pid
        self.killing = self.over_cpu = False
        return b"r"

    def read_checkpoints(self) -> None:
        """The session process names each new checkpoint: b"c<pid>" and the checkpoint's socket."""
        for data, fds in words(self.inside, MAX_WORD):
            if not data:  # every session process and checkpoint is gone: nothing more will come
                self.hearing = False
                return
            named = checkpoint_named(data, fds)
            if named is not None:
                if self.checkpoint is not None:
                    self.checkpoint[1].close()
                self.checkpoint = named

    def reap(self) -> None:
        reaped = reap_children()
        if not reaped:
            return
        self.read_checkpoints()  # what a dead process said before it went
        for dead, status in reaped:
            if dead == self.running:
                self.running, self.kill_at, self.budget = None, None, None
                verdict = self._verdict(status)
                resumed = None
                if self.resume_fds is not None:  # the checkpoint takes over first, then both words go at once
                    fds, self.resume_fds = self.resume_fds, None  # (the supervisor and the host wake once)
                    resumed = self.resume(fds)  # (its last checkpoint was read above)
                    for fd in fds:
                        os.close(fd)
                self._send(b"x%d" % verdict)
                if resumed is not None:
                    self._send(resumed)
            elif self.checkpoint is not None and dead == self.checkpoint[0]:
                self.checkpoint[1].close()
                self.checkpoint = None
        children = child_pids()
        self.read_checkpoints()
        keep = {self.running, self.checkpoint[0] if self.checkpoint else None}
        for pid in children:  # what a dead session process left behind
            if pid not in keep:
                kill_group(pid)

    def _verdict(self, status: int) -> int:
        """The wait status the host is told: the CPU budget's kill as SIGXCPU, a cgroup OOM kill as the
        sandbox's outer says it (both are then named LimitExceeded)."""
        over_cpu, self.over_cpu = self.over_cpu, False
        killing, self.killing = self.killing, False
        if over_cpu:
            return int(signal.SIGXCPU)
        if self.group is not None and not killing and os.WIFSIGNALED(status) \
                and os.WTERMSIG(status) == signal.SIGKILL and self.group.oom_kills() > self.ooms:
            self.ooms = self.group.oom_kills()
            return CGROUP_OOM_EXIT << 8
        return status

    def _send(self, word: bytes) -> None:
        try:
            self.down.send(word)
        except OSError:
            pass


def word_number(data: bytes) -> float | None:
    """The number a word carries after its letter (``c<pid>``, ``b<seconds>``); None when it is not one
    (the words come from inside a sandbox)."""
    try:
        return float(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None


def word_int(data: bytes) -> int | None:
    """The whole number (a pid, a wait status) a word carries after its letter; None when it is not one."""
    number = word_number(data)
    return int(number) if number is not None and math.isfinite(number) and number == int(number) else None


def words(sock: socket.socket, size: int) -> Iterator[tuple[bytes, list[int]]]:
    """The words waiting on a non-blocking socket, each with the descriptor it carries (one at most);
    ``(b"", [])`` last when the other end is gone."""
    while True:
        try:
            data, fds = forking.recv_fds(sock, size, 1)
        except BlockingIOError:
            return
        except OSError:
            data, fds = b"", []
        yield data, fds
        if not data:
            return


def checkpoint_named(data: bytes, fds: list[int]) -> tuple[int, socket.socket] | None:
    """A checkpoint's announcement (b"c<pid>" with its socket), or None, its descriptors closed, for any
    other word (they come from inside a sandbox, or from a process a tool ran in)."""
    pid = word_int(data[1:]) if data[:1] == b"c" else None
    if pid is None or pid <= 1 or len(fds) != 1:
        close_quietly(fds)
        return None
    return pid, socket.socket(fileno=fds[0])


def _number(data: bytes, default: float) -> float:
    number = word_number(data)
    return default if number is None else number


__all__ = ["OWN_PROCESSES", "enter", "enter_ahead", "finish", "sandbox_of", "without_paths"]
