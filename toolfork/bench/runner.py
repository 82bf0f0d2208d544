"""The subprocess that runs one executor's workloads: ``python -m toolfork.bench.runner --fd N``.

The harness (``session.RunnerProcess``) writes the job header as one JSON line on stdin, then one
``{"workload": W}`` line per cell it wants, and closes stdin when it is done with this executor. The
runner answers with one JSON event per line on file descriptor N: ``setup``, ``ready`` or
``setup_failed``, then ``start`` and ``result`` per workload, then ``end``. A runner that stops talking
past a time limit, or dies, is the harness's business: the events say exactly which workload it was
in. The runner leaves with ``os._exit`` because a thread stuck in a hung call (thread pool) or a pool
manager waiting on a stuck worker would otherwise block the interpreter's exit forever.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import IO, Any

from toolfork.bench import procs
from toolfork.bench.base import Peer
from toolfork.bench.batch import Context
from toolfork.bench.calls import calibrate_cpu
from toolfork.bench.config import BenchConfig
from toolfork.bench.peers import resolve
from toolfork.bench.user_calls import install as install_user_tools
from toolfork.bench.workloads import WORKLOAD_FUNCS, not_applicable


def _json_default(value: Any) -> Any:
    return repr(value)


def run_cell(peer_cls: type[Peer], config: BenchConfig, workload: str, user: list[dict[str, Any]]) -> dict[str, Any]:
    """One workload on one executor: its figures, or why there are none."""
    ctx = Context(peer_cls, config, user_calls=user)
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
    return {
        "status": status,
        "metrics": metrics,
        "detail": detail,
        "elapsed_s": round(time.perf_counter() - t0, 3),
        "leftover_processes": sum(ctx.leftovers) if ctx.leftovers else None,
    }


def run_job(requests: IO[str], out: Any) -> None:
    def emit(**event: Any) -> None:
        out.write(json.dumps(event, default=_json_default) + "\n")
        out.flush()

    procs.become_subreaper()
    job = json.loads(requests.readline())
    config = BenchConfig.from_dict(job["config"])
    if not config.cpu_iterations:
        config.cpu_iterations = calibrate_cpu(config.cpu_call_s)
    emit(event="setup", pid=os.getpid())
    user = job.get("user") or {}
    try:
        install_user_tools(user)
        peer_cls = resolve(job["executor"])
        peer_cls.setup_session()
    except Exception as exc:
        emit(event="setup_failed", error=f"{type(exc).__name__}: {exc}")
        return
    emit(event="ready")
    for line in requests:  # until the harness closes our stdin
        if not line.strip():
            continue
        workload = json.loads(line)["workload"]
        emit(event="start", workload=workload)
        emit(event="result", workload=workload, cell=run_cell(peer_cls, config, workload, user.get("calls", [])))
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
    out = os.fdopen(args.fd, "w", buffering=1)
    code = 0
    try:
        run_job(sys.stdin, out)
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
