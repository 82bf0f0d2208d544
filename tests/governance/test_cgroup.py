"""The cgroup per sandboxed call: it bounds what every process of the call does, a hit is named even when
the tool itself returns, and no cgroup directory outlives its call or its pool."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolfork import Limits
from toolfork.executor import Executor
from toolfork.governance import cgroup
from toolfork.tools.tool import Tool

pytestmark = pytest.mark.skipif(not cgroup.probe().ok, reason=f"no cgroup can be made here: {cgroup.probe().reason}")


def own_cgroup() -> str:
    """The memory cgroup this call runs in (its /proc is the sandbox's own, its cgroups the host's)."""
    with open("/proc/self/cgroup") as f:
        return next(line.rstrip("\n").split(":", 2)[2] for line in f if ":memory:" in line)


def children_hoard_then_return() -> dict[str, Any]:
    """Four children touch 40 MB each at once (each within the per-process RLIMIT_AS the children
    inherit); the tool itself returns as if nothing happened."""
    code = "import time\nb = bytearray(40 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(2)"
    children = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(4)]
    return {"children": [child.wait() for child in children]}


def many_children(count: int) -> list[int]:
    children = [subprocess.Popen(["sleep", "2"]) for _ in range(count)]
    return [child.wait() for child in children]


def one_call(tool: Tool, arguments: dict[str, Any]) -> Any:
    with Executor([tool], workers=1, timeout=60) as ex:
        (result,) = ex.run([{"id": "c", "name": tool.name, "arguments": arguments}])
    return result


def test_a_call_runs_in_a_cgroup_of_its_own_and_none_is_left_after_close() -> None:
    where = cgroup.hierarchy()
    assert not isinstance(where, str)
    tool = Tool("where", description="its cgroup", fn=own_cgroup, limits=Limits(memory_mb=64, network=False))
    with Executor([tool], workers=1, timeout=60) as ex:
        template_dirs = [Path(d) for d in where.dirs.values()]
        seen = [r.output.data if r.output.data is not None else r.output.content[0].text
                for r in ex.run([{"id": str(i), "name": "where", "arguments": {}} for i in range(3)])]
    assert len(set(seen)) == 3, seen  # one cgroup per call
    assert all(f"/{cgroup.PREFIX}" in path for path in seen), seen
    leftovers = [p for d in template_dirs for p in d.glob(f"{cgroup.PREFIX}*")
                 if p.name.split("-")[-1].isdigit() and not _alive(int(p.name.split("-")[-1]))]
    assert leftovers == [], leftovers
    memory_mount = where.dirs["memory"].removesuffix(own_cgroup())
    for path in seen:  # each call's own directory is gone with its call
        assert not Path(memory_mount + path).exists(), path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_child_killed_at_the_limit_fails_the_call_even_when_the_tool_returns() -> None:
    tool = Tool("hoard", description="x", fn=children_hoard_then_return, limits=Limits(memory_mb=64, network=False))
    result = one_call(tool, {})
    assert result.status == "error" and result.error.type == "LimitExceeded", result
    assert "memory limit of 64 MB" in result.error.message


def test_processes_bound_every_process_of_the_call_as_root_too() -> None:
    tool = Tool("spawn", description="x", fn=many_children, limits=Limits(processes=3, network=False))
    result = one_call(tool, {"count": 10})
    assert result.status == "error" and result.error.type == "LimitExceeded", result
    assert "process limit of 3" in result.error.message


def test_the_subtree_of_a_template_that_died_is_removed() -> None:
    where = cgroup.hierarchy()
    assert not isinstance(where, str)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = [Path(d) / f"{cgroup.PREFIX}{dead.pid}" for d in where.dirs.values()]
    for base in stale:
        (base / "12345").mkdir(parents=True)
    with Executor([Tool("noop", description="x", fn=lambda: 1)], workers=1) as ex:  # its template sweeps at start
        assert ex.run([{"id": "1", "name": "noop", "arguments": {}}])[0].status == "ok"
        assert [base for base in stale if base.exists()] == []


def test_v2_counter_files_parse_unit_test_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A UNIT TEST of the cgroup v2 reading, on files shaped as the kernel writes them (cpu.stat,
    memory.events): not a proof of enforcement. This machine cannot give a cgroup v2 hierarchy with the
    memory or pids controller (both are bound to v1 hierarchies here), so the v2 path is not run for real."""
    group = tmp_path / f"{cgroup.PREFIX}4242" / "77"
    group.mkdir(parents=True)
    (group / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n")
    monkeypatch.setattr(cgroup, "hierarchy", lambda: cgroup.Hierarchy(2, {"unified": str(tmp_path)}))
    assert cgroup.call_hit(4242, 77, Limits(memory_mb=64)) == "memory_mb"
    assert cgroup.call_hit(4242, 77, Limits(cpu_s=2)) == "cpu_s"
    assert cgroup.call_hit(4242, 77, Limits(cpu_s=3)) is None
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    assert cgroup.call_hit(4242, 77, Limits(memory_mb=64)) is None
    with pytest.raises(cgroup.GroupGone):
        cgroup.call_hit(4242, 78, Limits(memory_mb=64))


def test_the_hosts_verdict_falls_back_to_the_outers_exit_status_when_the_group_is_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-shot that ended at once after sending its result: its group was taken back before the host
    read it, and the exit status its outer set from the same counters says what the group said."""
    import signal

    from toolfork.executor.backends.fork.group_verdict import overruled
    from toolfork.executor.types import ToolResult
    from toolfork.governance.rlimits import CGROUP_OOM_EXIT

    monkeypatch.setattr(cgroup, "hierarchy", lambda: cgroup.Hierarchy(2, {"unified": str(tmp_path)}))
    ok = ToolResult("c", "t", "ok")
    limits = Limits(memory_mb=64, cpu_s=1)
    over = overruled(ok, limits, 4242, 77, lambda pid: CGROUP_OOM_EXIT << 8)
    assert over.status == "error" and over.error is not None and over.error.type == "LimitExceeded", over
    assert "memory limit of 64 MB" in over.error.message
    cpu = overruled(ok, limits, 4242, 77, lambda pid: int(signal.SIGXCPU))
    assert cpu.error is not None and "CPU time limit of 1 s" in cpu.error.message, cpu
    assert overruled(ok, limits, 4242, 77, lambda pid: 0) is ok

    def never(pid: int) -> int:
        raise AssertionError("a sandbox refused before its group was made has no status to wait for")

    from toolfork.executor.types import ErrorInfo

    refused = ToolResult("c", "t", "error", error=ErrorInfo("LimitsNotEnforceable", "its sandbox could not be entered"))
    assert overruled(refused, limits, 4242, 77, never) is refused


def test_the_templates_verdict_on_a_cloned_sandboxs_exit_unit_test_only(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A UNIT TEST of ``cgroup.ended_as`` on counter files shaped as the kernel writes them (cgroup v2, as
    in the test above): the status the template reports for a sandbox it cloned, where no outer waits.
    The real path runs in tests/redteam/sandbox (test_whole_call: a call's children past cpu_s and
    memory_mb, as root)."""
    import signal

    from toolfork.governance.rlimits import CGROUP_OOM_EXIT

    group = tmp_path / f"{cgroup.PREFIX}4242" / "77"
    group.mkdir(parents=True)
    (group / "cpu.stat").write_text("usage_usec 200000\n")
    (group / "memory.events").write_text("oom 0\noom_kill 0\n")
    monkeypatch.setattr(cgroup, "hierarchy", lambda: cgroup.Hierarchy(2, {"unified": str(tmp_path)}))
    limits = Limits(memory_mb=64, cpu_s=1)
    killed, exited = int(signal.SIGKILL), 3 << 8
    assert cgroup.ended_as(exited, 0.1, limits, 4242, 77, cpu_killed=False) == exited
    assert cgroup.ended_as(killed, 0.1, limits, 4242, 77, cpu_killed=False) == killed  # killed, not for CPU
    assert cgroup.ended_as(killed, 0.1, limits, 4242, 77, cpu_killed=True) == int(signal.SIGXCPU)
    (group / "cpu.stat").write_text("usage_usec 1500000\n")  # its processes together past cpu_s
    assert cgroup.ended_as(exited, 0.1, limits, 4242, 77, cpu_killed=False) == int(signal.SIGXCPU)
    (group / "memory.events").write_text("oom 1\noom_kill 1\n")  # one of its processes OOM-killed
    assert cgroup.ended_as(exited, 0.1, limits, 4242, 77, cpu_killed=False) == CGROUP_OOM_EXIT << 8
    # no group (none can be made here, or it is gone): the kernel's kill at the RLIMIT_CPU hard limit
    assert cgroup.ended_as(killed, 1.0, limits, 4242, 78, cpu_killed=False) == int(signal.SIGXCPU)
    assert cgroup.ended_as(killed, 0.5, limits, 4242, 78, cpu_killed=False) == killed


V1 = ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified")


@pytest.mark.parametrize(("points", "mounted", "roots"), [
    (V1, {"/", "/sys", "/sys/fs/cgroup", *V1}, ("/sys/fs/cgroup",)),  # v1's tmpfs: one call
    (V1, {"/", "/sys", *V1}, V1),  # the directory is no mount of its own
    (V1, {"/", "/sys/fs/cgroup", "/sys/fs/cgroup/elsewhere", *V1}, V1),  # it holds another mount too
    (("/sys/fs/cgroup",), {"/", "/sys/fs/cgroup"}, ("/sys/fs/cgroup",)),  # v2 alone
    (("/a/cg", "/b/cg"), {"/", "/a", "/b", "/a/cg", "/b/cg"}, ("/a/cg", "/b/cg")),  # no common parent
    (("/cpu", "/memory"), {"/", "/cpu", "/memory"}, ("/cpu", "/memory")),  # never "/" itself
])
def test_the_mounts_a_sandbox_makes_read_only_cover_every_cgroup_mount_and_nothing_else(
        points: tuple[str, ...], mounted: set[str], roots: tuple[str, ...]) -> None:
    assert cgroup.covering(points, mounted) == roots


def test_every_cgroup_mount_here_is_below_a_mount_the_sandbox_makes_read_only() -> None:
    roots = cgroup.read_only_roots()
    assert all(any(p == r or p.startswith(r.rstrip("/") + "/") for r in roots) for p in cgroup.mount_points())
