"""Runs every executor x workload in interleaved rounds and collects each cell's figures with their spread.

    for each round r, for each workload W:
        every executor runs W once, in an order rotated by r + W's index   (session.RunnerProcess)
    each cell: the rounds' figures ──spread.combine──▶ median, [min, median, max], "wide" flag
    the whole run: machine load sampled before and after ──load.MachineLoad──▶ warnings

Interleaving means a burst of load on the machine hits every executor alike instead of one executor's
whole row. Executors whose processes outlive a pool (a Ray cluster) are the exception: each runs its
workloads in a block at the end of a round, alone, and is shut down after it.

A peer that hangs is killed at its cell's time limit and recorded "hung"; one that takes its host down
"crashed"; the next cell of that executor gets a fresh runner. With ``isolation="executor"``
(``--quick``) one runner serves an executor for the whole run; with ``"cell"`` (the full run) every cell
gets a runner of its own, except executors whose processes outlive a pool by design (Ray).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import Any

from toolfork.bench.calls import calibrate_cpu, time_cpu_call
from toolfork.bench.config import DEFAULT_WORKLOADS, QUICK_WORKLOADS, WORKLOADS, BenchConfig
from toolfork.bench.honour import unhonoured, workload_asks
from toolfork.bench.load import MachineLoad
from toolfork.bench.peers import default_executors, executor_name, not_run, resolve
from toolfork.bench.runner_process import RunnerProcess
from toolfork.bench.spread import combine
from toolfork.bench.user_calls import UserWork
from toolfork.bench.workloads import metric_specs, not_applicable

ISOLATIONS = ("cell", "executor")

Progress = Callable[[str], None]


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for dist in ("toolfork", "multiprocess", "pebble", "loky", "ray", "psutil", "matplotlib"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def validate(
    executors: Sequence[str] | None, workloads: Sequence[str] | None, profile: str = "full"
) -> tuple[list[str], list[str]]:
    """The executor specs and workload names to run, or ValueError naming what is wrong."""
    wl = list(workloads) if workloads else list(QUICK_WORKLOADS if profile == "quick" else DEFAULT_WORKLOADS)
    unknown = [w for w in wl if w not in WORKLOADS]
    if unknown:
        raise ValueError(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    ex = list(executors) if executors else default_executors(quick=profile == "quick")
    for spec in ex:
        resolve(spec)  # raises ValueError / ImportError naming the spec
    names = [executor_name(s) for s in ex]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"executor(s) listed twice: {', '.join(dupes)}")
    return ex, wl


def _rotated(items: list[str], by: int) -> list[str]:
    k = by % len(items) if items else 0
    return items[k:] + items[:k]


def _shown(cell: dict[str, Any]) -> str:
    if cell["status"] != "error":
        return str(cell["status"])
    return "error: " + (str(cell.get("detail", "")).splitlines() or [""])[0][:120]


def run_benchmark(
    config: BenchConfig,
    executors: Sequence[str] | None = None,
    workloads: Sequence[str] | None = None,
    isolation: str = "cell",
    progress: Progress | None = None,
    user: UserWork | None = None,
) -> dict[str, Any]:
    """Run the comparison and return the JSON-ready results (see docs/bench.md for the fields)."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"unknown isolation {isolation!r}; choose from {', '.join(ISOLATIONS)}")
    if config.rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {config.rounds}")
    specs, wl = validate(executors, workloads or (["user"] if user else None), config.profile)
    skipped = not_run(specs, quick=config.profile == "quick", chosen=bool(executors))
    specs = [s for s in specs if executor_name(s) not in skipped]
    if "user" in wl and user is None:
        raise ValueError("the user workload needs your calls: toolfork bench --tools T --calls CALLS.jsonl")
    say = progress or (lambda _msg: None)
    machine = MachineLoad.start()
    t_run = time.monotonic()
    config = replace(config)
    if not config.cpu_iterations:
        config.cpu_iterations = calibrate_cpu(config.cpu_call_s)
    cpu_one = time_cpu_call(config.cpu_iterations)
    token = uuid.uuid4().hex[:12]
    names = [executor_name(s) for s in specs]
    by_name = dict(zip(names, specs, strict=True))
    rounds: dict[str, dict[str, list[dict[str, Any]]]] = {n: {w: [] for w in wl} for n in names}
    fixed: dict[str, dict[str, dict[str, Any]]] = {n: {} for n in names}  # n/a cells: one, not per round
    for name in names:
        peer_cls = resolve(by_name[name])
        for w in wl:
            reason = peer_cls.unavailable() or not_applicable(peer_cls, w, config.profile)
            if reason:
                fixed[name][w] = {"status": reason, "metrics": {}}
    sessions: list[dict[str, Any]] = []
    live: dict[str, RunnerProcess] = {}
    setup_failed: dict[str, dict[str, Any]] = {}  # executor -> the error cell of its failed setup
    user_job = user.to_job() if user else None
    total = sum(1 for n in names for w in wl if w not in fixed[n]) * config.rounds
    done = 0

    def runner_for(name: str, log_dir: str) -> RunnerProcess:
        runner = live.get(name)
        if runner is None or not runner.alive:
            if runner is not None:
                sessions.append(runner.close())
            peer_cls = resolve(by_name[name])
            marker = f"{token}-{len(sessions) + len(live)}-{name}"
            runner = RunnerProcess(by_name[name], config, peer_cls.limit_factor, marker, log_dir, user_job)
            live[name] = runner
        return runner

    def run_cell(name: str, w: str, r: int, log_dir: str) -> None:
        nonlocal done
        if w in fixed[name]:
            return
        if name in setup_failed:  # setup is the culprit: another runner would fail (or hang) alike
            cell = dict(setup_failed[name])
        else:
            runner = runner_for(name, log_dir)
            cell = runner.run(w)
            if runner.setup_error is not None:
                setup_failed[name] = cell
            runner_done(name, runner, cell)
        rounds[name][w].append(cell)
        done += 1
        say(f"[{done}/{total}] round {r + 1}: {name} x {w}: {_shown(cell)} ({cell.get('elapsed_s', 0):.1f} s)")

    def runner_done(name: str, runner: RunnerProcess, cell: dict[str, Any]) -> None:
        per_cell = isolation == "cell" and not resolve(by_name[name]).shared_processes
        if per_cell or not runner.alive:
            sessions.append(live.pop(name).close())
            if per_cell:
                cell["escaped_processes"] = runner.escaped

    # Executors whose processes outlive a pool (a Ray cluster) run their workloads in a block per round,
    # one at a time, and are shut down after it: two clusters at once, or one idling in the background
    # while the others are timed, would load the machine for everyone.
    shared = [n for n in names if resolve(by_name[n]).shared_processes]
    plain = [n for n in names if n not in shared]
    with tempfile.TemporaryDirectory(prefix="toolfork-bench-") as log_dir:
        try:
            for r in range(config.rounds):
                for i, w in enumerate(wl):
                    for name in _rotated(plain, r + i):
                        run_cell(name, w, r, log_dir)
                for name in _rotated(shared, r):
                    for w in wl:
                        run_cell(name, w, r, log_dir)
                    if name in live:
                        sessions.append(live.pop(name).close())
        except BaseException:
            # Ctrl-C or a harness bug: a runner may be in the middle of a cell, so no goodbyes.
            for runner in live.values():
                runner.kill()
            raise
        for runner in live.values():
            sessions.append(runner.close())

    cells = {
        n: {w: fixed[n][w] if w in fixed[n] else combine(rounds[n][w], config.wide_spread) for w in wl}
        for n in names
    }
    cpu_calls = {
        n: c["cpu"]["metrics"].get("cpu_one_call_s") for n, c in cells.items() if c.get("cpu", {}).get("status") == "ok"
    }
    return {
        "meta": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "versions": _versions(),
            "profile": config.profile,
            "isolation": isolation,
            "rounds": config.rounds,
            "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "duration_s": round(time.monotonic() - t_run, 1),
            "load": machine.finish().to_dict(),
            "cpu_one_call_s": cpu_one,
            "cpu_one_call_s_per_executor": cpu_calls,
            "config": config.to_dict(),
            "user": None if user is None else {
                "tools": user.source, "calls": len(user.calls), "workers": config.user_workers,
                "skipped_lines": user.skipped[:20], "asks": user.asks,
            },
        },
        "executors": names,
        "executor_specs": by_name,
        "descriptions": {n: resolve(s).description for n, s in by_name.items()},
        "kinds": {
            n: {
                "in_process": resolve(s).in_process,
                "timeout_support": resolve(s).timeout_support,
                "shared_processes": resolve(s).shared_processes,
            }
            for n, s in by_name.items()
        },
        "not_run": skipped,
        # What an executor's figures were got without (a timeout, limits...): shown, never ranked.
        "unhonoured": {
            n: {w: [asdict(u) for u in found] for w in wl
                if (found := unhonoured(resolve(s), workload_asks(w, user.asks if user else ())))}
            for n, s in by_name.items()
        },
        "workloads": wl,
        "metrics": [
            asdict(m)
            for m in metric_specs(config, cpu_one, len(user.calls) if user else None)
            if m.workload in wl
        ],
        "cells": cells,
        "sessions": sessions,
    }
