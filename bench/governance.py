"""Per-call cost of the governance mechanisms, against a plain warm call and the sandboxes a user would
otherwise pick (bubblewrap, firejail), side by side in one run.

What each row times, per call (the median of 5 rounds, interleaved across rows, each of N calls):
- warm plain: a forked worker answers one call over a pipe (the pool's steady state, minus framing);
- warm + rlimits: the same, each call inside `rlimits.applied(..., keep=True)`, as a worker runs a tool's
  calls (memory, CPU, file size, open files; "+ processes" adds the RLIMIT_NPROC budget, which counts the
  user's tasks in /proc);
- warm, no-network worker / warm, Landlock worker: the worker entered its restriction once at start
  (restrictions cannot be lifted, so workers are grouped by them); the one-time cost is its own row;
- fresh fork / + netns / + Landlock: a new forked child per call, restricted before the call (what
  `fresh_process` or a key with no idle worker costs);
- python -c, bwrap --unshare-net, bwrap --unshare-all, firejail --net=none: a new interpreter per call,
  bare and inside each sandbox (a sandbox tool starts a process; this is the per-call way to use one);
- Executor rows: the same tool through `Executor.run` (2 workers, batches of N calls), plain, under
  rlimits (each call in its warm worker), and sandboxed: sandbox=True, network=False, read_paths/
  write_paths (each call in a one-shot process forked from the template, which enters the sandbox:
  namespaces, seccomp, Landlock; what toolfork does); "one call at a time" is the latency of a single
  sandboxed call after a pause (the median), which the pool's sandboxes entered ahead are for.
Usage: PYTHONPATH=. python bench/governance.py [N]. Prints a table of microseconds and ratios to the
warm plain call; a row whose tool is missing or refuses to run here says why instead.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from toolfork.executor import Executor
from toolfork.governance import Limits, applied, enter_no_network, landlock
from toolfork.tools import Tool

RLIMITS = Limits(memory_mb=256, cpu_s=2, file_size_mb=8, open_files=64)
RLIMITS_AND_PROCESSES = RLIMITS.merged_over(Limits(processes=64))
SANDBOX_DIR = tempfile.mkdtemp(prefix="toolfork-gov-bench-")


def tool() -> int:
    """Sum a hundred numbers (the call being timed)."""
    return sum(range(100))


def restrict_paths() -> None:
    landlock.restrict([sys.prefix, SANDBOX_DIR, "/usr", "/lib", "/etc"], [SANDBOX_DIR])


def _warm(n: int, setup: Callable[[], None] | None, around: Callable[[], object] | None) -> float:
    """Seconds per call of a forked worker answering `n` calls over pipes."""
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(req_w)
            os.close(resp_r)
            if setup is not None:
                setup()
            while os.read(req_r, 1):
                if around is None:
                    tool()
                else:
                    with around():  # type: ignore[attr-defined]
                        tool()
                os.write(resp_w, b"y")
        finally:
            os._exit(0)
    os.close(req_r)
    os.close(resp_w)
    os.write(req_w, b"x")  # one call to warm up (and to wait for the setup)
    os.read(resp_r, 1)
    start = time.perf_counter()
    for _ in range(n):
        os.write(req_w, b"x")
        os.read(resp_r, 1)
    elapsed = time.perf_counter() - start
    os.close(req_w)
    os.close(resp_r)
    os.waitpid(pid, 0)
    return elapsed / n


def _fresh(n: int, setup: Callable[[], None] | None) -> float:
    start = time.perf_counter()
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                if setup is not None:
                    setup()
                tool()
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError(f"the fresh child failed (status {status})")
    return (time.perf_counter() - start) / n


def _executor(n: int, limits: Limits | None) -> float:
    """Seconds per call of `tool` through an Executor (2 workers, one batch of `n` calls)."""
    t = Tool("tool", fn=tool, limits=limits)
    calls = [{"id": str(i), "name": "tool", "arguments": {}} for i in range(n)]
    with Executor([t], mode="fork", workers=2) as ex:
        ex.run(calls[:50])  # warm: the quick/slow estimate learns the tool
        start = time.perf_counter()
        results = ex.run(calls)
        elapsed = time.perf_counter() - start
    bad = [r for r in results if r.status != "ok"]
    if bad:
        raise RuntimeError(f"{len(bad)} calls failed: {bad[0].error}")
    return elapsed / n


def _executor_one_at_a_time(n: int, limits: Limits) -> float:
    """Seconds from `run` to result of one call at a time, each after a 50 ms pause (what an agent that
    makes one sandboxed call per turn waits; the set-up of the next sandbox happens in the pause)."""
    t = Tool("tool", fn=tool, limits=limits)
    took = []
    with Executor([t], mode="fork", workers=2) as ex:
        for i in range(n + 1):
            time.sleep(0.05)
            start = time.perf_counter()
            (r,) = ex.run([{"id": str(i), "name": "tool", "arguments": {}}])
            took.append(time.perf_counter() - start)
            if r.status != "ok":
                raise RuntimeError(f"a call failed: {r.error}")
    return statistics.median(took[1:])  # the first call has no sandbox entered ahead


def _command(n: int, argv: list[str]) -> float:
    first = subprocess.run(argv, capture_output=True, timeout=60)
    if first.returncode != 0:
        raise RuntimeError((first.stderr or first.stdout).decode(errors="replace").strip().splitlines()[-1:])
    start = time.perf_counter()
    for _ in range(n):
        subprocess.run(argv, capture_output=True, timeout=60, check=True)
    return (time.perf_counter() - start) / n


def _one_time(setup: Callable[[], None], n: int = 30) -> float:
    """Median seconds to apply a restriction once, timed inside fresh children."""
    times = []
    for _ in range(n):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                start = time.perf_counter()
                setup()
                os.write(write_fd, repr(time.perf_counter() - start).encode())
            finally:
                os._exit(0)
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as f:
            times.append(float(f.read()))
        os.waitpid(pid, 0)
    return statistics.median(times)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rounds = 5
    snippet = [sys.executable, "-c", "sum(range(100))"]
    rows: list[tuple[str, Callable[[], float]]] = [
        ("warm plain", lambda: _warm(n, None, None)),
        ("warm + rlimits (memory, cpu, file size, open files)",
         lambda: _warm(n, None, lambda: applied(RLIMITS, keep=True))),
        ("warm + rlimits + processes",
         lambda: _warm(n // 10, None, lambda: applied(RLIMITS_AND_PROCESSES, keep=True))),
        ("warm, no-network worker", lambda: _warm(n, enter_no_network, None)),
        ("warm, Landlock worker", lambda: _warm(n, restrict_paths, None)),
        ("fresh fork per call", lambda: _fresh(n // 10, None)),
        ("fresh fork + netns per call", lambda: _fresh(n // 10, enter_no_network)),
        ("fresh fork + Landlock per call", lambda: _fresh(n // 10, restrict_paths)),
        ("python -c per call", lambda: _command(max(n // 100, 5), snippet)),
        ("Executor: plain", lambda: _executor(n, None)),
        ("Executor: + rlimits (memory, cpu, file size, open files)", lambda: _executor(n, RLIMITS)),
        ("Executor: sandbox=True (one-shot sandbox per call)", lambda: _executor(n // 10, Limits(sandbox=True))),
        ("Executor: network=False (one-shot sandbox per call)", lambda: _executor(n // 10, Limits(network=False))),
        ("Executor: sandbox=True, one call at a time", lambda: _executor_one_at_a_time(max(n // 100, 5),
                                                                                    Limits(sandbox=True))),
        ("Executor: read/write_paths (one-shot + Landlock)",
         lambda: _executor(n // 10, Limits(read_paths=[sys.prefix, SANDBOX_DIR, "/usr", "/lib", "/etc"],
                                          write_paths=[SANDBOX_DIR]))),
    ]
    bwrap, firejail = shutil.which("bwrap"), shutil.which("firejail")
    rows.append(("bwrap --unshare-net python -c per call",
                 (lambda: _command(max(n // 100, 5), [bwrap, "--unshare-net", "--dev-bind", "/", "/", *snippet]))
                 if bwrap else (lambda: _missing("bwrap"))))
    rows.append(("bwrap --unshare-all python -c per call",
                 (lambda: _command(max(n // 100, 5), [bwrap, "--unshare-all", "--dev-bind", "/", "/", *snippet]))
                 if bwrap else (lambda: _missing("bwrap"))))
    rows.append(("firejail --net=none python -c per call",
                 (lambda: _command(max(n // 100, 5), [firejail, "--quiet", "--noprofile", "--net=none", *snippet]))
                 if firejail else (lambda: _missing("firejail"))))
    samples: dict[str, list[float]] = {name: [] for name, _ in rows}
    failed: dict[str, str] = {}
    for _ in range(rounds):  # rounds interleaved, so a burst of load elsewhere hits every row alike
        for name, measure in rows:
            if name in failed:
                continue
            try:
                samples[name].append(measure())
            except Exception as exc:
                failed[name] = f"not measured: {exc}"
    results: dict[str, float | str] = {name: failed.get(name) or statistics.median(samples[name])
                                       for name, _ in rows}
    results["one-time: enter a network namespace"] = _one_time(enter_no_network)
    results["one-time: Landlock restrict"] = _one_time(restrict_paths)
    base = results["warm plain"]
    assert isinstance(base, float)
    print(f"governance per-call cost, N={n}, Python {sys.version.split()[0]}, {os.uname().release}")
    print(f"{'row':58} {'us/call':>10} {'x warm plain':>13}")
    for name, value in results.items():
        if isinstance(value, float):
            print(f"{name:58} {value * 1e6:10.1f} {value / base:13.2f}")
        else:
            print(f"{name:58} {value}")
    shutil.rmtree(SANDBOX_DIR, ignore_errors=True)


def _missing(name: str) -> float:
    raise RuntimeError(f"{name} is not installed (Debian package: {'bubblewrap' if name == 'bwrap' else name})")


if __name__ == "__main__":
    main()
