"""The spare maker: a child of the template that clones the sandboxes' spares for it, so the template
itself does not fork once per sandboxed call.

Why: a fork shares every page of the process that forks with its child, and afterwards each page
that process writes is copied. The template runs its whole loop between two spares (the host's
messages, reaping, the cgroups' verdicts) and so copied about 400 pages per sandboxed call; the maker
only waits for a request and clones, so it writes few. Its clones are the template's children
(``CLONE_PARENT``): the template reaps them, polls their CPU, reports their exit, and is the parent
whose death kills them (``PR_SET_PDEATHSIG``), exactly as if it had cloned them itself.

    template ──key (its sandbox's pickled Limits)──> maker ──clone(namespaces | CLONE_PARENT)──> spare
             <──the spare's pid + the template's end of its socket (SCM_RIGHTS)──   (the template's child)
             <──pid -1, no descriptor: the maker could not clone (the template forks the spare itself)──
    template ──the spare's pid, its first word──> spare (``worker._own_pid``: it settles, then waits)

Where it holds CAP_SYS_ADMIN (as root), the maker clones every network=False spare into one empty network
namespace it made when it started (``netns.Beside``: setns there, clone, setns back), not into a new one
each: making one and the kernel's teardown of it were about 0.45 ms of CPU a call, of ~6.

The maker runs under the base of the sandboxes' system call filter (``seccomp.load_base``: all of it but
the mounts a spare still makes, its own setns and the clone into namespaces), which each spare inherits
from its clone and completes; loading the whole filter in each spare cost it twice the CPU of loading the
rest.

The template does not wait for an answer when it asks ahead: it reads answers as they come, and only
a call that finds no spare waits for the one asked first. The maker holds nothing of any call (it
never sees a channel) and no descriptor but its socket to the template (and the two network
namespaces'); a spare it clones closes them and keeps only its own socket. It leaves at EOF on its
socket (the tools changed: a new one is forked for the next spare; the pool closes) and with the
template. One that died is replaced. Each answer is due ``ANSWER_S`` after its ask: a maker that gives
none in time (stopped, slow) or cannot clone is SIGKILLed, and the template clones its spares itself
from then on, as it does after a few makers died mid-answer (``Template.ask_maker``, ``Template.take_answer``).
"""

from __future__ import annotations

import os
import pickle
import socket
from _socket import socketpair as _socketpair
from typing import Any, NoReturn

from toolfork.executor.backends.base import WorkerSetup
from toolfork.executor.backends.fork import forking
from toolfork.executor.backends.fork.worker import die_with_parent, worker_main
from toolfork.governance import forking as generic_forking
from toolfork.governance import netns, seccomp
from toolfork.governance import sandbox as sandboxing

CLONE_PARENT = 0x00008000  # the clone's parent is the maker's parent: the template
ANSWER_S = 1.0  # the template's longest wait for one spare (meanwhile it polls no CPU, kills nothing)
MAX_KEY = 1 << 16  # the template's messages are at most this long (``template.MAX_MESSAGE``)
FAILED = (-1).to_bytes(4, "little", signed=True)


def make_spares(fd: int, tools: dict[str, Any], hooks: WorkerSetup, template: int,
                prepare: Any) -> NoReturn:
    """The maker's loop (in a process the template forked, ``fd`` its socket to it): for each key,
    clone one spare of that sandbox and answer as drawn in the module docstring. ``prepare(limits)``
    readies what every spare of a sandbox inherits (its seccomp program), once per sandbox here.
    Never returns."""
    die_with_parent()
    if os.getppid() != template:  # the template died before the line above
        os._exit(0)
    sock = socket.socket(fileno=fd)
    beside = netns.empty_beside()
    try:  # every spare inherits it, and loads the rest of its filter only (see governance.seccomp)
        seccomp.load_base()
    except OSError:  # none in place: each spare loads its whole filter
        pass
    ids = (os.getuid(), os.getgid())
    clones = generic_forking.can_clone()  # also finds this process's thread id field, once
    known: dict[bytes, Any] = {}
    while True:
        key = _asked(sock)
        if not key:
            os._exit(0)
        sandbox = known.get(key)
        if sandbox is None:
            sandbox = known[key] = pickle.loads(key)  # from the template (which pickled it)
            prepare(sandbox)
        pid, ours = _clone(sock, sandbox, tools, hooks, template, ids, beside) if clones else (-1, None)
        try:
            socket.send_fds(sock, [pid.to_bytes(4, "little", signed=True) if pid > 0 else FAILED],
                            [ours.fileno()] if ours is not None else [])
        except OSError:  # the template is gone; a spare it never heard of sees EOF and leaves
            os._exit(0)
        finally:
            if ours is not None:
                ours.close()


def _asked(sock: socket.socket) -> bytes:
    """The key of the next spare the template asks for; empty when it is gone."""
    try:
        return sock.recv(MAX_KEY)
    except OSError:
        return b""


def _clone(sock: socket.socket, sandbox: Any, tools: dict[str, Any], hooks: WorkerSetup, template: int,
           ids: tuple[int, int], beside: netns.Beside | None) -> tuple[int, Any]:
    """One spare, cloned into its namespaces as the template's child (into ``beside``'s empty network
    namespace, where it has one and the spare has no network): its pid and the template's end of its
    socket; (-1, None) where the kernel refused."""
    ours, theirs = _socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # no wrapper objects: one call each

    def cleanup() -> None:  # the maker's sockets, closed by their objects (see fork.forking)
        sock.close()
        ours.close()

    flags = sandboxing.namespaces(sandbox) | CLONE_PARENT
    shared = beside if beside is not None and flags & netns.CLONE_NEWNET else None
    if shared is not None:
        try:
            shared.into_empty()
            flags &= ~netns.CLONE_NEWNET
        except OSError:  # a namespace of its own, then
            shared = None
    pid = -1
    try:
        pid = forking.fork([theirs.fileno()], cleanup, flags)
    except OSError:
        ours.close()
        theirs.close()
        return -1, None
    finally:
        if shared is not None and pid != 0:
            _home(shared)
    if pid == 0:
        worker_main(-1, -1, -1, tools, hooks, template, sandbox, theirs.fileno(), cloned=ids)
    theirs.close()
    return pid, ours


def _home(beside: netns.Beside) -> None:
    """Back into the maker's own network namespace; a maker that cannot come back leaves (the template
    forks another), so that no spare of a call with network is ever cloned without it."""
    try:
        beside.home()
    except OSError:
        os._exit(70)


__all__ = ["ANSWER_S", "make_spares"]
