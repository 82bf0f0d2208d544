"""The template: a single-threaded process that forks every worker of one pool.

Why it exists: forking from a host that runs threads can copy a lock some other thread holds (the
logging module's, an allocator's, a driver's), and the child then deadlocks on it. The template is
forked from the host once, when the pool starts; afterwards the host never forks again. Every worker,
first or replacement, is forked from the template, which only ever runs this loop.

It also owns the workers as their parent: it reaps them (so there are no zombies), reports each exit
status to the host (so a crash can be named: "killed by SIGSEGV"), carries out the kill escalation of
a timed-out worker (SIGTERM to its process group, SIGKILL after the grace period) while the host goes
on, and kills every worker when the host goes away, even by SIGKILL (its control socket reaches EOF).
A tool can signal it (it is its worker's parent): the host watches it and, dead or stopped, replaces it
(see ``fork.core.WorkerCore.check_template``).

Containment: the template and every worker are child subreapers (``PR_SET_CHILD_SUBREAPER``). A
process a tool starts stays in its worker's subtree whatever it does with sessions and process groups
(a daemon's double fork hands it to the worker, not to init). When a worker dies — killed at a timeout,
crashed, or gone at ``close()`` — what it started is handed to the template, so any child of the
template that is not a worker is a leftover of a dead worker's call: the template kills it (by pid,
never by process group: a hostile tool may have joined the host's group), and repeats as the
leftovers' own children come to it, until none is left. The one exception is a spare the spare maker
cloned whose answer the template has not read yet (below): leftovers wait for those answers, read
within ``LEFTOVERS_WAIT_S``. The template exits only when it has no child.

The template is a ``Template``: its state (its children, their kill deadlines, the spares, the sessions'
supervisor) and one handler per control message, chosen by the message's type (``fork.template_messages``):

    host ──Spawn──────> on_spawn          fork a worker (or hand a spare its call); replies Spawned
         ──OpenSession> on_open_session   the four fds go to the sessions' supervisor; no reply
         ──Term───────> on_term           SIGTERM a worker's group now, SIGKILL after the grace
         ──AddTools───> on_add_tools      tools added later; spares, the spare maker and the supervisor are let go
         ──Exit───────> on_exit           let workers leave, SIGKILL what is left after the grace, exit
         <──Exited───── (as it reaps)     a worker's pid and wait status
         (any other type)                 only the descriptors that came with it are closed

Spares: entering a sandbox takes a clone into new namespaces and their set-up, so the template keeps,
per sandbox (distinct Limits), one-shots made and entered ahead (one after a first call, up to
``SPARES_PER_SANDBOX`` once they are taken), each blocked on a socket of its own. A sandboxed
Spawn hands the oldest spare the three channels (SCM_RIGHTS) and names its pid; then new spares are
made, after the reply (a Spawn that finds none makes one and hands it the call at once). A spare
serves one call, as any one-shot; it leaves unused at EOF on its socket, when tools are added (it has
the old ones) or the pool closes.

    host ──Spawn(wid, limits)──> template ──channels──> spare (entered: namespaces, cgroup, Landlock, seccomp)
         <──Spawned(wid, pid)──           ──clone───> next spare ──> its pid on its socket (it enters, waits)
         <──Exited(pid, status)─          (reaps it) status with its cgroup's verdict (``cgroup.ended_as``)

Where clone can be used (``governance.forking.can_clone``) a spare is its sandbox's PID 1, cloned by
the spare maker (``fork.template_maker``: a child of the template that only clones, so the template
itself forks nothing per call and its pages are not copied again after each spare) with CLONE_PARENT,
so the template is its parent, outside. The template asks for spares and goes on; it reads each answer
as it comes (a call that finds no spare waits for the one asked first). It polls the CPU of each one
running a call under cpu_s every
``cgroup.CPU_POLL_S`` (``watch_cpu``: SIGKILL at the limit), and signals it by pid as well as by group
when it left its group. Elsewhere a spare is forked and enters its sandbox through an outer process
(``governance.sandbox.enter``).
"""

from __future__ import annotations

import functools
import gc
import os
import pickle
import select
import signal
import socket
import time
from collections.abc import Callable
from typing import Any, ClassVar, NoReturn

from toolfork.executor.backends import host_fds
from toolfork.executor.backends.base import WorkerSetup
from toolfork.executor.backends.fork import forking, template_maker
from toolfork.executor.backends.fork.session_worker import supervise_sessions
from toolfork.executor.backends.fork.template_messages import (
    AddTools,
    Exit,
    Exited,
    OpenSession,
    Sentinel,
    Spawn,
    Spawned,
    Term,
)
from toolfork.executor.backends.fork.worker import become_subreaper, child_pids, signal_quietly, worker_main
from toolfork.executor.wire import WakePipe
from toolfork.executor.wire.pipes import close_quietly
from toolfork.governance import cgroup, hook_threads
from toolfork.governance import forking as generic_forking
from toolfork.governance import sandbox as sandboxing
from toolfork.governance.limits import Limits

MAX_MESSAGE = 1 << 16
SPARES_PER_SANDBOX = 2  # one-shots kept entered ahead per sandbox (distinct Limits)
SANDBOXES_WITH_SPARES = 4  # the sandboxes used last keep theirs
SPARE_TURNS = 16  # a call waits for at most this many spares (asked or made) before its one-shot is forked
LEFTOVERS_WAIT_S = 0.05  # leftovers found while spares are asked of the maker wait this long for its answers
MAKER_FAILURES = 3  # spare makers that may fail (die mid-answer) before the template makes its spares itself


def template_main(ctrl: socket.socket, tools: dict[str, Any], hooks: WorkerSetup) -> None:
    """Runs in the template process (started by multiprocess with the fork start method); never returns."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the host; it closes us
    forking.inherit([ctrl.fileno(), *_multiprocess_own(ctrl)])  # before it opens anything of its own
    become_subreaper()
    cgroup.remove_all()  # cgroups of templates killed before they could remove theirs, or of our pid's last holder
    hook_threads.park()  # an exporter thread an at-fork hook restarted here: the template runs one thread
    # Everything inherited from the host goes to the collector's permanent generation: a worker's
    # collections then never walk (and so never copy-on-write) the host's objects.
    gc.freeze()
    Template(ctrl, tools, hooks).serve()


class Template:
    """The template's state and its handlers (see the module docstring)."""

    def __init__(self, ctrl: socket.socket, tools: dict[str, Any], hooks: WorkerSetup) -> None:
        self.ctrl = ctrl
        self.tools = tools
        self.hooks = hooks
        self.children: set[int] = set()
        self.kill_at: dict[int, float] = {}  # worker pid -> when it is SIGKILLed (a Term's grace)
        self.tool_chunks: list[bytes] = []
        self.exiting_until: float | None = None  # after Exit: when what is left is killed
        # Per sandbox (the pickled Limits): one-shots that entered it ahead of their call, each waiting for
        # the call's channels on its socket (pid, the template's end).
        self.spares: dict[bytes, list[tuple[int, socket.socket]]] = {}
        # Sandboxes the template cloned into their namespaces itself (``generic_forking.can_clone``): no
        # outer waits for them, so the template does its part (``watch_cpu``, ``cgroup.ended_as``).
        self.clones = generic_forking.can_clone()
        self.boxes: dict[int, Limits] = {}  # pid -> Limits, of each such sandbox
        self.watched: set[int] = set()  # those running a call under cpu_s with a cgroup: polled
        self.cpu_killed: set[int] = set()  # those killed at cpu_s
        # The sessions' supervisor (pid, the socket sessions are handed to it on), forked for the first
        # session and again after the tools change (it forks the session processes: they must have the
        # new tools).
        self.supervisor: list[Any] = []
        # The spare maker (pid, our socket to it: ``fork.template_maker``), forked for the first spare a
        # clone can make, and again after the tools change or its death; past MAKER_FAILURES the template
        # clones its spares itself.
        self.maker: list[Any] = []
        self.maker_failures = 0
        # The spares asked of the maker and not answered yet, in order: (key, Limits, when asked). Its
        # clones are our children before it answers, so no leftovers are killed while one is asked.
        self.asked: list[tuple[bytes, Any, float]] = []
        self.leftovers_due: float | None = None  # since when leftovers wait to be killed
        signal.signal(signal.SIGTERM, lambda *_: self.leave())
        self.wake = WakePipe()  # SIGCHLD interrupts the select below through it
        signal.set_wakeup_fd(self.wake.write_fd)
        signal.signal(signal.SIGCHLD, lambda *_: None)

    def serve(self) -> None:
        """Reap, kill what is due, and handle the host's messages, until the host is gone or says Exit."""
        ctrl, wake, children, kill_at = self.ctrl, self.wake, self.children, self.kill_at
        while True:
            timeout = None
            deadlines = list(kill_at.values()) + ([self.exiting_until] if self.exiting_until is not None else [])
            if self.asked:  # the maker's oldest answer is due; leftovers wait for its answers that long
                deadlines.append(self.asked[0][2] + template_maker.ANSWER_S)
                if self.leftovers_due is not None:
                    deadlines.append(self.leftovers_due + LEFTOVERS_WAIT_S)
            if deadlines:
                timeout = max(0.0, min(deadlines) - time.monotonic())
            if self.watched:
                timeout = cgroup.CPU_POLL_S if timeout is None else min(timeout, cgroup.CPU_POLL_S)
            try:
                watched: list[Any] = [ctrl, wake.fd]
                if self.asked:  # the maker's answers, as they come
                    watched.append(self.maker[1])
                ready, _, _ = select.select(watched, [], [], timeout)
            except InterruptedError:
                ready = []
            if wake.fd in ready:
                wake.drain()
            if self.asked and self.maker[1] in ready:
                self.take_answer()
            elif self.asked and time.monotonic() >= self.asked[0][2] + template_maker.ANSWER_S:
                self.maker_failed(MAKER_FAILURES)  # no answer in time: stopped
            if _reap(children, self, block=False) and self.leftovers_due is None:
                self.leftovers_due = time.monotonic()
            if self.leftovers_due is not None and self.asked and \
                    time.monotonic() >= self.leftovers_due + LEFTOVERS_WAIT_S:
                while self.asked:  # a clone not announced yet is no leftover: its answer first
                    self.take_answer()
            if self.leftovers_due is not None and not self.asked:
                _kill_leftovers(children)  # what dead workers' calls started, and their children in turn
                self.leftovers_due = None
            for pid in [p for p in kill_at if p not in children]:
                del kill_at[pid]
            if self.watched:
                self.watch_cpu()
            now = time.monotonic()
            for pid, when in list(kill_at.items()):
                if now >= when:
                    _killpg(pid, signal.SIGKILL)
                    del kill_at[pid]
            if self.exiting_until is not None:
                self.exit_when_empty()
                if now >= self.exiting_until:
                    self.leave()
            if ctrl not in ready:
                continue
            try:
                data, fds = forking.recv_fds(ctrl, MAX_MESSAGE, 4)
            except OSError:
                data, fds = b"", []
            if not data:  # the host is gone (closed, crashed or SIGKILLed): take every worker with us
                self.leave()
            msg = pickle.loads(data)
            handler = self.HANDLERS.get(type(msg))
            if handler is not None:
                handler(self, msg, fds)
            else:  # not a message of ours: its descriptors are nobody's
                close_quietly(fds)

    # ------------------------------------------------------------------ the handlers

    def on_spawn(self, msg: Spawn, fds: list[int]) -> None:
        sandbox = msg.sandbox  # the Limits of a sandboxed call's one-shot
        channels = (fds[0], fds[1], fds[2])
        key = b""
        spawned = None
        took_spare = False
        if sandbox is not None:
            _prepare_sandbox(sandbox)
            key = pickle.dumps(sandbox)
            spawned = _hand_over(self.spares.get(key, []), self.children, channels)
            took_spare = spawned is not None or self.asking(key)
            for _turn in range(SPARE_TURNS if self.clones and self.exiting_until is None else 0):
                if spawned is not None:  # (a clone is a spare first: one asked of the maker, else the template's)
                    break
                if not self.spares.get(key):
                    if not self.asking(key):
                        self.fork_spares(key, sandbox, 1)
                    if self.asking(key):
                        self.take_answer()  # the oldest asked (maybe of another sandbox), or the maker failed
                spawned = _hand_over(self.spares.get(key, []), self.children, channels)
            if spawned in self.boxes and sandbox.cpu_s is not None and cgroup.bounded(sandbox) \
                    and not isinstance(cgroup.hierarchy(), str):
                self.watched.add(spawned)  # its call runs now: its CPU is polled (``watch_cpu``)
        if spawned is None:
            spawned = self.fork_worker(channels, sandbox, None)
        close_quietly(fds)
        self.reply(Spawned(msg.wid, spawned))
        if sandbox is not None and self.exiting_until is None:
            # The next calls of this sandbox find it entered already: one spare after a call that
            # found none (a pool that makes one call wastes one), SPARES_PER_SANDBOX once they are taken.
            self.fork_spares(key, sandbox, SPARES_PER_SANDBOX if took_spare else 1)

    def on_open_session(self, msg: OpenSession, fds: list[int]) -> None:
        if len(fds) == 4 and self.exiting_until is None:
            self.to_supervisor(fds)
        for fd in fds:  # the sessions' supervisor has them; a refused one's host sees EOF
            os.close(fd)

    def on_term(self, msg: Term, fds: list[int]) -> None:
        if msg.pid in self.children:
            _killpg(msg.pid, signal.SIGTERM)
            self.kill_at[msg.pid] = time.monotonic() + msg.grace

    def on_add_tools(self, msg: AddTools, fds: list[int]) -> None:
        self.tool_chunks.append(msg.chunk)
        if msg.last:
            import dill

            self.tools.update(dill.loads(b"".join(self.tool_chunks)))
            self.tool_chunks.clear()
            self.let_spares_go()
            self.drop_supervisor()
            self.drop_maker()

    def on_exit(self, msg: Exit, fds: list[int]) -> None:
        self.exiting_until = time.monotonic() + msg.grace
        self.let_spares_go()
        self.drop_supervisor()
        self.drop_maker()
        self.exit_when_empty()

    #: The one handler of each message type the host sends (``fork.template_messages``).
    HANDLERS: ClassVar[dict[type, Callable[[Template, Any, list[int]], None]]] = {
        Spawn: on_spawn, OpenSession: on_open_session, Term: on_term, AddTools: on_add_tools, Exit: on_exit}

    # ------------------------------------------------------------------ children

    def reply(self, msg: Spawned | Exited) -> None:
        try:
            self.ctrl.send(pickle.dumps(msg))
        except OSError:
            pass

    def exit_when_empty(self) -> None:
        if not self.children and not _kill_leftovers(self.children):
            cgroup.remove_all()
            os._exit(0)

    def leave(self) -> NoReturn:
        """Kill everything below us, reap it all, exit."""
        for pid in list(self.children):
            _killpg(pid, signal.SIGKILL)
        _kill_leftovers(self.children)
        _reap(self.children, None, block=True)
        while _kill_leftovers(self.children):
            _reap_any()
        cgroup.remove_all()
        os._exit(0)

    def fork_worker(self, fds: tuple[int, int, int], sandbox: Any, spare: int | None,
                    helper: tuple[int, Callable[[int, dict[str, Any], WorkerSetup], None]] | None = None) -> int:
        """Fork a worker (a one-shot of ``sandbox``, a spare waiting on ``spare``), or, with ``helper``
        (its socket and its loop), the sessions' supervisor or the spare maker. Returns its pid."""
        def cleanup() -> None:  # the template's own sockets, closed by their objects (see fork.forking)
            self.ctrl.close()
            self.wake.close()
            for waiting in self.spares.values():  # only the template may hand a spare its call
                for _pid, sock in waiting:
                    sock.close()
            for own in (self.supervisor, self.maker):  # each must see EOF when the template lets it go
                if own:
                    own[1].close()

        own = [fd for fd in (*fds, spare, helper[0] if helper else None) if fd is not None and fd >= 0]
        clone = self.clones and sandbox is not None and spare is not None
        me, ids = os.getpid(), (os.getuid(), os.getgid())
        pid = -1
        if clone:
            try:
                pid = forking.fork(own, cleanup, sandboxing.namespaces(sandbox))
            except OSError:  # the kernel refused the namespaces here: the spare below tries them itself
                clone = False  # (sandbox.enter), and its call is refused naming why if it cannot
        if not clone:
            pid = forking.fork(own, cleanup)
        if pid == 0:
            if helper is not None:
                helper[1](helper[0], self.tools, self.hooks)
            worker_main(*fds, self.tools, self.hooks, me, sandbox, spare, cloned=ids if clone else None)
        self.children.add(pid)
        if clone:
            self.boxes[pid] = sandbox
        return pid

    def fork_helper(self, slot: list[Any], loop: Callable[[int, dict[str, Any], WorkerSetup], None],
                    timeout: float | None = None) -> None:
        """Fork a helper of the template (the session supervisor, the spare maker) that runs ``loop`` on
        its end of a new socket pair; ``slot`` becomes [its pid, our end] (``timeout``: on our end)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.settimeout(timeout)
        slot[:] = [None, ours]  # listed before the fork: the child closes its copy of ours
        try:
            slot[0] = self.fork_worker((-1, -1, -1), None, None, (theirs.fileno(), loop))
        finally:
            theirs.close()

    def drop_supervisor(self) -> None:
        """No more sessions for it: it serves those it has and leaves after the last."""
        if self.supervisor:
            self.supervisor[1].close()
            self.supervisor.clear()

    def to_supervisor(self, fds: list[int]) -> None:
        supervisor = self.supervisor
        for _attempt in (1, 2):  # a supervisor that died since (killed by hand) is replaced once
            if not supervisor or supervisor[0] not in self.children:
                self.drop_supervisor()
                self.fork_helper(supervisor, supervise_sessions)
            try:
                socket.send_fds(supervisor[1], [b"s"], fds)
                return
            except OSError:
                self.drop_supervisor()

    def watch_cpu(self) -> None:
        """SIGKILL each cloned sandbox whose call's processes together used its cpu_s (its PID 1: they all
        die); reported as SIGXCPU when reaped (``ended``)."""
        me = os.getpid()
        for pid in list(self.watched):
            limits = self.boxes.get(pid)
            used = cgroup.cpu_used(me, pid)
            if limits is None or limits.cpu_s is None or used is None:
                self.watched.discard(pid)
            elif used >= limits.cpu_s:
                signal_quietly(os.kill, pid, signal.SIGKILL)
                self.cpu_killed.add(pid)
                self.watched.discard(pid)

    def ended(self, pid: int, status: int, usage: Any) -> int:
        """The wait status reported for child ``pid``: a cloned sandbox's as its outer would have left."""
        limits = self.boxes.pop(pid, None)
        self.watched.discard(pid)
        killed = pid in self.cpu_killed
        self.cpu_killed.discard(pid)
        if limits is None:
            return status
        return cgroup.ended_as(status, usage.ru_utime + usage.ru_stime, limits, os.getpid(), pid, cpu_killed=killed)

    def let_spares_go(self, key: bytes | None = None) -> None:
        """Spares leave unused (EOF on their socket): their tools are stale, or the pool is closing."""
        for k in list(self.spares) if key is None else [key]:
            for _pid, sock in self.spares.pop(k):
                sock.close()

    def fork_spares(self, key: bytes, sandbox: Any, want: int) -> None:
        """Have ``want`` spares of ``sandbox`` waiting or on their way: asked of the spare maker (they
        come in as its answers do, ``take_answer``), else forked by the template itself."""
        waiting = self.spares.pop(key, [])
        self.spares[key] = waiting  # the sandbox used last is the last to go
        coming = sum(1 for asked, _, _ in self.asked if asked == key)
        while len(waiting) + coming < want:
            if self.ask_maker(key):
                self.asked.append((key, sandbox, time.monotonic()))
                coming += 1
                continue
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                pid = self.fork_worker((-1, -1, -1), sandbox, theirs.fileno())
            finally:
                theirs.close()
            self.announce(pid, ours, key)
        while len(self.spares) > SANDBOXES_WITH_SPARES:
            self.let_spares_go(next(iter(self.spares)))

    def announce(self, pid: int, ours: socket.socket, key: bytes) -> None:
        """A new spare of sandbox ``key`` joins those waiting (or is let go at once, its sandbox having
        lost its spares meanwhile); a clone is told its pid as we see it, its first word
        (``worker._own_pid``)."""
        if pid in self.boxes:
            try:
                ours.send(pid.to_bytes(4, "little"))
            except OSError:  # it died already: reaped as any child
                pass
        waiting = self.spares.get(key)
        if waiting is None or self.exiting_until is not None:
            ours.close()  # EOF: it leaves unused
        else:
            waiting.append((pid, ours))

    def asking(self, key: bytes) -> bool:
        return any(asked == key for asked, _, _ in self.asked)

    def ask_maker(self, key: bytes) -> bool:
        """Ask the spare maker (forked first if there is none, or it died) for a spare of sandbox ``key``;
        whether it was asked (not where clones cannot be made here, or after its failures)."""
        if not self.clones or self.maker_failures >= MAKER_FAILURES:
            return False
        maker = self.maker
        if not maker or maker[0] not in self.children:  # the first, or one that died since
            self.drop_maker()
            self.fork_helper(maker, functools.partial(template_maker.make_spares, template=os.getpid(),
                                                      prepare=_prepare_sandbox), template_maker.ANSWER_S)
        try:
            maker[1].send(key)
        except TimeoutError:  # stopped, with its queue full
            self.maker_failed(MAKER_FAILURES)
            return False
        except OSError:  # it died (not reaped yet)
            self.maker_failed(1)
            return False
        return True

    def take_answer(self) -> bool:
        """The maker's answer to the oldest spare asked of it (waiting for it at most ``ANSWER_S``): that
        spare, our child, is announced. Whether one came; a maker that gave none in time (stopped) or
        cannot clone fails for good, and a dead one counts one failure (``maker_failed``)."""
        key, sandbox, _when = self.asked.pop(0)
        data: bytes = b""
        fds: list[int] = []
        failed = 1
        try:
            data, fds = forking.recv_fds(self.maker[1], 16, 1)
        except TimeoutError:  # stopped, or too slow to be of use
            failed = MAKER_FAILURES
        except OSError:  # it died (its clone, if it made one, sees EOF and leaves)
            pass
        pid = int.from_bytes(data, "little", signed=True) if len(data) == 4 else 0
        if pid <= 0 or len(fds) != 1:
            close_quietly(fds)
            self.maker_failed(MAKER_FAILURES if pid < 0 else failed)
            return False
        ours = socket.socket(fileno=fds[0])
        if not _own_child(pid):  # killed and reaped before its announcement (by another tool): forgotten
            ours.close()
            return True
        self.children.add(pid)
        self.boxes[pid] = sandbox
        self.announce(pid, ours, key)
        return True

    def maker_failed(self, count: int) -> None:
        """SIGKILL the maker and forget it and what was asked of it (a clone it made unasked sees EOF and
        leaves); past MAKER_FAILURES the template forks its spares itself."""
        self.maker_failures += count
        if self.maker and self.maker[0] is not None:
            signal_quietly(os.kill, self.maker[0], signal.SIGKILL)
        self.drop_maker()

    def drop_maker(self) -> None:
        """No more spares from this maker (its tools are stale, the pool is closing, or it failed): it
        leaves at EOF, and the answers not read yet are lost with the socket."""
        if self.maker:
            self.maker[1].close()
            self.maker.clear()
        self.asked.clear()


def _multiprocess_own(ctrl: socket.socket) -> list[int]:
    """The descriptors multiprocess gave the template to watch the host by and to be watched by (the
    host names the pipe of the second in its first message): its children must hold neither."""
    own = []
    try:
        from multiprocess import process

        parent = getattr(process, "_parent_process", None)
        if parent is not None:
            own.append(parent.sentinel)
    except Exception:
        pass
    data = ctrl.recv(MAX_MESSAGE)
    if not data:  # the host is gone before it said anything
        os._exit(0)
    msg = pickle.loads(data)
    if isinstance(msg, Sentinel):
        own += host_fds.naming(_fds(), (msg.dev, msg.ino))
    return own


def _fds() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return []


def _hand_over(waiting: list[tuple[int, socket.socket]], children: set[int], fds: tuple[int, int, int]) -> int | None:
    """Send a call's channels to the oldest live spare of ``waiting`` (taken off it); its pid, or None
    when none is left."""
    while waiting:
        pid, sock = waiting.pop(0)
        try:
            if pid in children:  # else it died unused (reaped already)
                socket.send_fds(sock, [b"call"], list(fds))
                return pid
        except OSError:  # it died: its socket's other end is gone
            pass
        finally:
            sock.close()
    return None


def _prepare_sandbox(limits: Any) -> None:
    """Build the sandbox's seccomp filter here, once, so every sandbox forked from now on has it (a
    failure is the sandbox's to report, naming why); likewise the cgroup mounts it makes read-only and
    where the environment it blanks lies."""
    from toolfork.governance import seccomp

    cgroup.read_only_roots()
    sandboxing.environ_span()
    try:
        seccomp.prepare(limits.network is False)
    except OSError:
        pass


def _own_child(pid: int) -> bool:
    """Whether ``pid`` is a child of ours not reaped yet (running, or a zombie)."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    except OSError:
        return True
    return True


def _kill_leftovers(workers: set[int]) -> bool:
    """SIGKILL every child that is not a live worker: leftovers of dead workers' calls. Returns
    whether there were any (their own children come to us when they die: the caller repeats)."""
    leftovers = [pid for pid in child_pids() if pid not in workers]
    for pid in leftovers:
        signal_quietly(os.kill, pid, signal.SIGKILL)
    return bool(leftovers)


def _reap_any() -> None:
    """Reap one child of any kind, waiting for it (after a SIGKILL it comes at once)."""
    try:
        os.waitpid(-1, 0)
    except (ChildProcessError, InterruptedError):
        pass


def _killpg(pid: int, sig: int) -> None:
    """Signal a worker's whole process group (the worker is its leader, its tool's children share it);
    the worker too when it is not in that group (it has not reached its setpgid, or its tool moved it
    out, leaving the group to its children)."""
    if not signal_quietly(os.killpg, pid, sig) or _left_group(pid):
        signal_quietly(os.kill, pid, sig)


def _left_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) != pid
    except OSError:
        return False


def _reap(children: set[int], template: Template | None, *, block: bool) -> bool:
    """Reap what has exited; report the workers among them. Returns whether anything was reaped (a
    death may have handed us leftovers: the caller looks)."""
    reaped = False
    while True:
        if block and not children:
            return reaped
        try:
            pid, status, usage = os.wait4(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return reaped
        except InterruptedError:
            continue
        if pid == 0:
            return reaped
        reaped = True
        if pid in children:  # a leftover's exit is nobody's business but ours
            children.discard(pid)
            if template is not None:
                status = template.ended(pid, status, usage)  # read from its cgroup: before it goes
            cgroup.remove(pid)  # a sandbox's cgroup, now empty
            if template is not None:
                template.reply(Exited(pid, status))


__all__ = ["Template", "template_main"]
