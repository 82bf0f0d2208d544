"""Red team, the host side of ``toolfork run`` and ``toolfork worker`` through the real command: a
deadline holds while our stdout is a full pipe nobody reads, input through a pipe given by name is
never lost, and Ctrl-C from a terminal (SIGINT to the whole group, twice) exits 130 and resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.redteam.conftest import REPO, child_env, line, records

TOOLS = "tests/redteam/host_tools.py:TOOLS"
BOUND_S = 30.0


def _wait_for(predicate: Any, limit: float = BOUND_S) -> bool:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _start(*args: str, env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "toolfork.cli", *args], cwd=REPO, env=env or child_env(),
                            stdin=popen.pop("stdin", subprocess.DEVNULL), stdout=popen.pop("stdout", subprocess.PIPE),
                            stderr=popen.pop("stderr", subprocess.PIPE), **popen)


def _finish(proc: subprocess.Popen[bytes], stdin: bytes | None = None) -> tuple[bytes, bytes]:
    try:
        return proc.communicate(stdin, timeout=BOUND_S * 2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _lane_env(lane: bool) -> dict[str, str]:
    env = child_env()
    env["TOOLFORK_LINE_LANE"] = "1" if lane else "0"
    return env


# ------------------------------------------------------------------ deadlines behind a full stdout


def test_worker_keeps_a_deadline_while_its_client_reads_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "stopped"
    proc = _start("worker", "--tools", TOOLS, "--workers", "2", stdin=subprocess.PIPE)
    assert proc.stdin is not None
    # Results far larger than a pipe holds: the worker blocks writing them while the hang runs.
    proc.stdin.write(line({"id": "hang", "name": "stuck", "arguments": {"marker": str(marker)}, "timeout": 1.0}))
    for i in range(8):
        proc.stdin.write(line({"id": f"big{i}", "name": "blob", "arguments": {"n": 200_000}}))
    proc.stdin.flush()
    try:
        held = _wait_for(marker.exists, 20.0)
    finally:
        out, err = _finish(proc, b"")
    assert held, "the hang ran on while the client was not reading"
    got = {r["id"]: r["status"] for r in records(out)}
    assert got == {"hang": "timeout", **{f"big{i}": "ok" for i in range(8)}}, err.decode()[-2000:]


# ``toolfork run`` with the writer's bound at one line (instead of 4,096), so that three records larger
# than a pipe fill everything there is: the job's output is blocked. They take a second, and four
# workers start the hang after them at once, so it runs (its deadline ahead) when the output blocks.
SMALL_WRITER = ("import sys; import toolfork.commands._output as o; o.MAX_PENDING_LINES = 1; "
                "from toolfork import cli; sys.exit(cli.main(sys.argv[1:]))")


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "general"])
def test_run_keeps_a_deadline_while_its_stdout_is_a_full_pipe(lane: bool, tmp_path: Path) -> None:
    marker = tmp_path / "stopped"
    calls = tmp_path / "calls.jsonl"
    with open(calls, "wb") as f:
        for i in range(3):
            f.write(line({"id": f"big{i}", "name": "blob", "arguments": {"n": 200_000, "delay": 1.0}}))
        f.write(line({"id": "hang", "name": "stuck", "arguments": {"marker": str(marker)}, "timeout": 3.0}))
    proc = subprocess.Popen([sys.executable, "-c", SMALL_WRITER, "run", str(calls), "--tools", TOOLS,
                             "--workers", "4", "-q"], cwd=REPO, env=_lane_env(lane), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        held = _wait_for(marker.exists, 20.0)
    finally:
        out, err = _finish(proc)
    assert held, "the hang ran on while nobody read our stdout"
    got = records(out)
    assert [(r["id"], r["status"]) for r in got] == [("big0", "ok"), ("big1", "ok"), ("big2", "ok"),
                                                      ("hang", "timeout")], err.decode()[-2000:]


# ------------------------------------------------------------------ pipes given by name


def test_run_reads_process_substitution_whole(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    lines = "".join(line({"id": f"c{i}", "name": "nap", "arguments": {"seconds": 0}}).decode() for i in range(50))
    script = (f"{sys.executable} -m toolfork.cli run <(printf '%s' {_quote(lines)}) -o {out} "
              f"--tools {TOOLS} -q")
    proc = subprocess.run(["bash", "-c", script], cwd=REPO, env=child_env(), capture_output=True,
                          timeout=BOUND_S * 2)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert [r["id"] for r in records(out.read_bytes())] == [f"c{i}" for i in range(50)]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "general"])
def test_run_from_a_fifo_whose_writer_stalls_writes_what_it_read(lane: bool, tmp_path: Path) -> None:
    fifo = tmp_path / "calls.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out.jsonl"
    proc = _start("run", str(fifo), "-o", str(out), "--tools", TOOLS, "-q", env=_lane_env(lane))
    opened: list[int] = []
    opener = threading.Thread(target=lambda: opened.append(os.open(fifo, os.O_WRONLY)), daemon=True)
    opener.start()
    opener.join(BOUND_S)
    try:
        assert opened, "the job never opened the FIFO"
        writer = opened[0]
        os.write(writer, b"".join(line({"id": f"c{i}", "name": "nap", "arguments": {"seconds": 0}}) for i in range(3)))

        def written() -> int:
            return len(out.read_bytes().splitlines()) if out.exists() else 0

        # The writer stalls (keeps the FIFO open, writes nothing): the calls read so far are answered.
        assert _wait_for(lambda: written() == 3, 20.0), f"{written()} records while the writer stalls"
        os.write(writer, line({"id": "c3", "name": "nap", "arguments": {"seconds": 0}}))
    finally:
        for fd in opened:
            os.close(fd)
    _, err = _finish(proc)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert [r["id"] for r in records(out.read_bytes())] == ["c0", "c1", "c2", "c3"]


# ------------------------------------------------------------------ Ctrl-C from a terminal


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "general"])
def test_sigint_twice_to_the_process_group_exits_130_and_resume_finishes(lane: bool, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    n = 300
    with open(calls, "wb") as f:
        for i in range(n):
            f.write(line({"id": f"c{i}", "name": "nap", "arguments": {"seconds": 0.05}}))
    out = tmp_path / "out.jsonl"
    args = ("run", str(calls), "-o", str(out), "--tools", TOOLS, "--workers", "4", "-q")
    proc = _start(*args, env=_lane_env(lane), start_new_session=True)  # its own group, as a terminal's job
    try:
        assert _wait_for(lambda: out.exists() and len(out.read_bytes().splitlines()) >= 10), "no progress"
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = _finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err.decode()[-3000:]
    assert b"Traceback" not in err, err.decode()[-3000:]
    # --rerun-unknown: the naps Ctrl-C cut short have an unknown outcome; napping again is harmless
    resumed = subprocess.run([sys.executable, "-m", "toolfork.cli", *args, "--resume", "--rerun-unknown"], cwd=REPO,
                             env=_lane_env(lane), capture_output=True, timeout=BOUND_S * 4)
    assert resumed.returncode == 0, resumed.stderr.decode()[-3000:]
    ids = [json.loads(ln)["id"] for ln in out.read_bytes().splitlines()]
    assert sorted(ids) == sorted(f"c{i}" for i in range(n)) and len(ids) == n
