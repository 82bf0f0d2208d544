"""A cgroup per sandboxed call: its limits bound the whole call, every process and every kind of memory.

Why: an rlimit binds one process, and RLIMIT_AS counts mappings only, so a call that starts children,
writes a memfd or a tmpfs file, or fills pipe and socket buffers went past it. A memory cgroup charges
all of those (anonymous, shmem/memfd/tmpfs pages, kernel pipe and socket buffers, every child's), the
cpu accounting counts the CPU of every process in it, and the pids controller bounds how many tasks it
holds. The sandbox's first process makes its cgroup and is in it before any tool code runs (a spare
does this ahead of its call, so the cost is off the call's path):

    create(limits, me, template): mkdir <own cgroup>/toolfork-<template pid>/<one-shot pid> (memory,
                           cpuacct, pids; or one directory under cgroup v2), the limits written
    cloned sandbox (the template is its parent; ``sandbox.settle``): joins it itself, keeps no descriptor;
        template: polls its CPU (``cpu_used``) while it runs a call, SIGKILLs it at cpu_s; when it
                  reaps it, ``ended_as``: killed at cpu_s or CPU past it -> SIGXCPU, an OOM kill of
                  any of its processes -> exit CGROUP_OOM_EXIT (the host names both LimitExceeded)
    forked sandbox (``sandbox.enter``, sessions): the outer made it (read-only descriptors kept on
        its counters), puts the sandbox (PID 1) in while it sets up and stays out (the OOM killer must
        not choose it), polls the CPU (``CallGroup.watch``) and leaves with the same verdict
    inside: every cgroup mount read-only (nothing inside can lift a limit or leave the group)
    host: a sandboxed call's result came ──> call_hit(template, pid): an OOM kill of any of its
          processes, or CPU past cpu_s, makes the result LimitExceeded, whatever the call said (read
          outside the sandbox; from the one-shot's exit status when the group is gone already)
    template: reaps the one-shot ──> remove(pid): the directories go

A group is made and removed per call, not reset and reused: measured here (v1), a pool of reset groups
(renamed back and forth) cost as much as mkdir and rmdir, the kernel's work included.

The limits count from the moment the cgroup is made: the sandbox's own set-up (the pages the one-shot
copies from the template, a few MB) is part of memory_mb, its milliseconds part of cpu_s.

Where: cgroup v1 with the memory, cpuacct and pids controllers mounted and this process's cgroups
writable (root), or cgroup v2 with a delegated subtree (this process's cgroup, or its parent, writable
with the memory and pids controllers enabled for its children, as systemd's ``Delegate=yes`` gives).
Elsewhere ``probe`` says why not, and the Executor says so at start (see ``governance.enforceable``).
"""

from __future__ import annotations

import errno
import functools
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .limits import Limits
from .rlimits import CGROUP_OOM_EXIT
from .verdict import Probe

MIB = 1024 * 1024
V1_CONTROLLERS = ("memory", "cpuacct", "pids")
V2_CONTROLLERS = ("memory", "pids")
CPU_POLL_S = 0.02  # how often the CPU the call used is looked at (the template's, or the outer's)
PREFIX = "toolfork-"


@dataclass(frozen=True)
class Hierarchy:
    """Where call groups are made: ``version`` 1 or 2; ``dirs``: the directory of this process's cgroup
    to make them under, per controller (v1) or ``{"unified": dir}`` (v2)."""

    version: int
    dirs: dict[str, str]


def _mount_table() -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, options) of each mount here, from /proc/self/mounts."""
    found = []
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            for line in f:
                words = line.split()
                if len(words) >= 4:
                    found.append((words[1].replace("\\040", " "), words[2], set(words[3].split(","))))
    except OSError:
        pass
    return found


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, options) of each cgroup mount."""
    return [mount for mount in _mount_table() if mount[1] in ("cgroup", "cgroup2")]


def _own() -> dict[str, str]:
    """This process's cgroup path per controller ("" for the v2 hierarchy), from /proc/self/cgroup."""
    own: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3:
                    for name in parts[1].split(","):
                        own[name] = parts[2]
    except OSError:
        pass
    return own


def _words(path: str) -> set[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return set(f.read().split())
    except OSError:
        return set()


def _locate() -> Hierarchy | str:
    """The hierarchy call groups can be made in here, or why there is none."""
    mounts, own = _mounts(), _own()
    if not mounts:
        return "no cgroup file system is mounted"
    v1 = {opt: point for point, kind, opts in mounts if kind == "cgroup" for opt in opts if opt in V1_CONTROLLERS}
    if all(c in v1 for c in V1_CONTROLLERS) and all(c in own for c in V1_CONTROLLERS):
        dirs = {c: os.path.join(v1[c], own[c].lstrip("/")).rstrip("/") for c in V1_CONTROLLERS}
        unwritable = [d for d in dirs.values() if not os.access(d, os.W_OK | os.X_OK)]
        if not unwritable:
            return Hierarchy(1, dirs)
        v1_why = f"uid {os.geteuid()} cannot make cgroups under {unwritable[0]} (cgroup v1: root can)"
    else:
        missing = [c for c in V1_CONTROLLERS if c not in v1]
        v1_why = f"cgroup v1 lacks the {', '.join(missing)} controller(s)" if v1 else "no cgroup v1 controllers"
    for point, kind, _opts in mounts:
        if kind != "cgroup2" or "" not in own:
            continue
        mine = os.path.join(point, own[""].lstrip("/")).rstrip("/")
        for candidate in (mine, os.path.dirname(mine)):
            if not candidate.startswith(point):
                continue
            enabled = _words(os.path.join(candidate, "cgroup.subtree_control"))
            if all(c in enabled for c in V2_CONTROLLERS) and os.access(candidate, os.W_OK | os.X_OK):
                return Hierarchy(2, {"unified": candidate})
        return f"{v1_why}; no delegated cgroup v2 subtree with memory and pids at {point}"
    return v1_why


@functools.lru_cache(maxsize=1)
def mount_points() -> tuple[str, ...]:
    """Every cgroup file system mounted here (a sandbox makes them all read-only)."""
    return tuple(point for point, _kind, _opts in _mounts())


@functools.lru_cache(maxsize=1)
def read_only_roots() -> tuple[str, ...]:
    """The mounts a sandbox makes read-only, each with everything mounted below it, so that every cgroup
    mount is: the one mount they are all directly under, where it holds no other mount (cgroup v1's
    tmpfs at /sys/fs/cgroup: one system call in each sandbox rather than one per controller), else
    each cgroup mount. Looked up once (the template's, before it forks a sandbox)."""
    return covering(mount_points(), {point for point, _kind, _opts in _mount_table()})


def covering(points: tuple[str, ...], mounted: set[str]) -> tuple[str, ...]:
    """``read_only_roots`` of the cgroup mounts ``points``, every mount point here being ``mounted``."""
    parents = {os.path.dirname(point) for point in points}
    if len(points) < 2 or len(parents) != 1:
        return points
    parent = parents.pop()
    beneath = {point for point in mounted if point.startswith(parent.rstrip("/") + "/")}
    return (parent,) if parent in mounted and parent != "/" and beneath == set(points) else points


@functools.lru_cache(maxsize=1)
def hierarchy() -> Hierarchy | str:
    """Where call groups can be made in this process's cgroups, or why not (looked up once)."""
    return _locate()


def _base(directory: str, template: int) -> str:
    return f"{directory}/{PREFIX}{template}"


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read_fd(fd: int) -> bytes:
    return os.pread(fd, 4096, 0)


@dataclass
class CallGroup:
    """The cgroup a sandboxed call runs in, seen from inside: descriptors on its counters (read-only)."""

    limits: Limits
    cpu_fd: int = -1  # cpuacct.usage (ns) or cpu.stat (usage_usec)
    oom_fd: int = -1  # memory.oom_control or memory.events: the "oom_kill N" line
    version: int = 1
    fds: list[int] = field(default_factory=list)
    # cgroup.procs of each controller, opened for writing before the namespaces (on the host's mounts:
    # so they neither block the sandbox's read-only remount nor are reachable from it once closed)
    procs: list[int] = field(default_factory=list)

    def join(self, pid: int = 0) -> None:
        """Put process ``pid`` (0: this one) in the group, then close the descriptors that can. The outer
        puts the sandbox in and stays out (the OOM killer must not choose it, and its polling is not the
        call's CPU); it does so while the sandbox sets itself up, for a move between cgroups waits for
        an RCU grace period (milliseconds on a busy machine), and the sandbox waits for its word before
        it returns (``sandbox.enter``)."""
        try:
            for fd in self.procs:
                os.write(fd, str(pid).encode())
        finally:
            self.drop_writers()

    def drop_writers(self) -> None:
        """Close the cgroup.procs descriptors (the outer, once it put the sandbox in; the sandbox never
        holds them: ``forking.fork`` closed them in it)."""
        for fd in self.procs:
            try:
                os.close(fd)
            except OSError:
                pass
        self.procs = []

    def cpu_s(self) -> float:
        """The CPU every process of the call used so far, in seconds."""
        data = _read_fd(self.cpu_fd)
        if self.version == 1:
            return int(data.split()[0]) / 1e9
        for line in data.splitlines():
            key, _, value = line.partition(b" ")
            if key == b"usage_usec":
                return int(value) / 1e6
        return 0.0

    def oom_kills(self) -> int:
        """How many of the call's processes the kernel killed at its memory limit."""
        for line in _read_fd(self.oom_fd).splitlines():
            key, _, value = line.partition(b" ")
            if key == b"oom_kill":
                return int(value)
        return 0

    def watch(self, inner: int) -> int | None:
        """In the outer: wait for the sandbox (``inner``) to end, killing it when the call's processes
        together reach cpu_s; its wait status, with the CPU limit's kill reported as SIGXCPU and an OOM
        kill as an exit with ``CGROUP_OOM_EXIT``. None when there is no such child."""
        budget = self.limits.cpu_s
        killed_at_cpu = False
        # without a budget the wait below blocks: nothing to poll
        ended: Callable[[], object] = _ending(inner) if budget is not None else (lambda: None)
        while True:
            try:
                pid, status = os.waitpid(inner, os.WNOHANG if budget is not None else 0)
            except InterruptedError:
                continue
            except ChildProcessError:
                return None
            if pid == inner:
                break
            if budget is not None and not killed_at_cpu and self.cpu_s() >= budget:
                killed_at_cpu = True
                try:
                    os.kill(inner, signal.SIGKILL)  # PID 1 of the call's namespace: every process dies
                except OSError:
                    pass
                continue
            ended()  # wakes at once when the sandbox ends, else after CPU_POLL_S
        # The verdict of the group, whatever the sandbox said or how it ended (a tool can forge its own
        # result): the host reads it from this exit status when the group is gone before it looked.
        if killed_at_cpu and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            return int(signal.SIGXCPU)  # a wait status: killed by SIGXCPU
        if self.limits.memory_mb is not None and self.oom_kills() > 0:
            return CGROUP_OOM_EXIT << 8  # a wait status: exited with CGROUP_OOM_EXIT
        if budget is not None and self.cpu_s() >= budget:
            return int(signal.SIGXCPU)
        return status


class GroupGone(OSError):
    """The call group of a one-shot is gone (the one-shot ended and its template removed the group)."""


def call_hit(template: int, pid: int, limits: Limits) -> str | None:
    """The limit the processes of one-shot ``pid``'s call went past together, by the Limits field: a
    process of it OOM-killed at memory_mb, or CPU at cpu_s; None when neither, or no group bounds these
    ``limits`` here. Read in the host, outside the sandbox, from files of the group that nothing inside
    can write: whatever the call itself reported. Raises GroupGone when the group is not there (then the
    one-shot's exit status carries the same verdict: ``CallGroup.watch``)."""
    where = hierarchy()
    if isinstance(where, str) or not bounded(limits):
        return None
    oom_path, cpu_path = _counters(where, template, pid)
    reader = CallGroup(limits, version=where.version)
    try:
        if limits.memory_mb is not None:
            reader.oom_fd = os.open(oom_path, os.O_RDONLY | os.O_CLOEXEC)
            if reader.oom_kills() > 0:
                return "memory_mb"
        if limits.cpu_s is not None:
            reader.cpu_fd = os.open(cpu_path, os.O_RDONLY | os.O_CLOEXEC)
            if reader.cpu_s() >= limits.cpu_s:
                return "cpu_s"
        return None
    except FileNotFoundError:
        raise GroupGone(errno.ENOENT, f"the call group of process {pid} is gone") from None
    finally:
        for fd in (reader.oom_fd, reader.cpu_fd):
            if fd >= 0:
                os.close(fd)


def _counters(where: Hierarchy, template: int, pid: int) -> tuple[str, str]:
    """The paths of one-shot ``pid``'s OOM-kill and CPU counters."""
    if where.version == 1:
        return (os.path.join(_base(where.dirs["memory"], template), str(pid), "memory.oom_control"),
                os.path.join(_base(where.dirs["cpuacct"], template), str(pid), "cpuacct.usage"))
    group = os.path.join(_base(where.dirs["unified"], template), str(pid))
    return os.path.join(group, "memory.events"), os.path.join(group, "cpu.stat")


def cpu_used(template: int, pid: int) -> float | None:
    """The CPU seconds every process of one-shot ``pid``'s call used so far (None: no group)."""
    where = hierarchy()
    if isinstance(where, str):
        return None
    reader = CallGroup(Limits(), version=where.version)
    try:
        reader.cpu_fd = os.open(_counters(where, template, pid)[1], os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return reader.cpu_s()
    except (OSError, ValueError, IndexError):
        return None
    finally:
        os.close(reader.cpu_fd)


def ended_as(status: int, used_s: float, limits: Limits, template: int, pid: int, *, cpu_killed: bool) -> int:
    """The wait status the template reports for a sandbox it cloned itself (no outer waits for it):
    the rule of ``CallGroup.watch``, read from the group before it is removed. Killed by the template
    at cpu_s (``cpu_killed``), or its group counted CPU past cpu_s: SIGXCPU; an OOM kill in its group:
    an exit with ``CGROUP_OOM_EXIT``; without a group, the kernel's SIGKILL at the RLIMIT_CPU hard
    limit (``used_s``, from wait4, at cpu_s or more): SIGXCPU; else ``status``."""
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    if cpu_killed and killed:
        return int(signal.SIGXCPU)
    try:
        hit = call_hit(template, pid, limits)
    except GroupGone:
        hit = None
    if hit == "memory_mb":
        return CGROUP_OOM_EXIT << 8
    if hit == "cpu_s" or (killed and limits.cpu_s is not None and used_s >= limits.cpu_s):
        return int(signal.SIGXCPU)
    return status


def _ending(pid: int) -> Callable[[], object]:
    """A wait of up to CPU_POLL_S that returns as soon as child ``pid`` ends (a pidfd: Linux 5.3+)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return lambda: time.sleep(CPU_POLL_S)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return lambda: poller.poll(CPU_POLL_S * 1000)


def create(limits: Limits, me: int | None = None, template: int | None = None, *,
           counters: bool = True) -> CallGroup | None:
    """Make the cgroup for this one-shot's call (under the template's) and write ``limits`` into it; the
    sandbox joins it (``CallGroup.join``). ``me``, ``template``: this process's pid and its template's
    as the template sees them (default: ``getpid()``, ``getppid()``; a sandbox cloned into its PID
    namespace is told them). ``counters``: open read-only descriptors on its CPU and OOM counters too
    (a spare cloned for its template needs none: the template and the host read them by path). None
    where no cgroup can be had here (``probe`` says why), or ``limits`` ask for nothing a cgroup bounds.
    Raises OSError naming the step."""
    where = hierarchy()
    if isinstance(where, str) or not bounded(limits):
        return None
    me = os.getpid() if me is None else me
    template = os.getppid() if template is None else template
    budget = None if limits.memory_mb is None else str(int(limits.memory_mb * MIB))
    group = CallGroup(limits, version=where.version)
    try:
        if where.version == 1:
            made = _make_v1(where, template, me)
            memory = made["memory"]
            if budget is not None:
                _write(f"{memory}/memory.limit_in_bytes", budget)
                if os.path.exists(f"{memory}/memory.memsw.limit_in_bytes"):
                    _write(f"{memory}/memory.memsw.limit_in_bytes", budget)  # no swap either
            if limits.processes is not None:  # the sandbox, then the call's
                _write(made["pids"] + "/pids.max", str(1 + limits.processes))
            group.procs = [os.open(f"{path}/cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for path in made.values()]
            if counters:
                group.cpu_fd = os.open(made["cpuacct"] + "/cpuacct.usage", os.O_RDONLY | os.O_CLOEXEC)
                group.oom_fd = os.open(f"{memory}/memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
        else:
            base = _base(where.dirs["unified"], template)
            try:
                os.mkdir(base)
                _write(os.path.join(base, "cgroup.subtree_control"), " ".join(f"+{c}" for c in V2_CONTROLLERS))
            except FileExistsError:
                pass
            path = os.path.join(base, str(me))
            _fresh_dir(path)
            if budget is not None:
                _write(os.path.join(path, "memory.max"), budget)
                if os.path.exists(os.path.join(path, "memory.swap.max")):
                    _write(os.path.join(path, "memory.swap.max"), "0")
            if limits.processes is not None:
                _write(os.path.join(path, "pids.max"), str(1 + limits.processes))
            group.procs = [os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)]
            if counters:
                group.cpu_fd = os.open(os.path.join(path, "cpu.stat"), os.O_RDONLY | os.O_CLOEXEC)
                group.oom_fd = os.open(os.path.join(path, "memory.events"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise OSError(exc.errno or errno.EIO, f"making the call's cgroup: {exc.strerror or exc}") from None
    group.fds = [fd for fd in (group.cpu_fd, group.oom_fd) if fd >= 0]
    return group


def _make_v1(where: Hierarchy, template: int, me: int) -> dict[str, str]:
    """A new call group per v1 controller: ``<dir>/toolfork-<template>/<me>`` (the first one-shot of a
    template makes ``toolfork-<template>`` too)."""
    made = {}
    for name, directory in where.dirs.items():
        path = made[name] = f"{_base(directory, template)}/{me}"
        try:
            _fresh_dir(path)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _fresh_dir(path)
    return made


def _fresh_dir(path: str) -> None:
    """mkdir ``path``; one left by an earlier holder of this pid (its template was killed before it could
    remove it) is removed first, if empty (else: EBUSY, and the sandbox is refused)."""
    try:
        os.mkdir(path)
    except FileExistsError:
        os.rmdir(path)
        os.mkdir(path)


def bounded(limits: Limits) -> bool:
    """Whether ``limits`` ask for something a call group bounds (memory, CPU, processes)."""
    return limits.memory_mb is not None or limits.cpu_s is not None or limits.processes is not None


def remove(pid: int, template: int | None = None) -> None:
    """In the template, once the one-shot ``pid`` is reaped: remove its cgroup directories (a no-op
    where it made none)."""
    where = hierarchy()
    if isinstance(where, str):
        return
    owner = os.getpid() if template is None else template
    for directory in where.dirs.values():
        try:
            os.rmdir(os.path.join(_base(directory, owner), str(pid)))
        except OSError:
            pass


def remove_all(template: int | None = None) -> None:
    """The template's whole subtree (at its exit), and those of templates that died without theirs."""
    where = hierarchy()
    if isinstance(where, str):
        return
    owner = os.getpid() if template is None else template
    for directory in where.dirs.values():
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if not name.startswith(PREFIX) or not name[len(PREFIX):].isdigit():
                continue
            pid = int(name[len(PREFIX):])
            if pid != owner and _alive(pid):
                continue
            base = os.path.join(directory, name)
            for child in _listdir(base):
                if child.isdigit():
                    try:
                        os.rmdir(os.path.join(base, child))
                    except OSError:
                        pass
            try:
                os.rmdir(base)
            except OSError:
                pass


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


@functools.lru_cache(maxsize=1)
def probe() -> Probe:
    """Whether a call group can be made here: a real one made, joined by a throw-away child and removed."""
    where = hierarchy()
    if isinstance(where, str):
        return Probe(False, where)
    from .verdict import try_in_child

    def attempt() -> None:
        group = create(Limits(memory_mb=64, processes=4))
        if group is None:
            raise OSError(errno.ENOSYS, "no cgroup")
        group.join()
        group.cpu_s()
        group.oom_kills()

    said = try_in_child(lambda: _leave_then(attempt))
    return said


def _leave_then(attempt: object) -> None:
    """Run the probe's attempt in a grandchild (so the child, our direct child, can remove its group)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        code = 0
        try:
            attempt()  # type: ignore[operator]
        except BaseException as exc:
            os.write(write_fd, f"{exc}".encode(errors="replace")[:2000])
            code = 1
        os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        said = f.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    remove(pid, template=os.getpid())
    remove_all(template=os.getpid())
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        raise OSError(errno.EPERM, said or f"the probe ended with status {status}")


__all__ = ["CallGroup", "GroupGone", "Hierarchy", "bounded", "call_hit", "cpu_used", "create", "ended_as", "hierarchy",
           "mount_points", "probe", "remove", "remove_all"]
