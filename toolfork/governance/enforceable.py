"""Which of a Limits' fields cannot be enforced here, and why; and the fail-closed rule on top of it.

Why one function: the Executor must refuse to start when a tool asked for a limit this OS, kernel or
permission set cannot give it (`enforce="strict"`, the default), or log what it will not apply
(`enforce="best-effort"`); every mechanism's probe is asked the same way here, so no caller can forget
one. `network=True` asks for nothing and is always enforceable.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

from . import cgroup, landlock, rlimits, sandbox
from .limits import Limits
from .verdict import Probe

log = logging.getLogger("toolfork.governance")


@dataclass(frozen=True)
class Unenforceable:
    """One field that cannot be enforced here: the field, the value asked for, and why not."""

    field: str
    value: object
    reason: str

    def __str__(self) -> str:
        return f"{self.field}={self.value!r} cannot be enforced here: {self.reason}"


class LimitsNotEnforceable(RuntimeError):
    """Limits asked (strictly) for something this host cannot enforce; names each field and why."""

    def __init__(self, where: str, missing: list[Unenforceable]) -> None:
        self.missing = missing
        lines = "; ".join(str(m) for m in missing)
        super().__init__(f"{where}: {lines} (or pass enforce='best-effort' to run without them)")


class SandboxUnavailable(LimitsNotEnforceable):
    """A tool's calls are sandboxed, and where they would run there is no sandbox: refused, whatever
    ``enforce`` says (a sandboxed call never runs without its sandbox)."""

    def __init__(self, where: str, limits: Limits, why: str) -> None:
        said = ", ".join(f"{k}={v!r}" for k, v in limits.set_fields().items() if k in SANDBOX_FIELDS)
        self.missing = [Unenforceable("sandbox", True, why)]
        RuntimeError.__init__(self, f"{where}: its calls are sandboxed ({said}) and {why}: a sandboxed call never "
                                    "runs without its sandbox, so it is refused (enforce='best-effort' does not "
                                    "change that; use mode='fork' and a tool that is not inline)")


SANDBOX_FIELDS = ("network", "read_paths", "write_paths", "sandbox")


def unenforceable(limits: Limits, *, nowhere: str | None = None) -> list[Unenforceable]:
    """The fields of `limits` that cannot be enforced here, each with why (OS, permission, kernel).
    `nowhere`: the calls run where no mechanism applies (the host process, Ray's workers), and this
    is why: every field that asks for something is unenforceable, nothing is probed."""

    def verdict(probe: Callable[[], Probe]) -> Probe:
        return Probe(False, nowhere) if nowhere is not None else probe()

    found = []
    for name in rlimits.RLIMIT_OF:
        value = getattr(limits, name)
        if name == "processes" and limits.sandboxed and nowhere is None and cgroup.probe().ok:
            continue  # its cgroup's pids.max bounds it, root or not
        if value is not None:
            said = verdict(functools.partial(rlimits.probe, name))
            if not said.ok:
                found.append(Unenforceable(name, value, said.reason))
    if limits.sandboxed:
        said = verdict(sandbox.probe)
        if not said.ok:
            asked = {"sandbox": limits.sandbox or None, "network": False if limits.network is False else None,
                     "read_paths": limits.read_paths, "write_paths": limits.write_paths}
            for name, value in asked.items():
                if value is not None:
                    found.append(Unenforceable(name, list(value) if isinstance(value, tuple) else value,
                                               f"its sandbox cannot be entered: {said.reason}"))
            return found
        found.extend(_without_cgroup(limits, verdict))
    for name in ("read_paths", "write_paths"):
        value = getattr(limits, name)
        if value is not None:
            said = verdict(landlock.probe)
            if said.ok and name == "write_paths":  # and every mount read-only but them
                said = verdict(sandbox.paths_probe)
            if not said.ok:
                found.append(Unenforceable(name, list(value), said.reason))
    return found


def _without_cgroup(limits: Limits, verdict: Callable[[Callable[[], Probe]], Probe]) -> list[Unenforceable]:
    """What a sandboxed call's limits lose where no cgroup can be had: memory_mb (RLIMIT_AS counts one
    process's mappings: not a memfd's or tmpfs file's pages, not pipe buffers, not its children), and
    cpu_s where children could be started (each has a CPU limit of its own)."""
    if not cgroup.bounded(limits):
        return []
    said = verdict(cgroup.probe)
    if said.ok:
        return []
    why = f"no cgroup can be had here ({said.reason})"
    found = []
    if limits.memory_mb is not None:
        found.append(Unenforceable("memory_mb", limits.memory_mb, "only a cgroup bounds a call's memory of every "
                                   "kind (RLIMIT_AS counts one process's mappings: not memfd, tmpfs or pipe "
                                   f"buffers, not its children), and {why}"))
    if limits.cpu_s is not None:
        if limits.processes:
            found.append(Unenforceable("cpu_s", limits.cpu_s, f"with processes={limits.processes} only a cgroup "
                                       f"counts the CPU of the call's children, and {why}"))
        else:
            nproc = verdict(functools.partial(rlimits.probe, "processes"))
            if not nproc.ok:
                found.append(Unenforceable("cpu_s", limits.cpu_s, f"only a cgroup counts the CPU of the call's "
                                           f"children, {why}, and children cannot be forbidden: {nproc.reason}"))
    return found


def cgroup_notes(limits: Limits) -> list[str]:
    """What a sandboxed call gets instead of a cgroup, where it can be enforced another way (said at start)."""
    if not limits.sandboxed or not cgroup.bounded(limits) or cgroup.probe().ok:
        return []
    notes = []
    if limits.cpu_s is not None and not limits.processes:
        notes.append(f"cpu_s={limits.cpu_s!r} is enforced on the call's one process, which may start no other "
                     f"(processes=0): no cgroup can be had here ({cgroup.probe().reason})")
    if limits.processes is not None:
        notes.append(f"processes={limits.processes!r} is RLIMIT_NPROC (the user's processes in the sandbox), not a "
                     f"cgroup's pids.max: no cgroup can be had here ({cgroup.probe().reason})")
    return notes


def check(limits: Limits, *, where: str = "Limits", nowhere: str | None = None) -> list[Unenforceable]:
    """Fail closed: raise LimitsNotEnforceable if a strict limit cannot be enforced; under
    enforce="best-effort" log each one at WARNING instead. Returns what will not be applied.
    `nowhere` as for `unenforceable`; sandboxed limits there raise SandboxUnavailable, best-effort or not."""
    if nowhere is not None and limits.sandboxed:
        raise SandboxUnavailable(where, limits, nowhere)
    missing = unenforceable(limits, nowhere=nowhere)
    if missing and limits.strict:
        raise LimitsNotEnforceable(where, missing)
    for item in missing:
        log.warning("%s: not applied (enforce='best-effort'): %s", where, item)
    for note in cgroup_notes(limits):
        log.warning("%s: %s", where, note)
    return missing
