"""The workloads: each submits batches the way an agent or a job would and turns the outcomes
into figures. They only talk to the ``Peer`` interface, so every executor runs exactly the same code.

Every pool is warm before timing starts (made, then a warm-up batch on every worker); every figure
comes with the statuses it was measured on, and a batch that did not come back fully "ok" where it
should have makes the workload fail loudly instead of reporting a fast wrong answer.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psutil

from toolfork.bench import procs
from toolfork.bench.base import Outcome, Peer, Task
from toolfork.bench.batch import Context, MetricSpec, WorkloadError, require_ok, run_batch, timed_reps
from toolfork.bench.calls import FRESH_SUFFIX, time_cpu_call
from toolfork.bench.config import MB, BenchConfig, size_label
from toolfork.bench.payloads import metric_specs as payloads_specs
from toolfork.bench.payloads import w_payloads
from toolfork.bench.user_workload import metric_specs as user_specs
from toolfork.bench.user_workload import w_user


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


# --- the workloads ------------------------------------------------------------------------------


def w_io(ctx: Context) -> dict[str, Any]:
    c = ctx.config
    with ctx.pool(c.io_workers) as peer:
        times = timed_reps(peer, lambda: [Task("sleep_call", {"seconds": c.io_sleep_s})] * c.io_calls, c.reps, "io")
    return {"io_wall_s": _median(times), "io_all_s": times}


def w_cpu(ctx: Context) -> dict[str, Any]:
    c = ctx.config
    one = time_cpu_call(c.cpu_iterations)
    tasks = [Task("cpu_call", {"iterations": c.cpu_iterations})] * c.cpu_calls
    with ctx.pool(c.cores) as peer:
        times = timed_reps(peer, lambda: tasks, c.reps, "cpu")
    return {
        "cpu_wall_s": _median(times),
        "cpu_all_s": times,
        "cpu_one_call_s": one,
        "cpu_ideal_s": math.ceil(c.cpu_calls / c.cores) * one,
    }


def w_small(ctx: Context) -> dict[str, Any]:
    c = ctx.config
    tasks = [Task("trivial_call", {"x": i}) for i in range(c.small_calls)]
    with ctx.pool(c.small_calls) as peer:
        times = timed_reps(peer, lambda: tasks, c.small_reps, "small")
    times.sort()
    return {
        "small_median_ms": _median(times) * 1e3,
        "small_p90_ms": times[min(len(times) - 1, int(len(times) * 0.9))] * 1e3,
    }


def w_tiny(ctx: Context) -> dict[str, Any]:
    c = ctx.config
    tasks = [Task("trivial_call", {"x": i}) for i in range(c.tiny_calls)]
    with ctx.pool(c.cores) as peer:
        times = timed_reps(peer, lambda: tasks, c.tiny_reps, "tiny")
    return {"tiny_us_per_call": _median(times) / c.tiny_calls * 1e6, "tiny_batch_s": _median(times)}


def w_mixed(ctx: Context) -> dict[str, Any]:
    """One slow call first, then quick ones, on 2 workers: the quick ones should not wait."""
    c = ctx.config
    tasks = [Task("stamp_call", {"seconds": c.mixed_slow_s})] + [
        Task("stamp_call", {"seconds": 0.0}) for _ in range(c.mixed_quick_calls)
    ]
    quick_done, walls = [], []
    with ctx.pool(c.mixed_workers) as peer:
        for _ in range(c.mixed_reps):
            t0 = time.monotonic()
            outcomes, dt = run_batch(peer, tasks)
            require_ok("mixed", outcomes)
            quick_done.append(max(float(o.value) for o in outcomes[1:]) - t0)
            walls.append(dt)
    return {"mixed_quick_done_s": _median(quick_done), "mixed_wall_s": _median(walls)}


def w_hang(ctx: Context) -> dict[str, Any]:
    """One call that never returns among quick ones, all with a timeout. Afterwards: is the stuck
    call still running somewhere (a process or thread left behind), and does the next batch run at
    full speed?"""
    c = ctx.config
    marker_dir = tempfile.mkdtemp(prefix="toolfork-bench-hang-")
    try:
        t = c.hang_timeout_s
        tasks = [Task("hang_call", {"marker_dir": marker_dir}, t)] + [
            Task("sleep_call", {"seconds": 0.05}, t) for _ in range(c.hang_calls - 1)
        ]
        still: list[tuple[int, list[psutil.Process]]] = []
        with ctx.pool(c.hang_calls, after_close=lambda: still.append(_still_running(marker_dir))) as peer:
            outcomes, wall = run_batch(peer, tasks)
            nxt = [Task("sleep_call", {"seconds": 0.1}, 10.0) for _ in range(c.hang_calls)]
            next_outcomes, next_wall = run_batch(peer, nxt)
        procs.kill_all(still[0][1])  # shared-process peers (Ray) are not cleaned up by ctx.pool
        return {
            "hang_wall_s": wall,
            "hang_status": outcomes[0].status,
            "hang_others_ok": sum(o.status == "ok" for o in outcomes[1:]),
            "hang_next_batch_s": next_wall if all(o.status == "ok" for o in next_outcomes) else None,
            "hang_still_running": still[0][0],
        }
    finally:
        shutil.rmtree(marker_dir, ignore_errors=True)


def _still_running(marker_dir: str, grace_s: float = 0.5) -> tuple[int, list[psutil.Process]]:
    """How many hung calls still run after the pool was closed: processes alive, or threads of this
    process. (The processes are then killed with the rest of what the pool left behind.)"""
    deadline = time.monotonic() + grace_s
    while True:
        alive_procs, alive_threads = [], 0
        thread_ids = {th.ident for th in threading.enumerate()}
        for name in os.listdir(marker_dir):
            pid_s, _, tid_s = name.partition("-")
            pid = int(pid_s)
            if pid == os.getpid():
                alive_threads += int(tid_s) in thread_ids
                continue
            with contextlib.suppress(psutil.Error):
                p = psutil.Process(pid)
                if p.status() != psutil.STATUS_ZOMBIE:
                    alive_procs.append(p)
        if not alive_procs or time.monotonic() >= deadline:
            return len(alive_procs) + alive_threads, alive_procs
        time.sleep(0.02)


def w_crash(ctx: Context) -> dict[str, Any]:
    """One call kills its process; the others are in flight at that moment. How many results come
    back, and does the same executor run the next batch?"""
    c = ctx.config
    t = c.crash_call_timeout_s
    tasks = [Task("sleep_call", {"seconds": c.crash_sleep_s}, t) for _ in range(c.crash_calls)]
    tasks[1] = Task("crash_call", {"delay": 0.01, "code": 3}, t)
    with ctx.pool(c.crash_calls) as peer:
        outcomes, wall = run_batch(peer, tasks)
        after, _ = run_batch(peer, [Task("trivial_call", {"x": i}, t) for i in range(c.crash_calls)])
    others = [o for i, o in enumerate(outcomes) if i != 1]
    return {
        "crash_results_back": sum(o.status == "ok" for o in others),
        "crash_status": outcomes[1].status,
        "crash_usable_after": all(o.status == "ok" for o in after),
        "crash_wall_s": wall,
    }


def w_payload(ctx: Context) -> dict[str, Any]:
    c = ctx.config
    out: dict[str, Any] = {}
    with ctx.pool(2) as peer:
        for size, reps in zip(c.payload_sizes, c.payload_reps, strict=True):
            times = []
            for _ in range(reps):
                outcomes, dt = run_batch(peer, [Task("payload_call", {"nbytes": size})])
                require_ok(f"payload {size_label(size)}", outcomes)
                if len(outcomes[0].value) != size:
                    raise WorkloadError(f"payload {size_label(size)} came back with {len(outcomes[0].value)} bytes")
                outcomes.clear()
                times.append(dt)
            out[f"payload_{size_label(size)}_s"] = _median(times)
    return out


def w_memory(ctx: Context) -> dict[str, Any]:
    """The host holds data (many small objects, like a real host's heap); per-worker unique memory."""
    c = ctx.config
    chunk = 1000
    held = [bytes([i % 251]) * chunk for i in range(c.memory_host_mb * 1000)]
    try:
        with ctx.pool(c.memory_workers) as peer:
            outcomes, _ = run_batch(peer, [Task("memory_call", {"hold": 0.3})] * c.memory_workers)
            require_ok("memory", outcomes)
            host_rss = psutil.Process().memory_info().rss
        uss_by_pid: dict[int, int] = {}
        for o in outcomes:
            pid, uss = int(o.value["pid"]), int(o.value["uss"])
            uss_by_pid[pid] = max(uss, uss_by_pid.get(pid, 0))
        per_worker = sorted(uss_by_pid.values())
        return {
            "memory_uss_mb_median": _median(per_worker) / MB,
            "memory_uss_mb_max": per_worker[-1] / MB,
            "memory_workers_seen": len(per_worker),
            "memory_host_rss_mb": host_rss / MB,
        }
    finally:
        del held


def w_scaling(ctx: Context) -> dict[str, Any]:
    c = ctx.config
    iterations = max(1, int(c.cpu_iterations * c.scaling_cpu_call_s / c.cpu_call_s))
    io_tasks = [Task("sleep_call", {"seconds": c.scaling_io_sleep_s})] * c.scaling_io_calls
    cpu_tasks = [Task("cpu_call", {"iterations": iterations})] * c.scaling_cpu_calls
    out: dict[str, Any] = {}
    for w in c.scaling_workers:
        with ctx.pool(w) as peer:
            io_t = timed_reps(peer, lambda: io_tasks, c.scaling_reps, f"scaling io w={w}")
            cpu_t = timed_reps(peer, lambda: cpu_tasks, c.scaling_reps, f"scaling cpu w={w}")
        out[f"scaling_io_w{w}"] = c.scaling_io_calls / _median(io_t)
        out[f"scaling_cpu_w{w}"] = c.scaling_cpu_calls / _median(cpu_t)
    return out


def _footprint() -> dict[str, float]:
    me = psutil.Process()
    kids = procs.descendants()
    return {
        "host_rss": float(me.memory_info().rss),
        "worker_rss": float(procs.rss_total(kids)),
        "fds": float(me.num_fds()) if hasattr(me, "num_fds") else float("nan"),
        "procs": float(len(kids)),
    }


def w_soak(ctx: Context) -> dict[str, Any]:
    c = ctx.config
    failed = 0
    with ctx.pool(c.cores) as peer:
        before = _footprint()
        t0 = time.perf_counter()
        done = 0
        while done < c.soak_calls and time.perf_counter() - t0 < c.soak_budget_s:
            n = min(c.soak_chunk, c.soak_calls - done)
            outcomes, _ = run_batch(peer, [Task("trivial_call", {"x": done + i}) for i in range(n)])
            failed += sum(o.status != "ok" for o in outcomes)
            done += n
        wall = time.perf_counter() - t0
        after = _footprint()
    return {
        "soak_calls_per_s": done / wall,
        "soak_calls_done": done,
        "soak_failed": failed,
        "soak_host_rss_delta_mb": (after["host_rss"] - before["host_rss"]) / MB,
        "soak_worker_rss_delta_mb": (after["worker_rss"] - before["worker_rss"]) / MB,
        "soak_fd_delta": after["fds"] - before["fds"],
        "soak_proc_delta": after["procs"] - before["procs"],
    }


def _max_overlap(spans: Sequence[Sequence[float]]) -> int:
    """The most calls that were running at one moment, from their ``[start, end]`` spans."""
    edges = sorted([(float(s), 1) for s, _ in spans] + [(float(e), -1) for _, e in spans])
    running = most = 0
    for _, step in edges:  # at a tie an end (-1) sorts before a start: touching spans do not overlap
        running += step
        most = max(most, running)
    return most


def concurrent_callers(peer: Peer, callers: int, sleep_s: float) -> tuple[float, list[Outcome]]:
    """``callers`` threads, released together by a barrier, each run a batch of one call on ``peer``.
    Returns the wall time from the release until the last caller has its result, and the outcomes."""
    released: list[float] = []
    finished = [0.0] * callers
    outcomes: list[Outcome] = [Outcome("error", error="caller did not finish")] * callers
    barrier = threading.Barrier(callers, action=lambda: released.append(time.perf_counter()))

    def caller(i: int) -> None:
        barrier.wait()
        outcomes[i] = run_batch(peer, [Task("span_call", {"seconds": sleep_s})])[0][0]
        finished[i] = time.perf_counter()

    threads = [threading.Thread(target=caller, args=(i,), name=f"bench-caller-{i}") for i in range(callers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return max(finished) - released[0], outcomes


def w_callers(ctx: Context) -> dict[str, Any]:
    """Several callers share one executor, each with a batch of one call (a web server with an agent
    per request, an MCP server, a framework that starts each tool call on its own): do their calls
    run at once? Every caller's call must come back ok; each call also reports when it ran in its
    worker, so the row says how many really overlapped."""
    c = ctx.config
    out: dict[str, Any] = {}
    with ctx.pool(c.callers_workers) as peer:
        concurrent_callers(peer, max(c.callers_counts), c.callers_sleep_s)  # warm the callers' path
        for n in c.callers_counts:
            walls, overlaps = [], []
            for _ in range(c.callers_reps):
                wall, outcomes = concurrent_callers(peer, n, c.callers_sleep_s)
                require_ok(f"callers x{n}", outcomes)
                walls.append(wall)
                overlaps.append(_max_overlap([o.value for o in outcomes]))
            out[f"callers_{n}_wall_s"] = _median(walls)
            out[f"callers_{n}_all_s"] = walls
            out[f"callers_{n}_overlap"] = min(overlaps)
    return out


def w_singles(ctx: Context) -> dict[str, Any]:
    """Single calls, as a host with one call at a time makes them: ``singles_calls`` trivial calls
    submitted one by one (all of them, then every result waited for), per call; and, on the same pool,
    interleaved with them, one batch of as many calls, per call."""
    c = ctx.config
    n = c.singles_calls
    tasks = [Task("trivial_call", {"x": i}) for i in range(n)]

    def singles() -> float:
        t0 = time.perf_counter()
        handles = [peer.submit_one(t) for t in tasks]
        outcomes = [peer.result_one(h) for h in handles]
        dt = time.perf_counter() - t0
        require_ok("singles", outcomes)
        wrong = [i for i, o in enumerate(outcomes) if o.value != i + 1]
        if wrong:
            raise WorkloadError(f"singles: call {wrong[0]} returned {outcomes[wrong[0]].value!r}")
        return dt

    single_t, batch_t = [], []
    with ctx.pool(c.cores) as peer:
        singles()  # warm the single-call path (toolfork starts its submit thread on first use)
        for _ in range(c.singles_reps):
            single_t.append(singles())
            batch_t.extend(timed_reps(peer, lambda: tasks, 1, "singles batch"))
    per_single = _median(single_t) / n * 1e6
    per_batched = _median(batch_t) / n * 1e6
    return {
        "singles_us_per_call": per_single,
        "singles_batch_us_per_call": per_batched,
        "singles_vs_batch": per_single / per_batched,
    }


def w_fresh(ctx: Context) -> dict[str, Any]:
    """What a call in a process of its own costs: a trivial call that returns its process id,
    on a warm worker and with ``fresh_process=True`` (forked from the pool's template for the call and
    gone after it), one call per batch and in batches of ``fresh_batch_calls``, per call. The warm and
    fresh repetitions alternate on the same pool. Every fresh call must have run in a process no other
    call ran in, or the workload fails. An executor that forks for every call ("every call") has only
    the fresh figures: it runs the plain call, and has no warm worker."""
    c = ctx.config
    kind = ctx.peer_cls.fresh_process
    if kind not in ("per tool", "every call"):
        raise WorkloadError(f"fresh: unknown fresh_process kind {kind!r}")
    fresh_fn = "pid_call" + FRESH_SUFFIX if kind == "per tool" else "pid_call"
    n = c.fresh_batch_calls
    warm_pids: set[int] = set()
    fresh_pids: list[int] = []
    per_call: dict[str, list[float]] = {"warm": [], "fresh": [], "warm_batch": [], "fresh_batch": []}

    def timed(peer: Peer, fn: str, calls: int, series: str | None, pids: Callable[[int], None]) -> None:
        outcomes, dt = run_batch(peer, [Task(fn) for _ in range(calls)])
        require_ok(f"fresh ({fn} x {calls})", outcomes)
        for o in outcomes:
            pids(int(o.value))
        if series is not None:
            per_call[series].append(dt / calls * 1e3)

    with ctx.pool(c.fresh_workers) as peer:
        for rep in range(c.fresh_reps + 1):  # the first round warms both paths and is not timed
            if kind == "per tool":
                timed(peer, "pid_call", 1, "warm" if rep else None, warm_pids.add)
                timed(peer, "pid_call", n, "warm_batch" if rep else None, warm_pids.add)
            timed(peer, fresh_fn, 1, "fresh" if rep else None, fresh_pids.append)
            timed(peer, fresh_fn, n, "fresh_batch" if rep else None, fresh_pids.append)
    # A process id is reused only after the kernel has gone through every other one, and the warm
    # workers live throughout: a repeat here means calls shared a process.
    shared = len(fresh_pids) - len(set(fresh_pids)) + len(warm_pids & set(fresh_pids))
    if shared:
        raise WorkloadError(f"fresh: {shared} of {len(fresh_pids)} fresh calls ran in a process used before")

    def median(series: str) -> float | None:
        return _median(per_call[series]) if per_call[series] else None

    warm, fresh, warm_batch, fresh_batch = (median(k) for k in ("warm", "fresh", "warm_batch", "fresh_batch"))
    return {
        "fresh_warm_ms": warm,
        "fresh_fresh_ms": fresh,
        "fresh_ratio": None if warm is None or fresh is None else fresh / warm,
        "fresh_batch_warm_ms": warm_batch,
        "fresh_batch_fresh_ms": fresh_batch,
        "fresh_batch_ratio": None if warm_batch is None or fresh_batch is None else fresh_batch / warm_batch,
        "fresh_processes": len(set(fresh_pids)),
        "fresh_calls": len(fresh_pids),
        "fresh_warm_processes": len(warm_pids),
        "fresh_all_ms": per_call["fresh"],
        "fresh_warm_all_ms": per_call["warm"],
    }


def not_applicable(peer_cls: type[Peer], workload: str, profile: str = "full") -> str | None:
    """Why ``workload`` is not run for this executor (reported as the cell), or None."""
    if profile == "quick" and peer_cls.quick_workloads is not None and workload not in peer_cls.quick_workloads:
        return "skipped in --quick"
    if workload == "hang" and peer_cls.timeout_support == "none":
        return "n/a: no timeout support"
    if workload == "memory" and peer_cls.in_process:
        return "n/a: calls run in the host"
    if workload == "callers" and not peer_cls.concurrent_callers:
        return "n/a: not callable from several threads at once"
    if workload == "fresh" and peer_cls.fresh_process is None:
        return "n/a: calls run in the host" if peer_cls.in_process else "n/a: no fresh process per call"
    return None


WORKLOAD_FUNCS: dict[str, Callable[[Context], dict[str, Any]]] = {
    "io": w_io,
    "cpu": w_cpu,
    "small": w_small,
    "tiny": w_tiny,
    "mixed": w_mixed,
    "hang": w_hang,
    "crash": w_crash,
    "payload": w_payload,
    "memory": w_memory,
    "scaling": w_scaling,
    "soak": w_soak,
    "callers": w_callers,
    "singles": w_singles,
    "fresh": w_fresh,
    "payloads": w_payloads,
    "user": w_user,
}


# --- what the figures mean (for the report) ------------------------------------------------------


def metric_specs(
    config: BenchConfig, cpu_one_call_s: float | None = None, user_calls: int | None = None
) -> list[MetricSpec]:
    c = config
    cpu_ideal = None if cpu_one_call_s is None else math.ceil(c.cpu_calls / c.cores) * cpu_one_call_s
    io_ideal = math.ceil(c.io_calls / c.io_workers) * c.io_sleep_s  # waves of io_workers calls
    specs = [
        MetricSpec(
            "io_wall_s",
            "io",
            f"io: {c.io_calls} x {c.io_sleep_s * 1e3:g} ms sleep on {c.io_workers} workers, wall",
            "s",
            ideal=io_ideal,
            target=1.05 * io_ideal,
            target_text="<= 1.05x ideal",
        ),
        MetricSpec(
            "cpu_wall_s",
            "cpu",
            f"cpu: {c.cpu_calls} CPU-bound calls, wall",
            "s",
            ideal=cpu_ideal,
            target=None if cpu_ideal is None else 1.05 * cpu_ideal,
            target_text="<= 1.05x ideal",
        ),
        MetricSpec(
            "small_median_ms",
            "small",
            f"small: batch of {c.small_calls} trivial calls, median",
            "ms",
            target=0.2,
            target_text="<= 0.2 ms",
        ),
        MetricSpec(
            "tiny_us_per_call",
            "tiny",
            f"tiny: {c.tiny_calls} trivial calls, per call",
            "us",
            target=10.0,
            target_text="<= 10 us",
        ),
        MetricSpec(
            "mixed_quick_done_s",
            "mixed",
            f"mixed: {c.mixed_quick_calls} quick calls behind a {c.mixed_slow_s:g} s one, done after",
            "s",
            ideal=0.0,
        ),
        MetricSpec("mixed_wall_s", "mixed", "mixed: batch wall", "s", ideal=c.mixed_slow_s),
        MetricSpec(
            "hang_wall_s",
            "hang",
            f"hang: 1 stuck call of {c.hang_calls}, timeout {c.hang_timeout_s:g} s, wall",
            "s",
            ideal=c.hang_timeout_s,
            target=c.hang_timeout_s + 0.05,
            target_text="<= timeout + 50 ms",
        ),
        MetricSpec("hang_status", "hang", "hang: status of the stuck call", "status", better=None),
        MetricSpec(
            "hang_still_running",
            "hang",
            "hang: stuck calls still running after close",
            "count",
            better=None,
            ideal=0,
            target=0,
            target_text="nothing left behind",
        ),
        MetricSpec("hang_next_batch_s", "hang", f"hang: next batch ({c.hang_calls} x 100 ms) wall", "s", ideal=0.1),
        MetricSpec(
            "crash_results_back",
            "crash",
            f"crash: other results back (of {c.crash_calls - 1})",
            "count",
            better="higher",
            ideal=c.crash_calls - 1,
            target=c.crash_calls - 1,
            target_text="every other result back",
        ),
        MetricSpec("crash_status", "crash", "crash: status of the crashing call", "status", better=None),
        MetricSpec("crash_usable_after", "crash", "crash: same executor runs the next batch", "yes/no", better=None),
        MetricSpec("crash_wall_s", "crash", "crash: batch wall", "s", better=None, ideal=0.1),
    ]
    for size in c.payload_sizes:
        label = size_label(size)
        specs.append(MetricSpec(f"payload_{label}_s", "payload", f"payload: one {label} result", "s"))
    specs += [
        MetricSpec(
            "memory_uss_mb_median",
            "memory",
            f"memory: unique MB per worker ({c.memory_workers} workers, host holds {c.memory_host_mb} MB)",
            "MB",
        ),
        MetricSpec("memory_uss_mb_max", "memory", "memory: unique MB, largest worker", "MB"),
    ]
    for w in c.scaling_workers:
        specs.append(
            MetricSpec(
                f"scaling_io_w{w}",
                "scaling",
                f"scaling io, {w} workers",
                "calls/s",
                better="higher",
                ideal=min(w, c.scaling_io_calls) / c.scaling_io_sleep_s,
            )
        )
    # One scaling cpu call is calibrated to scaling_cpu_call_s as a fraction of the cpu workload's call.
    scaling_one = None if cpu_one_call_s is None else cpu_one_call_s * c.scaling_cpu_call_s / c.cpu_call_s
    for w in c.scaling_workers:
        specs.append(
            MetricSpec(
                f"scaling_cpu_w{w}",
                "scaling",
                f"scaling cpu, {w} workers",
                "calls/s",
                better="higher",
                ideal=None if not scaling_one else min(w, c.cores, c.scaling_cpu_calls) / scaling_one,
            )
        )
    specs += [
        MetricSpec(
            "soak_calls_done",
            "soak",
            f"soak: calls done (of {c.soak_calls:,}; stops after {c.soak_budget_s:g} s)",
            "count",
            better=None,
            ideal=c.soak_calls,
        ),
        MetricSpec(
            "soak_calls_per_s",
            "soak",
            "soak: trivial calls, throughput",
            "calls/s",
            better="higher",
        ),
        MetricSpec("soak_failed", "soak", "soak: failed calls", "count", better=None, ideal=0),
        MetricSpec("soak_host_rss_delta_mb", "soak", "soak: host RSS growth", "MB", better=None, ideal=0),
        MetricSpec("soak_worker_rss_delta_mb", "soak", "soak: worker RSS growth", "MB", better=None, ideal=0),
        MetricSpec("soak_fd_delta", "soak", "soak: host open fds growth", "count", better=None, ideal=0),
        MetricSpec("soak_proc_delta", "soak", "soak: process count growth", "count", better=None, ideal=0),
    ]
    for n in c.callers_counts:
        specs += [
            MetricSpec(
                f"callers_{n}_wall_s",
                "callers",
                f"callers: {n} threads x a batch of 1 call of {c.callers_sleep_s * 1e3:g} ms sleep, "
                f"{c.callers_workers} workers, wall",
                "s",
                ideal=c.callers_sleep_s,
            ),
            MetricSpec(
                f"callers_{n}_overlap",
                "callers",
                f"callers: {n} threads, most calls running at once (worst rep)",
                "count",
                better=None,
                ideal=min(n, c.callers_workers),
            ),
        ]
    specs += [
        MetricSpec(
            "singles_us_per_call",
            "singles",
            f"singles: {c.singles_calls} concurrent single trivial calls, per call",
            "us",
        ),
        MetricSpec(
            "singles_batch_us_per_call",
            "singles",
            f"singles: the same {c.singles_calls} calls as one batch, per call",
            "us",
        ),
        MetricSpec(
            "singles_vs_batch",
            "singles",
            "singles: per-call cost of single calls / of one batch",
            "ratio",
            better=None,
            ideal=1.0,
            target=1.0,
            target_text="<= one batch",
        ),
    ]
    fresh_calls = (c.fresh_reps + 1) * (1 + c.fresh_batch_calls)
    specs += [
        MetricSpec(
            "fresh_warm_ms",
            "fresh",
            f"fresh: a batch of 1 trivial call on a warm worker ({c.fresh_workers} workers), per call",
            "ms",
        ),
        MetricSpec(
            "fresh_fresh_ms",
            "fresh",
            "fresh: the same call in a process of its own (toolfork: fresh_process=True), per call",
            "ms",
        ),
        MetricSpec("fresh_ratio", "fresh", "fresh: batch of 1, fresh / warm", "ratio", better=None, ideal=1.0),
        MetricSpec(
            "fresh_batch_warm_ms",
            "fresh",
            f"fresh: a batch of {c.fresh_batch_calls} such calls on {c.fresh_workers} warm workers, per call",
            "ms",
        ),
        MetricSpec(
            "fresh_batch_fresh_ms",
            "fresh",
            f"fresh: a batch of {c.fresh_batch_calls} such calls, each in a process of its own, per call",
            "ms",
        ),
        MetricSpec(
            "fresh_batch_ratio",
            "fresh",
            f"fresh: batch of {c.fresh_batch_calls}, fresh / warm",
            "ratio",
            better=None,
            ideal=1.0,
        ),
        MetricSpec(
            "fresh_processes",
            "fresh",
            f"fresh: processes the {fresh_calls} fresh calls ran in",
            "count",
            better=None,
            ideal=fresh_calls,
        ),
    ]
    specs += payloads_specs(c)
    specs += user_specs(c, user_calls)
    return specs
