"""Red team, executor side: sys.exit in a tool (#4) and the detection of fallbacks to sequential (#9)."""

from __future__ import annotations

import logging
import multiprocessing
import sys
from typing import Any

import pytest

from tests.redteam import hostile_tools as H
from tests.redteam.conftest import HOSTILE, line, records, toolfork
from toolfork.executor import Executor, ToolCall


def _batch() -> list[ToolCall]:
    return [ToolCall("x0", "leave", {"code": 0}), ToolCall("ok", "echo", {"text": "still here"}),
            ToolCall("x3", "leave", {"code": 3}), ToolCall("xi", "leave_inline", {"code": 0})]


@pytest.mark.parametrize("mode", ["fork", "sequential"])
def test_sys_exit_in_a_tool_is_an_error_naming_systemexit_and_its_code(mode: str) -> None:
    with Executor(H.TOOLS, mode=mode, workers=1) as ex:
        first = ex.run(_batch())
        assert [r.status for r in first] == ["error", "ok", "error", "error"]
        for r, code in ((first[0], 0), (first[2], 3), (first[3], 0)):
            assert r.error is not None and r.error.type == "SystemExit"
            assert f"sys.exit({code})" in r.error.message
        assert first[1].output is not None and first[1].output.as_text() == "still here"
        # The same workers (fork) or the same host (sequential) go on with the next batch.
        again = ex.run([ToolCall("a", "echo", {"text": "again"}), ToolCall("b", "leave", {"code": 1})])
        assert [r.status for r in again] == ["ok", "error"]
        # One worker (fork) or the host (sequential) ran every call: sys.exit ended neither.
        assert len({r.worker_pid for r in [*first[:3], *again]}) == 1


def _exit_hook() -> None:
    sys.exit(5)


def test_sys_exit_in_before_child_is_an_error_naming_the_hook() -> None:
    with Executor(H.TOOLS, mode="fork", workers=1, before_child=_exit_hook) as ex:
        [r] = ex.run([ToolCall("a", "echo", {"text": "x"})])
    assert r.status == "error" and r.error is not None and r.error.type == "SystemExit"
    assert "before_child" in r.error.message and "sys.exit(5)" in r.error.message


@pytest.mark.parametrize("mode", ["fork", "sequential"])
def test_sys_exit_does_not_end_toolfork_run(mode: str, tmp_path: Any) -> None:
    calls = tmp_path / "calls.jsonl"
    calls.write_bytes(line({"id": "1", "name": "echo", "arguments": {"text": "a"}})
                      + line({"id": "2", "name": "leave", "arguments": {"code": 0}})
                      + line({"id": "3", "name": "echo", "arguments": {"text": "c"}}))
    proc = toolfork("run", str(calls), "--tools", HOSTILE, "--mode", mode, "-q")
    assert proc.returncode == 1, proc.stderr
    out = records(proc.stdout)
    assert [r["id"] for r in out] == ["1", "2", "3"]
    assert [r["status"] for r in out] == ["ok", "error", "ok"]
    assert out[1]["error"]["type"] == "SystemExit" and "sys.exit(0)" in out[1]["error"]["message"]


def test_sys_exit_does_not_end_toolfork_worker() -> None:
    stdin = (line({"id": "1", "name": "leave", "arguments": {"code": 0}})
             + line({"id": "2", "name": "leave_inline", "arguments": {"code": 2}})
             + line({"id": "3", "name": "echo", "arguments": {"text": "c"}}))
    proc = toolfork("worker", "--tools", HOSTILE, "--workers", "1", stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    by_id = {r["id"]: r for r in records(proc.stdout)}
    assert set(by_id) == {"1", "2", "3"}
    assert by_id["1"]["error"]["type"] == by_id["2"]["error"]["type"] == "SystemExit"
    assert "sys.exit(2)" in by_id["2"]["error"]["message"] and by_id["3"]["status"] == "ok"


# ------------------------------------------------------------------------------------------ fallback


def _executor_in_daemon(queue: Any) -> None:
    """Runs in a daemonic process: which mode does "auto" pick, why, and what was logged?"""
    seen: list[tuple[int, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.levelno, record.getMessage()))

    logger = logging.getLogger("toolfork.executor")
    logger.addHandler(Keep())
    logger.setLevel(logging.DEBUG)
    try:
        with Executor(H.TOOLS) as ex:
            [r] = ex.run([ToolCall("a", "echo", {"text": "in a daemon"})])
            queue.put((ex.mode, ex.fallback_reason, r.status, seen))
    except BaseException as exc:  # report instead of dying silently
        queue.put(("raised", repr(exc), None, seen))


def test_auto_inside_a_stdlib_multiprocessing_daemon_runs_sequentially_and_says_so() -> None:
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_executor_in_daemon, args=(queue,), daemon=True)
    proc.start()
    try:
        mode, reason, status, logged = queue.get(timeout=30)
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join()
        queue.close()
        queue.join_thread()
    assert (mode, status) == ("sequential", "ok"), reason
    assert "daemonic multiprocessing (standard library) process" in reason
    assert [(level, msg) for level, msg in logged if reason in msg and level == logging.WARNING], logged


def test_auto_inside_a_multiprocess_daemon_names_the_multiprocess_package() -> None:
    import multiprocess

    ctx = multiprocess.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_executor_in_daemon, args=(queue,), daemon=True)
    proc.start()
    try:
        mode, reason, status, logged = queue.get(timeout=30)
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join()
        queue.close()
        queue.join_thread()
    assert (mode, status) == ("sequential", "ok"), reason
    assert "daemonic multiprocess (package) process" in reason and "standard library" not in reason
    assert any(level == logging.WARNING and reason in msg for level, msg in logged), logged


def test_each_fallback_reason_says_what_was_found(monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    import multiprocess

    monkeypatch.setattr(multiprocess, "get_all_start_methods", lambda: ["spawn", "forkserver"])
    with caplog.at_level(logging.INFO, logger="toolfork.executor"), Executor([], mode="auto") as ex:
        assert ex.mode == "sequential"
        assert ex.fallback_reason is not None
        assert "no fork start method" in ex.fallback_reason and "spawn, forkserver" in ex.fallback_reason
        assert "daemonic" not in ex.fallback_reason
    assert [r.levelno for r in caplog.records if r.name == "toolfork.executor"] == [logging.WARNING]
    monkeypatch.undo()
    caplog.clear()
    monkeypatch.setenv("TOOLFORK_MODE", "sequential")
    with caplog.at_level(logging.INFO, logger="toolfork.executor"), Executor([], mode="auto") as ex:
        assert ex.fallback_reason is not None and "TOOLFORK_MODE=sequential" in ex.fallback_reason
        assert "daemonic" not in ex.fallback_reason
    # The user's own choice is logged, at INFO: nothing is wrong.
    assert [r.levelno for r in caplog.records if r.name == "toolfork.executor"] == [logging.INFO]
