"""The harness's handle on one runner process: start it, hand it one workload at a time, close it.

    harness ──job header (stdin, one JSON line)──▶ runner ──"setup", "ready" | "setup_failed"──▶ harness
    harness ──{"workload": W} (stdin)────────────▶ runner ──"start", "result" (event pipe)──────▶ harness
    harness ──EOF on stdin───────────────────────▶ runner ──"end"───────────────────────────────▶ harness

A runner lives across the rounds of a run, so the harness can interleave executors (round r runs
workload W on every executor, in an order that rotates) without paying a process start per cell.
A runner that stops talking past a time limit is recorded "hung", one that dies "crashed"; either way it
is killed with everything it started, and the next cell gets a fresh runner. Every runner carries an
environment marker, so processes that outlive it are found, counted and killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from typing import Any

import toolfork
from toolfork.bench import procs
from toolfork.bench.config import BenchConfig

BETWEEN_CELLS_LIMIT_S = 60.0  # an idle runner must answer the next request (start or end) by then


def _tail(path: str, n: int = 1500) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - n))
            return fh.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


class RunnerProcess:
    """One ``python -m toolfork.bench.runner`` for one executor; ``alive`` until it hangs or dies."""

    def __init__(
        self,
        spec: str,
        config: BenchConfig,
        factor: float,
        marker: str,
        log_dir: str,
        user: dict[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.config = config
        self.factor = factor
        self.marker = marker
        self.outcome = "ok"  # ok | hung | crashed | setup_failed
        self.exit: str | None = None
        self.setup_error: str | None = None
        self.leftover_at_end: int | None = None
        self.escaped = 0
        self.workloads: list[str] = []
        self._buf = b""
        self._closed = False
        self._t_start = time.monotonic()
        self._log_path = os.path.join(log_dir, f"{marker}.log")
        env = dict(os.environ, **{procs.MARK_ENV: marker})
        # The runner must import this very toolfork, also when it was found through sys.path (a checkout).
        root = os.path.dirname(os.path.dirname(os.path.abspath(toolfork.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self._r, w = os.pipe()
        with open(self._log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "toolfork.bench.runner", "--fd", str(w)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(w,),
                start_new_session=True,
                env=env,
            )
        os.close(w)
        self._send({"executor": spec, "config": config.to_dict(), "user": user})
        try:
            self._await_ready()
        except BaseException:
            self.kill()
            raise

    @property
    def alive(self) -> bool:
        return self.outcome == "ok" and not self._closed

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()

    def _next(self, limit_s: float) -> dict[str, Any] | None:
        """The runner's next event, or None when it died ("crashed") or was silent past ``limit_s`` ("hung")."""
        deadline = time.monotonic() + limit_s
        while True:
            if b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # not ours (nothing else should write there, but never trust it)
                if isinstance(event, dict):
                    return event
                continue
            ready, _, _ = select.select([self._r], [], [], max(0.0, min(0.2, deadline - time.monotonic())))
            eof = False
            if ready:
                chunk = os.read(self._r, 65536)
                if chunk:
                    self._buf += chunk
                    continue
                # Every writer is gone: the runner exited (or closed the pipe, then died).
                eof = True
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=5)
            if eof or self.proc.poll() is not None:
                self.outcome = "crashed"
                self.exit = procs.exit_text(self.proc.poll())
                return None
            if time.monotonic() >= deadline:
                self.outcome = "hung"
                return None

    def _await_ready(self) -> None:
        limit = self.config.setup_limit_s * self.factor
        while True:
            event = self._next(limit)
            if event is None:
                self.setup_error = f"runner {self.outcome} during setup\n{_tail(self._log_path)}".strip()
                self.kill()
                return
            if event.get("event") == "setup_failed":
                self.outcome = "setup_failed"
                self.setup_error = f"setup failed: {event.get('error')}"
                self.kill()
                return
            if event.get("event") == "ready":
                return

    def run(self, workload: str) -> dict[str, Any]:
        """One workload's cell; a cell "hung" or "crashed" (with the log's tail) leaves the runner dead."""
        if self.setup_error is not None:
            return {"status": "error", "detail": self.setup_error}
        self.workloads.append(workload)
        self._send({"workload": workload})
        t0 = time.monotonic()
        limit = BETWEEN_CELLS_LIMIT_S * self.factor
        while True:
            event = self._next(limit)
            if event is None:
                self.kill()
                if self.outcome == "hung":
                    detail = f"no result within the {limit:.0f} s time limit"
                else:
                    detail = f"the runner died: {self.exit}"
                return {
                    "status": self.outcome,
                    "detail": f"{detail}\n{_tail(self._log_path)}".strip()[-2000:],
                    "elapsed_s": round(time.monotonic() - t0, 3),
                }
            kind = event.get("event")
            if kind == "start":
                t0 = time.monotonic()
                limit = self.config.limit_for(workload) * self.factor
            elif kind == "result" and event.get("workload") == workload:
                return dict(event["cell"])

    def close(self) -> dict[str, Any]:
        """End the runner (EOF on its stdin), kill what is left of it, and say what it did."""
        if not self._closed and self.outcome == "ok":
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            while True:
                event = self._next(BETWEEN_CELLS_LIMIT_S * self.factor)
                if event is None:
                    break
                if event.get("event") == "end":
                    self.leftover_at_end = event.get("leftover_processes")
                    break
            try:
                self.proc.wait(timeout=10 * self.factor)
                self.exit = procs.exit_text(self.proc.returncode)
            except subprocess.TimeoutExpired:
                self.exit = "did not exit after its last event; killed"
        self.kill()
        with contextlib.suppress(OSError):
            os.unlink(self._log_path)
        return {
            "executor": self.spec,
            "workloads": self.workloads,
            "outcome": self.outcome,
            "exit": self.exit,
            "leftover_at_end": self.leftover_at_end,
            "escaped_processes": self.escaped,
            "duration_s": round(time.monotonic() - self._t_start, 3),
        }

    def kill(self) -> None:
        """Take the runner and everything it started down (idempotent)."""
        if self._closed:
            return
        self._closed = True
        procs.kill_group(self.proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        if self.exit is None or self.outcome == "hung":
            self.exit = procs.exit_text(self.proc.poll())
        escaped = procs.marked(self.marker)
        self.escaped = len(escaped)
        procs.kill_all(escaped)
        with contextlib.suppress(OSError):
            os.close(self._r)
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
