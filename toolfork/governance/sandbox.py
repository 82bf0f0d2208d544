"""The sandbox: a process of its own for one call of code nobody reviewed, entered before any tool or
hook code runs, and with no way back.

Why a process per call, made by the template: a namespace, a Landlock domain, a seccomp filter and a
hard rlimit cannot be shed, so a process that entered them is good for that call only; the template
is single-threaded (threads in the host or in warm workers do not matter) and already holds the tools.

A one-shot call's sandbox is made in one step (``settle``), where the template can clone:

    template ── clone(user, PID, mount [, network] namespaces) ──> sandbox (PID 1 of its namespace;
              ── its pid, as the template sees it ──────────────>  the template is its parent, outside)
                 1. SIGKILL when the template dies; uid/gid mapped onto themselves (files keep owners)
                 2. every inherited descriptor closed but its socket to the template (which later
                    sends the call's channels); stdin/stdout/stderr on /dev/null; no controlling
                    terminal
                 3. the environment: MINIMAL_ENV plus the names in Limits(env=[...])
                 4. its cgroup: made, limited and joined (``governance.cgroup``), no descriptor kept
                 5. a fresh /proc (its own processes only); every cgroup mount read-only; every
                    mount read-only but write_paths (``governance.mounts``)
                 6. no_new_privs, Landlock (read_paths/write_paths), seccomp filter
                 7. on_worker_start, then the call; its rlimits hard = soft (``lock_rlimits``)
    The template does what a parent outside must: it polls the call's CPU in its cgroup and SIGKILLs
    the sandbox at cpu_s, and reports its exit with the cgroup's verdict (``cgroup.ended_as``).

Elsewhere (sessions, the probes, a machine where ``forking.can_clone`` says no) ``enter`` takes the
same steps with one process more, which stays outside and waits:

    forked one-shot ("outer") ── 2, 3, 4 (made only), unshare(namespaces), 1 (ids) ── fork ──> sandbox
       │ puts the sandbox in its cgroup, passes a SIGTERM on,       (PID 1: SIGKILL when the outer
       │ polls cpu_s (``CallGroup.watch``) and leaves with           dies; 5, 6, 7)
       └ the sandbox's wait status (a kill at the CPU hard limit reported as SIGXCPU)

A process the call starts lives in the sandbox's PID namespace: when the sandbox (its init) ends, the
kernel kills every one of them, daemons that double-forked or called setsid included.

What each step stops is the threat model in docs/security.md; the escape suite in
tests/redteam/sandbox/ attacks each, as root and as an unprivileged user.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import math
import os
import signal
import sys
import termios
from collections.abc import Sequence
from typing import Any, NoReturn

from . import cgroup, forking, hook_threads, landlock, mounts, seccomp
from .limits import Limits
from .verdict import PAGE, Probe, libc, thread_count, try_in_child

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 0x40000
PR_SET_PDEATHSIG = 1
MIB = 1024 * 1024

# What a sandboxed call sees of the environment, besides the names its Limits(env=[...]) pass on.
MINIMAL_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


# The cgroup this process's call runs in, once it entered its sandbox (None: no cgroup was made).
_group: cgroup.CallGroup | None = None


class SandboxError(OSError):
    """The sandbox could not be entered; the message says which step and why."""


def _check(result: int, step: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise SandboxError(code, f"{step}: {os.strerror(code)}")


def close_inherited(keep: Sequence[int]) -> None:
    """Close every descriptor but ``keep``; 0, 1 and 2 become /dev/null (a library that writes to
    stdout must not get another file in their place); and give up the controlling terminal."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        if fd != null:
            os.dup2(null, fd, inheritable=True)
    forking.close_all_but(keep)
    drop_terminal()


def drop_terminal() -> None:
    """This process gives up its controlling terminal (``TIOCNOTTY``), so /dev/tty no longer opens: the
    terminal of a person who started the host (``toolfork run`` in a shell) would otherwise take the
    sandbox's escape sequences and, by ``TIOCSTI``, keystrokes for their shell to run once toolfork ends.
    The process leads no session (every worker leads a process group of its own, so ``setsid`` is not
    open to it), so no other process loses the terminal; none it starts can take it again (a terminal
    that is a session's already is not another's, and ``TIOCSTI`` on one that is not the caller's
    controlling terminal needs CAP_SYS_ADMIN in the host's user namespace)."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:  # ENXIO: no controlling terminal (a service, CI, a pipe)
        return
    try:
        if os.getsid(0) == os.getpid():  # its TIOCNOTTY would hang the terminal up for the whole session
            raise SandboxError(errno.EPERM, "this process leads a session: it cannot give up its terminal alone")
        fcntl.ioctl(fd, termios.TIOCNOTTY)
    except SandboxError:
        raise
    except OSError as exc:
        raise SandboxError(exc.errno or errno.EIO, f"giving up the controlling terminal: {exc.strerror}") from None
    finally:
        os.close(fd)


def set_environ(limits: Limits) -> None:
    """The environment becomes ``MINIMAL_ENV`` plus the host's values of the names in ``limits.env``."""
    passed = {name: os.environ[name] for name in limits.env or () if name in os.environ}
    wanted = {**MINIMAL_ENV, **passed}
    data = getattr(os.environ, "_data", None)  # CPython's mapping behind os.environ
    if isinstance(data, dict) and libc().clearenv() == 0:  # one call, not an unsetenv per name
        data.clear()
    else:
        os.environ.clear()
    # No Mapping.update, no file object: this runs in every sandbox, where each object Python touches
    # costs a copied page (about 40 a call fewer, with seccomp.load's program made ahead).
    for name, value in wanted.items():
        os.environ[name] = value
    start, end = environ_span()  # the environment the host was started with stays in memory, and
    if 0 < start < end:  # /proc/self/environ shows it
        ctypes.memset(start, 0, end - start)


@functools.lru_cache(maxsize=1)
def environ_span() -> tuple[int, int]:
    """Where the environment this process was started with lies in its memory (env_start, env_end of
    /proc/self/stat; (0, 0) where unknown). The same in every process forked from it (a fork copies the
    address space as it is): looked up once, in the template, before it forks a sandbox."""
    try:
        fd = os.open("/proc/self/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            fields = os.read(fd, 4096).rsplit(b")", 1)[1].split()
        finally:
            os.close(fd)
        return int(fields[47]), int(fields[48])  # fields 50 and 51
    except (OSError, ValueError, IndexError):
        return 0, 0


def _map_ids(uid: int, gid: int) -> None:
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def _outer(inner: int, limits: Limits, group: cgroup.CallGroup | None, joined: tuple[int, int] | None) -> None:
    """The one-shot outside the namespaces: put the sandbox in its cgroup and say so (``joined``), hold
    no descriptor (but its cgroup's counters), pass a SIGTERM on, wait for the sandbox and leave with its
    wait status. Never returns."""
    if group is not None and joined is not None:
        os.close(joined[0])
        try:
            group.join(inner)
            word = b"1"
        except OSError as exc:
            word = b"0" + str(exc).encode(errors="replace")[:2000]
        try:
            os.write(joined[1], word)
        except OSError:
            pass
        os.close(joined[1])
    forking.close_all_but(group.fds if group is not None else ())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: _pass_on(inner, signal.SIGTERM))
    if group is not None:
        watched = group.watch(inner)
        _leave_as(70 << 8 if watched is None else watched)
    status, usage = _wait(inner)
    used = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL and limits.cpu_s is not None \
            and used >= limits.cpu_s:
        status = int(signal.SIGXCPU)  # the kernel's kill at the CPU hard limit: name it the CPU limit's
    _leave_as(status)


def _wait(pid: int) -> tuple[int, Any]:
    """The wait status and resource usage of child ``pid`` (leaves with 70 when there is no such child)."""
    while True:
        try:
            _, status, usage = os.wait4(pid, 0)
            return status, usage
        except InterruptedError:
            continue
        except ChildProcessError:
            _leave_as(70 << 8)


def _leave_as(status: int) -> NoReturn:
    """Exit as the sandbox did: its exit code, or killed by its signal. Never returns."""
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    sig = os.WTERMSIG(status)
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, OSError, ValueError):
        pass
    if sig not in (signal.SIGKILL, signal.SIGSTOP):  # no handler can be set for those two
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


def _pass_on(pid: int, sig: int) -> None:
    """Send ``sig`` to the sandbox unless the signal to our process group reached it already (it left
    the group: the tool called setsid or setpgid)."""
    try:
        if os.getpgid(pid) != os.getpgrp():
            os.kill(pid, sig)
    except OSError:
        pass


def namespaces(limits: Limits) -> int:
    """The CLONE_NEW* flags of the namespaces a sandbox under ``limits`` lives in."""
    return CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | (CLONE_NEWNET if limits.network is False else 0)


def _ready(limits: Limits, keep: Sequence[int]) -> None:
    """The first steps of every sandbox, in the process that is to enter it: one thread (an exporter an
    at-fork hook restarted is stopped), only ``keep`` open, the minimal environment."""
    if not sys.platform.startswith("linux"):
        raise SandboxError(errno.ENOSYS, f"the sandbox is Linux only, not {sys.platform}")
    try:
        seccomp.prepare(limits.network is False)  # built in the template already; a missing libseccomp fails here
    except OSError as exc:
        raise SandboxError(exc.errno or errno.ENOSYS, str(exc)) from None
    hook_threads.stop()  # an exporter thread an at-fork hook restarted in this child (OpenTelemetry's)
    threads = thread_count()
    if threads > 1:  # unshare(CLONE_NEWUSER) and Landlock bind one thread: the others would stay outside
        raise SandboxError(errno.EINVAL, f"this process runs {threads} threads, so no sandbox can be entered "
                           "(a thread an os.register_at_fork hook restarts in every forked child, other than "
                           "OpenTelemetry's batch processors, which are stopped; or one the template started)")
    close_inherited(keep)
    set_environ(limits)


def settle(limits: Limits, keep: Sequence[int], uid: int, gid: int, template: int, pid: int) -> None:
    """Enter the sandbox ``limits`` ask for in a process that was cloned into its namespaces already
    (``forking.fork(..., namespaces=namespaces(limits))`` in the template: it is PID 1 of its own PID
    namespace, and its parent is the template, outside). ``uid``/``gid``: its ids outside; ``template``
    and ``pid``: the template's pid and its own, as the template sees them (its cgroup is named by them).
    It maps its own ids, makes its cgroup and joins it (before any tool code: no descriptor on the group
    is left open), then takes the same steps as ``enter``'s sandbox. Raises SandboxError."""
    _check(libc().prctl(ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0),
                        ctypes.c_ulong(0), ctypes.c_ulong(0)), "PR_SET_PDEATHSIG")
    try:
        _map_ids(uid, gid)
    except OSError as exc:
        raise SandboxError(exc.errno or errno.EPERM, f"mapping the user namespace's ids: {exc.strerror}") from None
    _ready(limits, keep)
    global _group
    try:
        _group = cgroup.create(limits, me=pid, template=template, counters=False)
        if _group is not None:
            _group.join()
    except OSError as exc:
        raise SandboxError(exc.errno or errno.EIO, str(exc)) from None
    _inside(limits)
    _lock(limits)


def enter(limits: Limits, keep: Sequence[int], *, counters: bool = False, defer_paths: bool = False) -> None:
    """Put the rest of this process's life in the sandbox ``limits`` ask for. Returns in the sandbox
    (a new process, PID 1 of its namespace); the process that called it never returns (see ``_outer``).
    ``counters``: keep the read-only descriptors on the cgroup's counters (a sandboxed session's keeper
    reads each call's CPU from them; it runs no tool code and closes them in the session process).
    ``defer_paths``: return before the steps that depend on read_paths/write_paths (and before
    no_new_privs and seccomp, which must follow the mounts); ``lock_paths`` takes them later, with the
    paths of the Limits it is given, and no tool code may run before it did.
    Raises SandboxError naming the step that failed (the caller must then run no tool code)."""
    _ready(limits, keep)
    global _group
    try:
        _group = cgroup.create(limits)
    except OSError as exc:
        raise SandboxError(exc.errno or errno.EIO, str(exc)) from None
    uid, gid = os.getuid(), os.getgid()
    _check(libc().unshare(ctypes.c_int(namespaces(limits))), "unshare (user, PID, mount, network namespaces)")
    try:
        _map_ids(uid, gid)
    except OSError as exc:
        raise SandboxError(exc.errno or errno.EPERM, f"mapping the user namespace's ids: {exc.strerror}") from None
    # The outer puts the sandbox in its cgroup while the sandbox sets up, and says so on this pipe.
    joined = os.pipe() if _group is not None else None
    # The sandbox keeps its channels and the pipe's read end, nothing else: no descriptor that can move a
    # process between cgroups, none on its counters (the outer and the host read them) unless asked.
    read = list(_group.fds) if counters and _group is not None else []
    inner = forking.fork([*keep, *(joined[:1] if joined is not None else ()), *read])
    if inner != 0:
        _outer(inner, limits, _group, joined)
    if _group is not None:
        _group.procs, _group.fds = [], read  # the others were closed by the fork
        if not counters:
            _group.cpu_fd = _group.oom_fd = -1
    _check(libc().prctl(ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0),
                        ctypes.c_ulong(0), ctypes.c_ulong(0)), "PR_SET_PDEATHSIG")
    _inside(limits)
    global _joined
    _joined = joined
    if not defer_paths:
        _lock(limits)


def _inside(limits: Limits) -> None:
    """In the sandbox's PID 1: its mounts private, a /proc of its own, every cgroup mount read-only."""
    _check(libc().mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "making mounts private")
    _check(libc().mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None),
           "mounting a /proc of the sandbox's own")
    try:
        for point in cgroup.read_only_roots():
            try:
                mounts.read_only(point)
            except OSError as exc:  # no mount_setattr (Linux < 5.12): fatal only where a cgroup bounds the call
                if exc.errno != errno.ENOSYS or _group is not None:
                    raise
    except OSError as exc:
        raise SandboxError(exc.errno or errno.EPERM, str(exc)) from None


# The pipe on which the outer says the sandbox joined its cgroup, read at the end of ``lock_paths``.
_joined: tuple[int, int] | None = None


def lock_paths(limits: Limits) -> None:
    """The last steps of ``enter``: every mount read-only but ``write_paths``, no_new_privs, Landlock
    (``read_paths``/``write_paths``), the seccomp filter, then the cgroup joined. Raises SandboxError."""
    threads = thread_count()
    if threads > 1:  # Landlock and seccomp bind one thread: since the deferred enter, code ran (a factory loaded)
        raise SandboxError(errno.EINVAL, f"this process runs {threads} threads, so its sandbox cannot be locked")
    _lock(limits)


def _lock(limits: Limits) -> None:
    global _joined
    no_network = limits.network is False
    if limits.write_paths is not None:
        try:
            mounts.writable_only(limits.write_paths)
        except OSError as exc:
            raise SandboxError(exc.errno or errno.EPERM, str(exc)) from None
    joined, _joined = _joined, None
    try:
        seccomp.no_new_privs()
    except OSError as exc:
        raise SandboxError(exc.errno or errno.EPERM, str(exc)) from None
    if limits.read_paths is not None or limits.write_paths is not None:
        # The sandbox's own /proc stays readable: its limits are worked out from it, and it shows only
        # the sandbox's processes.
        reads = None if limits.read_paths is None else (*limits.read_paths, "/proc")
        landlock.restrict(reads, limits.write_paths)
    try:
        seccomp.load(no_network)
    except OSError as exc:
        raise SandboxError(exc.errno or errno.EPERM, str(exc)) from None
    if joined is not None:  # no call runs outside its cgroup
        try:
            word = os.read(joined[0], 4096)
        finally:
            os.close(joined[0])
        if word != b"1":
            why = word[1:].decode(errors="replace") or "the sandbox's parent ended"
            raise SandboxError(errno.EPERM, f"joining the call's cgroup: {why}")


def _statm_pages(field: int) -> int:
    fd = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)  # no file object: this runs in every sandbox
    try:
        return int(os.read(fd, 4096).split()[field])
    finally:
        os.close(fd)


def lock_rlimits(limits: Limits) -> None:
    """The call's rlimits, hard = soft, for good (a sandbox serves one call): no ``setrlimit`` inside can
    raise them. Memory is RLIMIT_AS (every mapping counts, shared ones too) and RLIMIT_DATA on top of
    what the sandbox holds now; CPU is RLIMIT_CPU at the CPU used so far + cpu_s, rounded up to a whole
    second (the kernel kills at the hard limit, C code or not); the others as in the warm worker."""
    import resource

    def lock(which: int, value: int) -> None:
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))

    if limits.memory_mb is not None:
        budget = limits.memory_mb * MIB
        lock(resource.RLIMIT_AS, _statm_pages(0) * PAGE + budget)
        lock(resource.RLIMIT_DATA, _statm_pages(5) * PAGE + budget)
    if limits.cpu_s is not None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        lock(resource.RLIMIT_CPU, max(1, math.ceil(usage.ru_utime + usage.ru_stime + limits.cpu_s)))
    if limits.file_size_mb is not None:
        lock(resource.RLIMIT_FSIZE, limits.file_size_mb * MIB)
    if limits.open_files is not None:
        lock(resource.RLIMIT_NOFILE, len(os.listdir("/proc/self/fd")) + limits.open_files)
    processes = limits.processes
    if processes is None and _group is None and limits.cpu_s is not None:
        processes = 0  # no cgroup counts the CPU of children: the call may start none (see enforceable)
    if processes is not None:
        tasks = sum(1 for _ in os.listdir("/proc/self/task"))
        lock(resource.RLIMIT_NPROC, tasks + processes)


def call_group() -> cgroup.CallGroup | None:
    """The cgroup of the sandbox this process entered (None: none was made)."""
    return _group


def out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) is the kernel refusing memory (ENOMEM): under RLIMIT_AS an
    mmap, a thread's stack or a module's mapping fails that way, not with MemoryError."""
    seen = 0
    while exc is not None and seen < 32:
        if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


@functools.lru_cache(maxsize=1)
def probe() -> Probe:
    """Whether a sandbox can be entered here: tried for real in a forked child (once per process)."""
    if not sys.platform.startswith("linux"):
        return Probe(False, f"the sandbox is Linux only, not {sys.platform}")
    libc()  # loaded here, not first in a child forked from a process that may run threads
    try:
        seccomp.prepare(True)
    except OSError as exc:
        return Probe(False, str(exc))
    return try_in_child(lambda: None, keep=lambda fd: functools.partial(enter, Limits(network=False), keep=(fd,)))


@functools.lru_cache(maxsize=1)
def paths_probe() -> Probe:
    """Whether a sandbox with write_paths can be entered here (Landlock, and every mount read-only but
    them): tried for real in a forked child (once per process)."""
    said = probe()
    if not said.ok:
        return said
    import tempfile

    where = tempfile.gettempdir()
    return try_in_child(lambda: None, keep=lambda fd: functools.partial(
        enter, Limits(read_paths=["/"], write_paths=[where]), keep=(fd,)))


__all__ = ["MINIMAL_ENV", "SandboxError", "call_group", "close_inherited", "enter", "lock_rlimits", "namespaces",
           "out_of_memory", "paths_probe", "probe", "set_environ", "settle"]
