"""Helpers of the Executor-level governance tests: Executors that are closed at the end of a test with
every process they had checked gone, calls written briefly, and overlap and window counts from the
start/end stamps the tools return."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from tests.procs import all_gone
from toolfork.executor import Executor
from toolfork.executor.types import ToolResult

MIB = 1024 * 1024
T = TypeVar("T")


def call(i: object, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": str(i), "name": name, "arguments": arguments}


def in_threads(work: Callable[[str], T], tags: Iterable[str], limit: float = 60.0) -> list[T]:
    """``work(tag)`` for every tag at once, each in a thread of its own; what each returned, in tag order.
    The first error a thread raised is raised here."""
    tags = list(tags)
    out: dict[str, T] = {}
    errors: list[BaseException] = []

    def run(tag: str) -> None:
        try:
            out[tag] = work(tag)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(tag,)) for tag in tags]
    for t in threads:
        t.start()
    for t in threads:
        t.join(limit)
    if errors:
        raise errors[0]
    assert len(out) == len(tags), f"threads still running after {limit} s: {set(tags) - set(out)}"
    return [out[tag] for tag in tags]


def text(r: ToolResult) -> str:
    assert r.status == "ok", (r.status, r.error)
    assert r.output is not None
    return r.output.content[0].text  # type: ignore[no-any-return]


def stamps(r: ToolResult) -> tuple[float, float]:
    """The (start, end) a stamping tool returned: "start end pid"."""
    start, end, _ = text(r).split()
    return float(start), float(end)


def max_overlap(intervals: Iterable[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end at the instant another starts does not overlap it)."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def most_in_window(times: list[float], width: float) -> int:
    """The most of ``times`` inside any window ``width`` long."""
    times = sorted(times)
    most = 0
    j = 0
    for i, t in enumerate(times):
        while times[j] < t - width:
            j += 1
        most = max(most, i - j + 1)
    return most


class Executors:
    """Makes Executors (fork mode unless told otherwise) and, at the end of the test, closes each and
    checks that none of its processes (workers seen at any time, the template, every pid a result
    named) is alive afterwards."""

    def __init__(self) -> None:
        self.made: list[Executor] = []
        self.pids: dict[int, set[int]] = {}

    def __call__(self, tools: Iterable[Any], **kwargs: Any) -> Executor:
        kwargs.setdefault("mode", "fork")
        kwargs.setdefault("timeout", 60)
        ex = Executor(tools, **kwargs)
        self.made.append(ex)
        self.pids[id(ex)] = set()
        self.look(ex)
        return ex

    def look(self, ex: Executor) -> None:
        """Remember the processes ``ex`` has now."""
        if ex.mode != "fork" or ex.closed:
            return
        backend: Any = ex.backend
        seen = self.pids[id(ex)]
        seen.update(backend.worker_pids)
        if backend.template_pid is not None:
            seen.add(backend.template_pid)

    def note(self, ex: Executor, results: Iterable[ToolResult]) -> list[ToolResult]:
        """Remember the pids ``results`` ran in (not the host's own: sequential mode, inline tools)."""
        results = list(results)
        self.pids[id(ex)].update(r.worker_pid for r in results if r.worker_pid and r.worker_pid != os.getpid())
        self.look(ex)
        return results

    def run(self, ex: Executor, calls: list[dict[str, Any]]) -> list[ToolResult]:
        results = self.note(ex, ex.run(calls))
        assert [r.call_id for r in results] == [c["id"] for c in calls]  # call order
        return results

    def close(self, ex: Executor) -> list[int]:
        """Close ``ex``; the pids of its that are still alive 10 s later (none, we expect)."""
        self.look(ex)
        ex.close()
        return all_gone(sorted(self.pids[id(ex)]), 10.0)

    def close_all(self) -> None:
        left = {}
        for ex in self.made:
            alive = self.close(ex)
            if alive:
                left[repr(ex)] = alive
        assert not left, f"processes left behind after close: {left}"


class PongServer:
    """A TCP server on 127.0.0.1 in a thread of the test: answers b"pong" to each connection."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.served = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="pong-server", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(16)
                    conn.sendall(b"pong")
                    self.served += 1
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

