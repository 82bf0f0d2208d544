"""Runs every executor x workload in a subprocess with a time limit and collects the figures.

A peer that hangs is killed at its cell's time limit and recorded as "hung"; one that takes its host
down is recorded as "crashed" with the exit status; either way the run goes on in a fresh runner
with the remaining workloads. With ``isolation="cell"`` (the full run) each executor x workload gets
its own runner, except executors whose processes outlive a pool by design (a Ray cluster: one runner
each, as Ray's start-up alone is ~6 s); with ``isolation="executor"`` (``--quick``) one runner does an
executor's workloads in a row, which saves the per-process start-up that would not fit in two
minutes. Every runner carries an environment marker, so processes that outlive it are found,
counted and killed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import select
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import toolfork
from toolfork.bench import procs
from toolfork.bench.calls import calibrate_cpu, time_cpu_call
from toolfork.bench.config import DEFAULT_WORKLOADS, WORKLOADS, BenchConfig
from toolfork.bench.peers import default_executors, executor_name, resolve
from toolfork.bench.workloads import metric_specs, not_applicable

ISOLATIONS = ("cell", "executor")
_BETWEEN_CELLS_LIMIT_S = 60.0  # after a result, the next event (start or end) must come by then

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


def validate(executors: Sequence[str] | None, workloads: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """The executor specs and workload names to run, or ValueError naming what is wrong."""
    wl = list(workloads) if workloads else list(DEFAULT_WORKLOADS)
    unknown = [w for w in wl if w not in WORKLOADS]
    if unknown:
        raise ValueError(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    ex = list(executors) if executors else default_executors()
    for spec in ex:
        resolve(spec)  # raises ValueError / ImportError naming the spec
    names = [executor_name(s) for s in ex]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"executor(s) listed twice: {', '.join(dupes)}")
    return ex, wl


@dataclass
class _Session:
    """What one runner process did."""

    executor: str
    workloads: list[str]
    cells: dict[str, dict[str, Any]] = field(default_factory=dict)
    remaining: list[str] = field(default_factory=list)
    outcome: str = "ok"  # ok | hung | crashed | setup_failed
    exit: str | None = None
    leftover_at_end: int | None = None
    escaped: int = 0
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "executor": self.executor,
            "workloads": self.workloads,
            "outcome": self.outcome,
            "exit": self.exit,
            "leftover_at_end": self.leftover_at_end,
            "escaped_processes": self.escaped,
            "duration_s": round(self.duration_s, 3),
        }


def _tail(path: str, n: int = 1500) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - n))
            return fh.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _run_session(
    spec: str,
    workloads: list[str],
    config: BenchConfig,
    factor: float,
    marker: str,
    log_dir: str,
) -> _Session:
    session = _Session(executor=spec, workloads=list(workloads))
    job = {"executor": spec, "workloads": workloads, "config": config.to_dict()}
    r, w = os.pipe()
    log_path = os.path.join(log_dir, f"{marker}.log")
    env = dict(os.environ, **{procs.MARK_ENV: marker})
    # The runner must import this very toolfork, also when it was found through sys.path (a checkout).
    root = os.path.dirname(os.path.dirname(os.path.abspath(toolfork.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    t_start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolfork.bench.runner", "--fd", str(w)],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(w,),
            start_new_session=True,
            env=env,
        )
    os.close(w)
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(json.dumps(job).encode())
        proc.stdin.close()

    pending = list(workloads)
    current: str | None = None
    t_current = t_start
    deadline = time.monotonic() + config.setup_limit_s * factor
    limit = config.setup_limit_s * factor
    buf = b""
    ended = False
    try:
        while not ended:
            ready, _, _ = select.select([r], [], [], max(0.0, min(0.2, deadline - time.monotonic())))
            lines: list[bytes] = []
            if ready:
                chunk = os.read(r, 65536)
                if not chunk:  # every writer is gone: the runner exited (or closed it, then died)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=5)
                    ready = []
                buf += chunk
                *lines, buf = buf.split(b"\n")
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # not ours (nothing else should write there, but never trust it)
                kind = event.get("event")
                if kind == "setup_failed":
                    session.outcome = "setup_failed"
                    for wl in pending:
                        session.cells[wl] = {
                            "status": "error",
                            "detail": f"setup failed: {event.get('error')}",
                        }
                    pending = []
                elif kind == "start":
                    current = event["workload"]
                    t_current = time.monotonic()
                    limit = config.limit_for(current) * factor
                    deadline = time.monotonic() + limit
                elif kind == "result":
                    session.cells[event["workload"]] = event["cell"]
                    if event["workload"] in pending:
                        pending.remove(event["workload"])
                    current = None
                    limit = _BETWEEN_CELLS_LIMIT_S * factor
                    deadline = time.monotonic() + limit
                elif kind == "ready":
                    limit = _BETWEEN_CELLS_LIMIT_S * factor
                    deadline = time.monotonic() + limit
                elif kind == "end":
                    session.leftover_at_end = event.get("leftover_processes")
                    ended = True
            if ended or session.outcome == "setup_failed":
                break
            if not ready and proc.poll() is not None:
                session.outcome = "crashed"
                session.exit = procs.exit_text(proc.returncode)
                break
            if time.monotonic() >= deadline:
                session.outcome = "hung"
                break
        if session.outcome == "ok" or session.outcome == "setup_failed":
            try:
                proc.wait(timeout=10 * factor)
                session.exit = procs.exit_text(proc.returncode)
            except subprocess.TimeoutExpired:
                session.exit = "did not exit after its last event; killed"
        # Whatever happened, nothing of this runner may survive into the next one.
        procs.kill_group(proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if session.outcome == "hung":
            session.exit = procs.exit_text(proc.returncode)
        escaped = procs.marked(marker)
        session.escaped = len(escaped)
        procs.kill_all(escaped)
    except BaseException:
        # Ctrl-C or a harness bug: the runner lives in its own session, so it would not get the
        # terminal's SIGINT and would carry on as an orphan. Take it and its pool down first.
        procs.kill_group(proc.pid)
        procs.kill_all(procs.marked(marker))
        proc.wait()
        raise
    finally:
        os.close(r)

    if session.outcome in ("hung", "crashed"):
        tail = _tail(log_path)
        if current is not None:
            if session.outcome == "hung":
                detail = f"no result within the {limit:.0f} s time limit"
            else:
                detail = f"the runner died: {session.exit}"
            session.cells[current] = {
                "status": session.outcome,
                "detail": f"{detail}\n{tail}".strip()[-2000:],
                "elapsed_s": round(time.monotonic() - t_current, 3),
            }
            pending.remove(current)
        elif pending and not session.cells:
            # Died or stuck before the first workload: setup is the culprit, do not retry.
            for wl in pending:
                session.cells[wl] = {
                    "status": "error",
                    "detail": f"runner {session.outcome} during setup\n{tail}",
                }
            pending = []
    session.remaining = pending
    session.duration_s = time.monotonic() - t_start
    with contextlib.suppress(OSError):
        os.unlink(log_path)
    return session


def run_benchmark(
    config: BenchConfig,
    executors: Sequence[str] | None = None,
    workloads: Sequence[str] | None = None,
    isolation: str = "cell",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run the comparison and return the JSON-ready results (see docs/bench.md for the fields)."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"unknown isolation {isolation!r}; choose from {', '.join(ISOLATIONS)}")
    specs, wl = validate(executors, workloads)
    say = progress or (lambda _msg: None)
    t_run = time.monotonic()
    config = replace(config)
    if not config.cpu_iterations:
        config.cpu_iterations = calibrate_cpu(config.cpu_call_s)
    cpu_one = time_cpu_call(config.cpu_iterations)
    token = uuid.uuid4().hex[:12]
    names = [executor_name(s) for s in specs]
    cells: dict[str, dict[str, dict[str, Any]]] = {n: {} for n in names}
    sessions: list[dict[str, Any]] = []
    total = len(specs) * len(wl)
    done = 0

    with tempfile.TemporaryDirectory(prefix="toolfork-bench-") as log_dir:
        for spec, name in zip(specs, names, strict=True):
            peer_cls = resolve(spec)
            todo: list[str] = []
            missing = peer_cls.unavailable()
            for w in wl:
                reason = missing or not_applicable(peer_cls, w, config.profile)
                if reason:
                    cells[name][w] = {"status": reason, "metrics": {}}
                    done += 1
                    say(f"[{done}/{total}] {name} x {w}: {reason}")
                else:
                    todo.append(w)
            # An executor whose processes outlive a pool by design (a Ray cluster) keeps one runner even
            # with cell isolation: starting Ray for each of its cells would cost ~6 s x 11.
            per_cell = isolation == "cell" and not peer_cls.shared_processes
            groups = [[w] for w in todo] if per_cell else ([todo] if todo else [])
            for group in groups:
                queue = list(group)
                while queue:
                    marker = f"{token}-{len(sessions)}"
                    s = _run_session(spec, queue, config, peer_cls.limit_factor, marker, log_dir)
                    sessions.append(s.to_dict())
                    for w in queue:
                        if w in s.cells:
                            cell = s.cells[w]
                            if isolation == "cell":
                                cell["escaped_processes"] = s.escaped
                            cells[name][w] = cell
                            done += 1
                            shown = (
                                cell["status"]
                                if cell["status"] != "error"
                                else ("error: " + str(cell.get("detail", "")).splitlines()[0][:120])
                            )
                            say(f"[{done}/{total}] {name} x {w}: {shown} ({cell.get('elapsed_s', 0):.1f} s)")
                    queue = s.remaining

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
            "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "duration_s": round(time.monotonic() - t_run, 1),
            "cpu_one_call_s": cpu_one,
            "cpu_one_call_s_per_executor": cpu_calls,
            "config": config.to_dict(),
        },
        "executors": names,
        "executor_specs": dict(zip(names, specs, strict=True)),
        "descriptions": {n: resolve(s).description for n, s in zip(names, specs, strict=True)},
        "kinds": {
            n: {
                "in_process": resolve(s).in_process,
                "timeout_support": resolve(s).timeout_support,
                "shared_processes": resolve(s).shared_processes,
            }
            for n, s in zip(names, specs, strict=True)
        },
        "workloads": wl,
        "metrics": [asdict(m) for m in metric_specs(config, cpu_one) if m.workload in wl],
        "cells": cells,
        "sessions": sessions,
    }
