"""The subprocess that runs one executor's workloads: ``python -m toolfork.bench.runner --fd N``.

The harness starts it (job as JSON on stdin) and reads one JSON event per line on file descriptor N:
``setup``, ``ready`` or ``setup_failed``, then ``start`` and ``result`` per workload, then ``end``.
A runner that stops talking past a time limit, or dies, is the harness's business: the events say
exactly which workload it was in. The runner leaves with ``os._exit`` because a thread stuck in a
hung call (thread pool) or a pool manager waiting on a stuck worker would otherwise block the
interpreter's exit forever.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from toolfork.bench import procs
from toolfork.bench.batch import Context
from toolfork.bench.calls import calibrate_cpu
from toolfork.bench.config import BenchConfig
from toolfork.bench.peers import resolve
from toolfork.bench.workloads import WORKLOAD_FUNCS, not_applicable


def _json_default(value: Any) -> Any:
    return repr(value)


def run_job(job: dict[str, Any], out: Any) -> None:
    def emit(**event: Any) -> None:
        out.write(json.dumps(event, default=_json_default) + "\n")
        out.flush()

    procs.become_subreaper()
    config = BenchConfig.from_dict(job["config"])
    if not config.cpu_iterations:
        config.cpu_iterations = calibrate_cpu(config.cpu_call_s)
    emit(event="setup", pid=os.getpid())
    try:
        peer_cls = resolve(job["executor"])
        peer_cls.setup_session()
    except Exception as exc:
        emit(event="setup_failed", error=f"{type(exc).__name__}: {exc}")
        return
    emit(event="ready")
    for workload in job["workloads"]:
        emit(event="start", workload=workload)
        ctx = Context(peer_cls, config)
        t0 = time.perf_counter()
        metrics: dict[str, Any] = {}
        status, detail = "ok", ""
        reason = not_applicable(peer_cls, workload, config.profile)
        if reason:
            status = reason
        else:
            try:
                metrics = WORKLOAD_FUNCS[workload](ctx)
            except Exception as exc:
                status = "error"
                detail = f"{type(exc).__name__}: {exc}"
                tb = traceback.format_exc(limit=-3)
                detail = f"{detail}\n{tb}"[-2000:]
        emit(
            event="result",
            workload=workload,
            cell={
                "status": status,
                "metrics": metrics,
                "detail": detail,
                "elapsed_s": round(time.perf_counter() - t0, 3),
                "leftover_processes": sum(ctx.leftovers) if ctx.leftovers else None,
            },
        )
    try:
        peer_cls.teardown_session()
    except Exception as exc:
        emit(event="teardown_failed", error=f"{type(exc).__name__}: {exc}")
    left = procs.leftovers(set(), grace_s=2.0)
    emit(event="end", leftover_processes=len(left))
    procs.kill_all(left)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m toolfork.bench.runner")
    parser.add_argument("--fd", type=int, required=True, help="write end of the event pipe")
    args = parser.parse_args(argv)
    job = json.load(sys.stdin)
    out = os.fdopen(args.fd, "w", buffering=1)
    code = 0
    try:
        run_job(job, out)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        out.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
