"""Every long-running command ends cleanly on SIGTERM (a supervisor) and SIGINT (Ctrl-C): its own exit
status, no traceback, its pool closed (the suite's autouse fixture fails a test that leaves a process),
what it had done written; and ``mcp serve`` prints no deprecation warning of its MCP SDK. Real
subprocesses, signalled while they work."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from tests.cli.conftest import REPO, child_env

SIGNALS = [(signal.SIGTERM, 143), (signal.SIGINT, 130)]
TOOLS = "tests/cli/cli_tools.py:TOOLS"


def _start(args: list[str], stderr: IO[str], stdin: Any = subprocess.PIPE, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, *args], cwd=REPO, env={**child_env(), **env}, stdin=stdin,
                            stdout=subprocess.PIPE, stderr=stderr, text=True)


def _wait_for(check: Callable[[], bool], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[str], signum: int) -> tuple[int, str]:
    proc.send_signal(signum)
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    return proc.returncode, out


def _assert_clean(code: int, expected: int, err_file: Path) -> str:
    err = err_file.read_text()
    assert code == expected, (code, err)
    assert "Traceback" not in err, err
    return err


@pytest.mark.parametrize(("signum", "status"), SIGNALS)
def test_run_stops_writes_what_it_did_and_says_how_to_resume(tmp_path: Path, signum: int, status: int) -> None:
    calls = tmp_path / "calls.jsonl"
    calls.write_text("".join(json.dumps(c) + "\n" for c in [
        {"id": "quick", "name": "echo", "arguments": {"text": "hi"}},
        *({"id": f"slow{i}", "name": "nap", "arguments": {"seconds": 600}} for i in range(3))]))
    out, err_file = tmp_path / "out.jsonl", tmp_path / "err.txt"
    with open(err_file, "w") as err:
        proc = _start(["-m", "toolfork", "run", str(calls), "-o", str(out), "--tools", TOOLS, "--workers", "2"],
                      err, stdin=subprocess.DEVNULL)
        _wait_for(lambda: out.exists() and '"quick"' in out.read_text(), "the quick call's record")
        proc.send_signal(signum)  # a warm stop: the naps are let run ...
        _wait_for(lambda: "Ctrl-C again to stop now" in err_file.read_text(), "the warm stop's notice")
        assert proc.poll() is None
        code, _ = _stop(proc, signum)  # ... until the second signal stops them at once
    text = _assert_clean(code, status, err_file)
    assert "toolfork run: finishing 3 calls; Ctrl-C again to stop now" in text
    assert "interrupted; rerun with --resume to continue" in text
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["quick"]


@pytest.mark.parametrize(("signum", "status"), SIGNALS)
def test_worker_answers_then_stops(tmp_path: Path, signum: int, status: int) -> None:
    err_file = tmp_path / "err.txt"
    with open(err_file, "w") as err:
        proc = _start(["-m", "toolfork", "worker", "--tools", TOOLS, "--workers", "2"], err)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"id": "a", "name": "echo", "arguments": {"text": "hi"}}) + "\n")
        proc.stdin.write(json.dumps({"id": "b", "name": "nap", "arguments": {"seconds": 600}}) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == "a"
        code, _ = _stop(proc, signum)
    _assert_clean(code, status, err_file)


@pytest.mark.parametrize(("signum", "status"), SIGNALS)
def test_chat_answers_then_stops(tmp_path: Path, signum: int, status: int) -> None:
    err_file = tmp_path / "err.txt"
    with open(err_file, "w") as err:
        proc = _start(["-m", "toolfork", "chat", "--provider", "test", "--parallel",
                       "--tools", "tests/cli/cli_tools.py:echo"], err)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("hello\n")
        proc.stdin.flush()
        lines = [proc.stdout.readline() for _ in range(3)]  # the call, its result, the answer
        assert lines[2].strip() == '{"echo": "a"}', lines
        code, _ = _stop(proc, signum)
    _assert_clean(code, status, err_file)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 0)])
def test_mcp_serve_http_stops_without_a_traceback_or_a_deprecation_warning(tmp_path: Path, signum: int,
                                                                            status: int) -> None:
    from mcp import Client

    err_file = tmp_path / "err.txt"
    with open(err_file, "w") as err:
        # Every warning shown, as a developer running with -W default sees them.
        proc = _start(["-W", "default", "-m", "toolfork", "mcp", "serve", "--tools", "tests/mcp/served_tools.py",
                       "--http", "127.0.0.1:0", "--workers", "2"], err, stdin=subprocess.DEVNULL)
        _wait_for(lambda: "listening on http://" in err_file.read_text(), "the server's address")
        url = err_file.read_text().split("listening on ", 1)[1].split()[0]
        logs: list[str] = []

        async def log(params: Any) -> None:
            logs.append(str(params.data))

        async def session() -> Any:
            async with Client(url, mode="legacy", logging_callback=log) as client:
                await client.session.set_logging_level("info")  # the handshake era's logging/setLevel
                return await client.call_tool("say", {})

        said = asyncio.run(asyncio.wait_for(session(), 90))
        assert said.content[0].text == "said" and logs == ["at info", "at warning"]
        code, _ = _stop(proc, signum)
    text = err_file.read_text()
    assert code == status, text
    assert "Traceback" not in text and "CancelledError" not in text, text
    assert "DeprecationWarning" not in text, text


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_mcp_serve_stdio_starts_and_stops_quietly(tmp_path: Path, signum: int) -> None:
    err_file = tmp_path / "err.txt"
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"}}}
    with open(err_file, "w") as err:
        proc = _start(["-W", "default", "-m", "toolfork", "mcp", "serve", "--tools", "tests/mcp/served_tools.py",
                       "--workers", "2"], err)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(hello) + "\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 1 and "logging" in answer["result"]["capabilities"]  # still offered to them
        code, _ = _stop(proc, signum)
    text = err_file.read_text()
    assert code == 0, text
    assert "Traceback" not in text and "DeprecationWarning" not in text, text

