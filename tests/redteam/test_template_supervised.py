"""The template (the process that forks every worker) is a supervised part: a tool that kills or stops
its worker's parent, or anything else that ends it, fails the calls running on its workers with a status
naming it, and a new template serves the later calls, in every entry point. It is looked at even while
no batch runs."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from typing import Any

import psutil
import pytest

from tests.redteam.conftest import HOSTILE, line, records, toolfork
from tests.redteam.hostile_tools import PARENT_TOOLS
from toolfork.executor import Executor, ToolCall, ToolResult
from toolfork.executor.types import CallFinished


def _replaced(ex: Executor, old: int | None, within: float = 10.0) -> bool:
    """Whether the pool has a template other than ``old`` (and ``old`` is gone) within ``within`` seconds."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if ex.backend.template_pid != old and not _alive(old):  # type: ignore[attr-defined]
            return True
        time.sleep(0.05)
    return False


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _serves(ex: Executor, tag: str) -> None:
    results = ex.run([ToolCall(f"{tag}{i}", "echo", {"text": f"{tag}{i}"}) for i in range(8)])
    assert [r.output.content[0].text for r in results] == [f"{tag}{i}" for i in range(8)], results


def _names_the_template(r: ToolResult) -> None:
    assert r.status == "crashed" and "template" in r.error.message and "died" in r.error.message, r


def _through(ex: Executor, entry: str, calls: list[ToolCall]) -> list[ToolResult]:
    """``calls`` through one entry point of the Executor, their results in call order."""
    if entry == "run":
        return ex.run(calls)
    if entry == "submit":
        return [f.result(timeout=60) for f in [ex.submit(c) for c in calls]]
    if entry == "stream":
        done = {ev.call_id: ev.result for ev in ex.stream(calls) if type(ev) is CallFinished}
        return [done[c.id] for c in calls]
    if entry == "imap":
        return list(ex.imap(calls))
    if entry == "arun":
        return asyncio.run(ex.arun(calls))

    async def each() -> list[ToolResult]:
        return list(await asyncio.gather(*[ex.acall(c) for c in calls]))

    return asyncio.run(each())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("entry", ["run", "submit", "stream", "imap", "arun", "acall"])
def test_a_tool_that_kills_the_template_fails_its_call_and_a_new_template_serves(entry: str) -> None:
    with Executor(PARENT_TOOLS, mode="fork", workers=2, timeout=30) as ex:
        _serves(ex, "warm")
        old = ex.backend.template_pid  # type: ignore[attr-defined]
        results = _through(ex, entry, [ToolCall("k", "signal_parent", {"sig": "SIGKILL"}),
                                       *[ToolCall(f"n{i}", "nap", {"seconds": 0.05, "text": f"n{i}"})
                                         for i in range(4)]])
        _names_the_template(results[0])
        for r in results[1:]:  # on the other worker: done before, or ended with the template
            assert r.status == "ok" or "template" in r.error.message, r
        assert _replaced(ex, old)
        _serves(ex, "after")
        assert ex.run([ToolCall("k2", "signal_parent", {"sig": "SIGKILL"})])[0].status == "crashed"
        _serves(ex, "again")


@pytest.mark.timeout(120)
def test_another_threads_batch_gets_statuses_not_an_exception() -> None:
    """Thread A's tool kills the template while thread B's calls run on its workers: B's running calls
    end "crashed" naming the template, the rest run on the new template's workers; nobody raises."""
    with Executor(PARENT_TOOLS, mode="fork", workers=3, timeout=30) as ex:
        _serves(ex, "warm")
        out: dict[str, Any] = {}
        started = threading.Event()

        def b() -> None:
            started.set()
            try:
                out["b"] = ex.run([ToolCall(f"b{i}", "nap", {"seconds": 0.3, "text": f"b{i}"}) for i in range(12)])
            except BaseException as exc:  # what the batch raised is the finding
                out["b"] = exc

        t = threading.Thread(target=b)
        t.start()
        started.wait()
        time.sleep(0.2)
        out["a"] = ex.run([ToolCall("k", "signal_parent", {"sig": "SIGKILL"})])
        t.join(60)
        assert not t.is_alive()
        assert isinstance(out["b"], list), out["b"]
        _names_the_template(out["a"][0])
        for i, r in enumerate(out["b"]):
            assert (r.status == "ok" and r.output.content[0].text == f"b{i}") or "template" in r.error.message, r
        assert sum(r.status == "ok" for r in out["b"]) >= 6  # those not running at the time ran on
        _serves(ex, "after")


@pytest.mark.timeout(120)
def test_a_template_killed_while_no_batch_runs_is_replaced(caplog: pytest.LogCaptureFixture) -> None:
    """Killed from outside with nothing running: the pool notices by itself (its watcher looks at the
    template every half second), says why at WARNING, and the next batch simply runs."""
    with Executor(PARENT_TOOLS, mode="fork", workers=2) as ex, caplog.at_level(logging.WARNING, "toolfork"):
        _serves(ex, "warm")
        old = ex.backend.template_pid  # type: ignore[attr-defined]
        workers = ex.backend.worker_pids  # type: ignore[attr-defined]
        os.kill(old, signal.SIGKILL)
        assert _replaced(ex, old)
        assert not any(_alive(pid) for pid in workers)
        assert any("template" in r.getMessage() and "died" in r.getMessage() for r in caplog.records)
        _serves(ex, "after")


@pytest.mark.timeout(120)
def test_a_stopped_template_leaves_no_hung_worker_behind() -> None:
    """A tool SIGSTOPs the template while another call hangs past its timeout of 1 s: that call ends
    ("timeout", or "crashed" naming the template if the stop was seen first) and its worker does not
    live on (the template, which kills workers, was stopped: it is replaced, its workers ended with it)."""
    with Executor(PARENT_TOOLS, mode="fork", workers=2) as ex:
        _serves(ex, "warm")
        old = ex.backend.template_pid  # type: ignore[attr-defined]
        hung, stop = ex.run([ToolCall("h", "nap", {"seconds": 60, "text": "late"}, timeout=1),
                             ToolCall("s", "signal_parent", {"sig": "SIGSTOP"})])
        assert stop.status == "ok" or "template" in stop.error.message, stop
        assert hung.status == "timeout" or "template" in hung.error.message, hung
        end = time.monotonic() + 10
        while _alive(hung.worker_pid) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _alive(hung.worker_pid)
        assert _replaced(ex, old)
        _serves(ex, "after")


@pytest.mark.timeout(120)
def test_sigterm_to_the_template_from_a_tool_is_survived_too() -> None:
    with Executor(PARENT_TOOLS, mode="fork", workers=2) as ex:
        old = ex.backend.template_pid  # type: ignore[attr-defined]
        [r] = ex.run([ToolCall("t", "signal_parent", {"sig": "SIGTERM"})])
        _names_the_template(r)
        assert _replaced(ex, old)
        _serves(ex, "after")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("command", ["run", "worker"])
def test_the_commands_survive_a_tool_that_kills_the_template(command: str, tmp_path: Any) -> None:
    """``toolfork run`` (its line lane) and ``toolfork worker``: the killer's record says "crashed"
    naming the template, and every line after it is answered (a line running on another worker at
    that moment ends with the template, naming it)."""
    lines = [line({"id": "k", "name": "signal_parent", "arguments": {"sig": "SIGKILL"}})]
    lines += [line({"id": f"e{i}", "name": "echo", "arguments": {"text": f"e{i}"}}) for i in range(20)]
    if command == "run":
        calls = tmp_path / "calls.jsonl"
        calls.write_bytes(b"".join(lines))
        proc = toolfork("run", str(calls), "--tools", HOSTILE.replace(":TOOLS", ":PARENT_TOOLS"), "--workers", "2",
                        "-q")
    else:
        proc = toolfork("worker", "--tools", HOSTILE.replace(":TOOLS", ":PARENT_TOOLS"), "--workers", "2",
                        stdin=b"".join(lines))
    by_id = {r["id"]: r for r in records(proc.stdout)}
    assert set(by_id) == {"k", *[f"e{i}" for i in range(20)]}, proc.stderr
    assert by_id["k"]["status"] == "crashed" and "template" in by_id["k"]["error"]["message"]
    for i in range(20):
        r = by_id[f"e{i}"]
        assert r["status"] == "ok" or "template" in r["error"]["message"], proc.stderr
    assert sum(by_id[f"e{i}"]["status"] == "ok" for i in range(20)) >= 10


@pytest.mark.timeout(180)
def test_mcp_serve_answers_after_a_tool_kills_the_template() -> None:
    """``toolfork mcp serve``: the killer's call is an error naming the template; the next calls answer."""
    import sys

    from tests.mcp.conftest import http_server

    serve = [sys.executable, "-m", "toolfork", "mcp", "serve", "--tools", HOSTILE.replace(":TOOLS", ":PARENT_TOOLS"),
             "--http", "127.0.0.1:0", "--workers", "2"]

    async def go(url: str) -> tuple[Any, list[Any]]:
        from mcp import Client

        async with Client(url, mode="legacy") as client:
            killed = await client.session.call_tool("signal_parent", {"sig": "SIGKILL"})
            after = [await client.session.call_tool("echo", {"text": f"e{i}"}) for i in range(6)]
            return killed, after

    with http_server(serve) as (_, url):
        killed, after = asyncio.run(go(url))
    assert killed.is_error and "template" in killed.content[0].text, killed
    assert [(r.is_error, r.content[0].text) for r in after] == [(False, f"e{i}") for i in range(6)]
