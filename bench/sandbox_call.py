"""What one sandboxed call costs back to back (each call's result back before the next is sent), its
cgroup included, against a plain warm call and against a sandbox tool started per call (bubblewrap,
firejail), side by side in one run.

Rows (the median of ROUNDS rounds, interleaved across rows so a burst of load elsewhere hits each alike):
- plain warm call: `Executor.run([call])` on a warm worker;
- sandboxed, network=False: a one-shot per call, entered ahead by a spare (namespaces, seccomp);
- sandboxed + cgroup: the same with memory_mb, cpu_s and processes, so each call also gets a cgroup of
  its own (made by the spare ahead of its call, removed after it);
- sandboxed + cgroup + write_paths: also every mount read-only but one directory, and Landlock;
- bwrap --unshare-all / firejail --net=none per call: a new interpreter inside each tool's sandbox (a
  peer that is not installed is reported as missing).
Usage: PYTHONPATH=. python bench/sandbox_call.py [N] [--before TREE]. Prints ms per call and the ratios
the goal is stated in (sandboxed over plain; bwrap and firejail over sandboxed with its cgroup).
``--before TREE`` (another checkout of toolfork) adds the sandboxed + cgroup row of that tree and of
this one, each measured the same way (a fresh Python process per round, its cwd and PYTHONPATH the
tree), interleaved with the other rows, and the CPU each uses per call in all its processes (which
depends far less on load than the time).
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from toolfork.executor import Executor
from toolfork.governance import Limits, cgroup
from toolfork.tools import Tool

ROUNDS = 5
WORK = tempfile.mkdtemp(prefix="toolfork-sandbox-bench-")
CGROUP_LIMITS = {"memory_mb": 256, "cpu_s": 5.0, "processes": 16}


def tool() -> int:
    """Sum a hundred numbers (the call being timed)."""
    return sum(range(100))


def back_to_back(ex: Executor, n: int) -> float:
    """Seconds per call, one call at a time, each sent when the one before it is back."""
    ex.run([{"id": "warm", "name": "tool", "arguments": {}}])
    start = time.perf_counter()
    for i in range(n):
        (r,) = ex.run([{"id": str(i), "name": "tool", "arguments": {}}])
        if r.status != "ok":
            raise RuntimeError(f"a call failed: {r.error}")
    return (time.perf_counter() - start) / n


def per_command(argv: list[str], n: int) -> float:
    first = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    if first.returncode != 0:
        raise RuntimeError((first.stderr or first.stdout).decode(errors="replace").strip()[-300:])
    start = time.perf_counter()
    for _ in range(n):
        subprocess.run(argv, capture_output=True, timeout=60, check=True)
    return (time.perf_counter() - start) / n


# One tree's sandboxed + cgroup row, in a process of its own (its tree first on the path).
IN_TREE = """
import sys, time, warnings
warnings.simplefilter("ignore")
from toolfork.executor import Executor
from toolfork.governance import Limits
from toolfork.tools import Tool
def tool() -> int:
    "Sum a hundred numbers."
    return sum(range(100))
limits = Limits(network=False, memory_mb=256, cpu_s=5.0, processes=16)
with Executor([Tool("tool", fn=tool, limits=limits)], mode="fork", workers=2, timeout=30) as ex:
    ex.run([{"id": "warm", "name": "tool", "arguments": {}}])
    start = time.perf_counter()
    for i in range(int(sys.argv[1])):
        (r,) = ex.run([{"id": str(i), "name": "tool", "arguments": {}}])
        assert r.status == "ok", r.error
    print((time.perf_counter() - start) / int(sys.argv[1]))
"""


def in_tree(tree: str, n: int) -> float:
    env = {**os.environ, "PYTHONPATH": tree}
    done = subprocess.run([sys.executable, "-c", IN_TREE, str(n)], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-300:])
    return float(done.stdout.strip())


def cpu_in_tree(tree: str, n: int) -> float:
    """CPU seconds per call of one tree's row, in all its processes (host, template, the sandboxes: each
    reaped, so counted in ours): the run of ``n`` calls less one of ``n // 4``, so the start is not
    counted. It depends far less on load than the time per call (the kernel's own threads, which tear
    the namespaces down, are not counted)."""
    def used(calls: int) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        in_tree(tree, calls)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

    return (used(n) - used(n // 4)) / (n - n // 4)


def main() -> None:
    args = sys.argv[1:]
    before = None
    if "--before" in args:
        at = args.index("--before")
        before = os.path.abspath(args[at + 1])
        del args[at:at + 2]
    n = int(args[0]) if args else 200
    snippet = [sys.executable, "-c", "sum(range(100))"]
    sandboxes = {
        "plain warm call": None,
        "sandboxed, network=False": Limits(network=False),
        "sandboxed + cgroup (memory_mb, cpu_s, processes)": Limits(network=False, **CGROUP_LIMITS),
        "sandboxed + cgroup + write_paths (read-only mounts)": Limits(network=False, write_paths=[WORK],
                                                                      **CGROUP_LIMITS),
    }
    executors = {name: Executor([Tool("tool", fn=tool, limits=limits)], mode="fork", workers=2, timeout=30)
                 for name, limits in sandboxes.items()}
    rows: dict[str, Callable[[], float]] = {
        name: (lambda ex=ex: back_to_back(ex, n)) for name, ex in executors.items()}  # type: ignore[misc]
    peers = {"bwrap --unshare-all, python -c per call": ("bwrap", ["--unshare-all", "--dev-bind", "/", "/"]),
             "firejail --net=none, python -c per call": ("firejail", ["--quiet", "--noprofile", "--net=none"])}
    missing: dict[str, str] = {}
    for name, (program, options) in peers.items():
        path = shutil.which(program)
        if path is None:
            missing[name] = f"missing: {program} is not installed"
        else:
            rows[name] = lambda argv=[path, *options, *snippet]: per_command(argv, max(n // 10, 5))  # type: ignore[misc]
    if before is not None:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        rows[f"before ({before}): sandboxed + cgroup, own process"] = lambda: in_tree(before, n)
        rows["after (this tree): sandboxed + cgroup, own process"] = lambda: in_tree(here, n)
        rows["before: CPU per call, all its processes"] = lambda: cpu_in_tree(before, n)
        rows["after: CPU per call, all its processes"] = lambda: cpu_in_tree(here, n)
    samples: dict[str, list[float]] = {name: [] for name in rows}
    try:
        for _ in range(ROUNDS):
            for name, measure in rows.items():
                if name in missing:
                    continue
                try:
                    samples[name].append(measure())
                except Exception as exc:
                    missing[name] = f"not measured: {exc}"
    finally:
        for ex in executors.values():
            ex.close()
        shutil.rmtree(WORK, ignore_errors=True)
    took = {name: statistics.median(values) for name, values in samples.items() if values and name not in missing}
    where = cgroup.hierarchy()
    print(f"one call at a time, N={n}, {ROUNDS} rounds, Python {sys.version.split()[0]}, {os.uname().release}, "
          f"{os.cpu_count()} CPUs, cgroup: {where if isinstance(where, str) else f'v{where.version}'}")
    for name in [*rows, *(m for m in missing if m not in rows)]:
        print(f"  {name:55} " + (f"{took[name] * 1e3:8.2f} ms" if name in took else missing[name]))
    plain, boxed = took.get("plain warm call"), took.get("sandboxed + cgroup (memory_mb, cpu_s, processes)")
    if plain and boxed:
        print(f"  sandboxed + cgroup / plain warm call: {boxed / plain:.1f}x")
        for name in peers:
            if name in took:
                print(f"  {name.split(',')[0]} / sandboxed + cgroup: {took[name] / boxed:.1f}x")
    was = [took[name] for name in took if name.startswith("before (")]
    now = took.get("after (this tree): sandboxed + cgroup, own process")
    if was and now:
        print(f"  before / after (sandboxed + cgroup, own process): {was[0] / now:.2f}x")
        for name in peers:
            if name in took:
                print(f"  {name.split(',')[0]} / before: {took[name] / was[0]:.1f}x, / after: {took[name] / now:.1f}x")
    cpu_was = took.get("before: CPU per call, all its processes")
    cpu_now = took.get("after: CPU per call, all its processes")
    if cpu_was and cpu_now:
        print(f"  before / after (CPU per call): {cpu_was / cpu_now:.2f}x")
    with open("/proc/loadavg") as f:
        print(f"  load average at the end: {' '.join(f.read().split()[:3])}")


if __name__ == "__main__":
    main()
