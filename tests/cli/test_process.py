"""``toolfork run`` and ``toolfork worker`` as real processes: co-process use, kill and resume, exit
codes, progress output with and without a terminal, bounded memory."""

from __future__ import annotations

import json
import random
import re
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.cli.conftest import (
    REPO,
    STAMP_SPEC,
    TOOLS_SPEC,
    child_env,
    read_jsonl,
    run_on_a_terminal,
    run_process,
    toolfork_cmd,
    write_jsonl,
)


def _readline(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> dict[str, Any]:
    """The next result line. ``proc.stdout`` is unbuffered (see ``_popen``): with a buffered reader,
    one read could take two lines, and select() would then miss the second one, still in our buffer."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "no result line within the timeout"
    line = proc.stdout.readline()
    assert line.endswith(b"\n"), line
    return json.loads(line)  # type: ignore[no-any-return]


def _line(row: Any) -> bytes:
    return ((row if isinstance(row, str) else json.dumps(row)) + "\n").encode()


def _write_all(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    view = memoryview(data)
    while view:  # an unbuffered write may be partial
        view = view[proc.stdin.write(view):]


def _send(proc: subprocess.Popen[bytes], row: Any) -> None:
    _write_all(proc, _line(row))


def _popen(*args: str, faulthandler: bool = False) -> subprocess.Popen[bytes]:
    """The command as a co-process; ``faulthandler``: SIGABRT makes it print every thread's stack."""
    env = child_env()
    if faulthandler:
        env["PYTHONFAULTHANDLER"] = "1"
    return subprocess.Popen(toolfork_cmd(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO, env=env, bufsize=0)


def _finish(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.close()
    code = proc.wait(timeout=20)
    return code, proc.stderr.read().decode()


def test_run_as_a_co_process_answers_each_line_before_the_next_is_sent() -> None:
    proc = _popen("run", "-", "-o", "-", "--tools", TOOLS_SPEC, "--workers", "2")
    try:
        for i in range(5):  # the next line is only written once this one's result has been read
            _send(proc, {"id": f"c{i}", "name": "echo", "arguments": {"text": f"hello {i}"}})
            record = _readline(proc)
            assert (record["id"], record["status"]) == (f"c{i}", "ok")
            assert record["output"]["content"][0]["text"] == f"hello {i}"
        _send(proc, "not json")
        assert _readline(proc)["error"]["type"] == "MalformedCallError"
        _send(proc, {"id": "x", "name": "boom", "arguments": {}})
        assert _readline(proc)["status"] == "error"
        # A burst is answered in input order, each line once.
        for i in range(3):
            _send(proc, {"id": f"b{i}", "name": "nap", "arguments": {"seconds": 0.1 * (3 - i)}})
        assert [_readline(proc)["id"] for _ in range(3)] == ["b0", "b1", "b2"]
    finally:
        code, err = _finish(proc)
    assert code == 1  # some calls failed
    assert re.search(r"toolfork run: 10 done, 2 failed, [\d.]+ calls/s", err), err


def _wait_started(marker: Path, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """Until the call that creates ``marker`` has started in a worker (a bound, not a timing check)."""
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert proc.poll() is None, "the co-process died"
        assert time.monotonic() < deadline, "the slow call never started"
        time.sleep(0.01)


def test_run_co_process_starts_a_call_sent_while_a_slow_one_runs(tmp_path: Path) -> None:
    marker = tmp_path / "slow-started"
    proc = _popen("run", "-", "-o", "-", "--tools", TOOLS_SPEC, "--tools", STAMP_SPEC, "--workers", "2", "-q")
    try:
        _send(proc, {"id": "slow", "name": "stamp", "arguments": {"seconds": 2, "marker": str(marker)}})
        _wait_started(marker, proc)
        _send(proc, "not json")  # a bad line while the slow call runs keeps its place too
        _send(proc, {"id": "quick", "name": "stamp", "arguments": {}})
        assert proc.stdin is not None
        proc.stdin.close()
        records = [_readline(proc) for _ in range(3)]
    finally:
        code, err = _finish(proc)
    assert [r["id"] for r in records] == ["slow", "line-2", "quick"]  # input order
    slow, quick = records[0]["output"]["data"], records[2]["output"]["data"]
    # The quick call did not wait for the slow one: it started (and ended) while the slow one ran.
    assert slow["start"] < quick["start"] < quick["end"] < slow["end"]
    assert code == 1, err  # the bad line is a failure


def test_worker_answers_a_call_sent_while_a_slow_one_runs_first(tmp_path: Path) -> None:
    marker = tmp_path / "slow-started"
    proc = _popen("worker", "--tools", TOOLS_SPEC, "--tools", STAMP_SPEC, "--workers", "2")
    try:
        _send(proc, {"id": "slow", "name": "stamp", "arguments": {"seconds": 2, "marker": str(marker)}})
        _wait_started(marker, proc)
        _send(proc, {"id": "quick", "name": "stamp", "arguments": {}})
        first, second = _readline(proc), _readline(proc)
    finally:
        code, err = _finish(proc)
    assert (first["id"], second["id"]) == ("quick", "slow")
    quick, slow = first["output"]["data"], second["output"]["data"]
    assert slow["start"] < quick["start"] < quick["end"] < slow["end"]
    assert code == 0, err


def test_worker_reuses_an_id_only_once_its_call_has_finished(tmp_path: Path) -> None:
    marker = tmp_path / "slow-started"
    proc = _popen("worker", "--tools", TOOLS_SPEC, "--tools", STAMP_SPEC, "--workers", "2")
    try:
        _send(proc, {"id": "same", "name": "stamp", "arguments": {"seconds": 1, "marker": str(marker)}})
        _wait_started(marker, proc)
        _send(proc, {"id": "same", "name": "echo", "arguments": {"text": "too early"}})
        refused = _readline(proc)  # at once, while the first "same" still runs
        first = _readline(proc)
        _send(proc, {"id": "same", "name": "echo", "arguments": {"text": "now fine"}})
        again = _readline(proc)
    finally:
        code, _ = _finish(proc)
    assert refused["id"] == "same" and refused["error"]["type"] == "MalformedCallError"
    assert "a call with this id is still running" in refused["error"]["message"]
    assert first["status"] == "ok" and first["name"] == "stamp"
    assert again["status"] == "ok" and again["output"]["content"][0]["text"] == "now fine"
    assert code == 0


def test_co_processes_in_sequential_mode_answer_line_by_line() -> None:
    for command in (["run", "-", "-o", "-", "-q"], ["worker"]):
        proc = _popen(*command, "--tools", TOOLS_SPEC, "--mode", "sequential")
        try:
            for i in range(3):
                _send(proc, {"id": f"s{i}", "name": "echo", "arguments": {"text": f"t{i}"}})
                record = _readline(proc)
                assert (record["id"], record["output"]["content"][0]["text"]) == (f"s{i}", f"t{i}")
        finally:
            code, err = _finish(proc)
        assert code == 0, err


def test_a_client_that_stops_reading_but_keeps_stdin_open_ends_the_co_process_cleanly() -> None:
    # The stdin reader thread is blocked on the open pipe when the command exits: the interpreter must
    # not abort at shutdown (it did, with SIGABRT, while that thread held stdin's buffer lock).
    for command, expected in ((["run", "-", "-o", "-", "-q"], 1), (["worker"], 0)):
        proc = _popen(*command, "--tools", TOOLS_SPEC, "--workers", "2", faulthandler=True)
        assert proc.stdout is not None and proc.stdin is not None and proc.stderr is not None
        try:
            proc.stdout.close()
            _send(proc, {"id": "a", "name": "echo", "arguments": {"text": "x"}})
            try:
                code = proc.wait(timeout=60)  # about a second on a quiet machine
            except subprocess.TimeoutExpired:  # stuck: its threads' stacks say where
                proc.send_signal(signal.SIGABRT)
                proc.wait(timeout=30)
                pytest.fail(f"{command[0]} did not end:\n{proc.stderr.read().decode()[-6000:]}")
            err = proc.stderr.read().decode()
        finally:
            proc.stdin.close()
        assert code == expected, err
        assert "Fatal Python error" not in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["run", "-", "-o", "-"], ["worker"]])
@pytest.mark.parametrize("state", ["idle", "busy"])
def test_ctrl_c_ends_a_co_process_with_130_and_leaves_no_worker(tmp_path: Path, command: list[str],
                                                                 state: str) -> None:
    marker = tmp_path / "started"
    proc = _popen(*command, "--tools", TOOLS_SPEC, "--tools", STAMP_SPEC, "--workers", "2")
    try:
        _send(proc, {"id": "a", "name": "echo", "arguments": {"text": "x"}})
        assert _readline(proc)["id"] == "a"
        workers = psutil.Process(proc.pid).children(recursive=True)
        assert workers
        if state == "busy":  # a call runs while the input is idle
            _send(proc, {"id": "b", "name": "stamp", "arguments": {"seconds": 30, "marker": str(marker)}})
            _wait_started(marker, proc)
        proc.send_signal(signal.SIGINT)
        if state == "busy" and command[0] == "run":  # a warm stop waits for the call: Ctrl-C again stops now
            time.sleep(1.0)
            assert proc.poll() is None
            proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=20)
    finally:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()
        err = proc.stderr.read().decode()
    assert code == 130, err
    assert "Traceback" not in err and "Fatal Python error" not in err
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive


@pytest.mark.parametrize("command", ["run", "worker"])
def test_a_client_writing_in_bursts_gets_every_result_once(command: str) -> None:
    """Lines arrive in random bursts while calls of every kind run (quick, sleeping, failing, unknown
    tools, bad lines), with a small window: every line is answered once, in input order for run."""
    rnd = random.Random(7)
    args = ["run", "-", "-o", "-", "-q"] if command == "run" else ["worker"]
    proc = _popen(*args, "--tools", TOOLS_SPEC, "--workers", "3", "--window", "3")
    assert proc.stdin is not None and proc.stdout is not None
    stdout = open(proc.stdout.fileno(), "rb", closefd=False)  # buffered: only this thread reads it
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(json.loads(line)["id"] for line in stdout))
    reader.start()
    sent = []
    burst = b""
    for i in range(300):
        kind = rnd.random()
        if kind < 0.05:
            row: Any = "not json"
            sent.append(f"line-{i + 1}")
        else:
            call_id = f"c{i}"
            if kind < 0.15:
                row = {"id": call_id, "name": "nap", "arguments": {"seconds": rnd.choice([0.001, 0.02, 0.1])}}
            elif kind < 0.18:
                row = {"id": call_id, "name": "teleport", "arguments": {}}
            elif kind < 0.2:
                row = {"id": call_id, "name": "boom", "arguments": {}}
            else:
                row = {"id": call_id, "name": "echo", "arguments": {"text": str(i)}}
            sent.append(call_id)
        burst += _line(row)
        if rnd.random() < 0.2:
            _write_all(proc, burst)
            burst = b""
            time.sleep(rnd.choice([0, 0.001, 0.01]))
    _write_all(proc, burst)
    proc.stdin.close()
    code = proc.wait(timeout=60)
    reader.join(10)
    if command == "run":
        assert got == sent
        assert code == 1  # bad lines, unknown tools and boom are failures
    else:
        assert sorted(got) == sorted(sent) and len(got) == len(set(got))
        assert code == 0


def test_worker_answers_in_completion_order_and_survives_bad_lines() -> None:
    proc = _popen("worker", "--tools", TOOLS_SPEC, "--workers", "2")
    try:
        assert proc.stdin is not None
        burst = [{"id": "slow", "name": "nap", "arguments": {"seconds": 0.6}},
                 {"id": "quick", "name": "echo", "arguments": {"text": "q"}}]
        _write_all(proc, b"".join(_line(r) for r in burst))
        assert [_readline(proc)["id"] for _ in range(2)] == ["quick", "slow"]
        _send(proc, "{broken")
        bad = _readline(proc)
        assert bad["id"] == "line-3" and "not valid JSON" in bad["error"]["message"]
        # Ids may be reused once their call has finished: a long-lived client need not invent new ones.
        _send(proc, {"type": "tool_use", "id": "quick", "name": "echo", "input": {"text": "again"}})
        again = _readline(proc)
        assert again["id"] == "quick" and again["output"]["content"][0]["text"] == "again"
    finally:
        code, err = _finish(proc)
    assert code == 0
    assert "toolfork worker: 6 tools" in err


def test_worker_usage_error_exits_2() -> None:
    result = run_process("worker", "--tools", "tests/cli/cli_tools.py:NOPE", stdin="")
    assert result.returncode == 2
    assert "toolfork worker: error:" in result.stderr and "NOPE" in result.stderr


def test_exit_codes_of_the_real_command(tmp_path: Path) -> None:
    ok = run_process("run", "examples/calls.jsonl", "-o", str(tmp_path / "a.jsonl"))
    assert ok.returncode == 0, ok.stderr
    expected = len(Path(REPO, "examples/calls.jsonl").read_text().splitlines())
    assert len(read_jsonl(tmp_path / "a.jsonl")) == expected
    calls = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "name": "boom", "arguments": {}}])
    failed = run_process("run", str(calls), "-o", str(tmp_path / "b.jsonl"), "--tools", TOOLS_SPEC)
    assert failed.returncode == 1
    usage = run_process("run", str(calls), "--tools", "nowhere.py:TOOLS")
    assert usage.returncode == 2 and "toolfork run: error: 'nowhere.py': no such file" in usage.stderr
    assert usage.stdout == ""


def test_plain_progress_lines_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    rows = [{"id": f"p{i}", "name": "nap", "arguments": {"seconds": 0.03}} for i in range(40)]
    rows.append({"id": "bad", "name": "boom", "arguments": {}})
    calls = write_jsonl(tmp_path / "c.jsonl", rows)
    result = run_process("run", str(calls), "-o", str(tmp_path / "o.jsonl"), "--tools", TOOLS_SPEC,
                         "--workers", "2", "--progress-interval", "0.1")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert "\r" not in result.stderr and "\x1b" not in result.stderr
    assert lines[0].startswith("toolfork run: 6 tools from tests/cli/cli_tools.py:TOOLS; fork mode, "
                               "2 workers")
    periodic = [ln for ln in lines
                if re.fullmatch(r"toolfork run: \d+%, \d+ done, \d failed, [\d.]+ calls/s, ETA \d+:\d\d", ln)]
    assert len(periodic) >= 2, result.stderr
    assert re.fullmatch(r"toolfork run: 41 done, 1 failed, [\d.]+ calls/s, [\d.]+ s", lines[-2]), lines[-2]
    assert lines[-1] == ("toolfork run: 41 records: ok 40, error 1, timeout 0, crashed 0, cancelled 0; "
                         "error types: RuntimeError 1"), lines[-1]


def test_progress_bar_when_stderr_is_a_terminal(tmp_path: Path) -> None:
    rows = [{"id": f"p{i}", "name": "nap", "arguments": {"seconds": 0.05}} for i in range(30)]
    calls = write_jsonl(tmp_path / "c.jsonl", rows)
    status, text = run_on_a_terminal("run", str(calls), "-o", str(tmp_path / "o.jsonl"), "--tools", TOOLS_SPEC,
                                     "--workers", "2", timeout=20)
    assert status == 0
    assert "\r\x1b[K[" in text  # redrawn in place
    assert re.search(r"\[#+\.*\] +\d+% \d+ done, 0 failed, [\d.]+ calls/s", text), text
    assert re.search(r"\[#{24}\] 100% 30 done, 0 failed, [\d.]+ calls/s, [\d.]+ s", text), text


def test_resume_after_sigkill_finishes_every_call_exactly_once(tmp_path: Path) -> None:
    ids = [f"k{i:03d}" for i in range(120)]
    rows = [{"id": i, "name": "nap", "arguments": {"seconds": 0.02, "tag": i}} for i in ids]
    calls = write_jsonl(tmp_path / "c.jsonl", rows)
    out = tmp_path / "out.jsonl"
    args = ("run", str(calls), "-o", str(out), "--tools", TOOLS_SPEC, "--workers", "2", "-q")
    proc = subprocess.Popen(toolfork_cmd(*args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO,
                            env=child_env())
    deadline = time.monotonic() + 30
    while (not out.exists() or out.read_bytes().count(b"\n") < 20) and time.monotonic() < deadline:
        time.sleep(0.01)
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    psutil.wait_procs(children, timeout=10)  # the executor's workers notice and exit
    first = out.read_bytes()
    first_ids = [json.loads(line)["id"] for line in first.splitlines(keepends=True) if line.endswith(b"\n")]
    assert 20 <= len(first_ids) < len(ids), "the job was not killed midway"
    with open(out, "ab") as f:  # as if the kill had landed in the middle of a write
        f.write(b'{"id": "k9')

    # nap is not idempotent: the calls the kill caught running would be OutcomeUnknown (tests/cli/test_journal.py);
    # here every call is to run to its end, so they are run again by choice.
    resumed = subprocess.run(toolfork_cmd(*args, "--resume", "--rerun-unknown"), capture_output=True, text=True,
                             cwd=REPO, env=child_env(), timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    records = read_jsonl(out)
    got = [r["id"] for r in records]
    assert sorted(got) == ids  # each id exactly once
    assert got[:len(first_ids)] == first_ids
    new_part = got[len(first_ids):]
    assert new_part == [i for i in ids if i not in set(first_ids)]  # the new part follows input order
    assert all(r["status"] == "ok" and r["output"]["content"][0]["text"].endswith(r["id"]) for r in records)


MEMORY_DRIVER = textwrap.dedent("""
    import json, sys
    import psutil
    import toolfork.commands.run, toolfork.executor, toolfork.tools, tests.cli.cli_tools
    from toolfork import cli
    base = psutil.Process().memory_info().rss
    code = cli.main(["run", sys.argv[1], "-o", sys.argv[2], "--tools", "tests/cli/cli_tools.py:TOOLS",
                     "--workers", "2", "-q"])
    # VmHWM is this process's own peak RSS. ru_maxrss is not: Linux carries it over exec from the
    # process that started us (a pytest worker that just held a 100 MB result, say).
    peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"code": code, "growth": peak - base}))
""")


def test_memory_stays_bounded_for_a_long_input(tmp_path: Path) -> None:
    n, size = 20_000, 10_000  # 200 MB of output in all: holding the results would show at once
    calls = tmp_path / "c.jsonl"
    with open(calls, "w") as f:
        for i in range(n):
            f.write(f'{{"id": "m{i}", "name": "blob", "arguments": {{"size": {size}}}}}\n')
    out = tmp_path / "out.jsonl"
    result = subprocess.run([sys.executable, "-c", MEMORY_DRIVER, str(calls), str(out)], capture_output=True,
                            text=True, cwd=REPO, env=child_env(), timeout=110)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["code"] == 0
    assert report["growth"] < 100 * 2**20, f"peak RSS grew by {report['growth'] / 2**20:.0f} MB"
    with open(out, "rb") as f:
        count = sum(1 for _ in f)
    assert count == n
    assert out.stat().st_size > n * size


def test_ctrl_c_stops_cleanly_with_130_and_resume_finishes(tmp_path: Path) -> None:
    rows = [{"id": f"i{i:03d}", "name": "nap", "arguments": {"seconds": 0.03}} for i in range(60)]
    calls = write_jsonl(tmp_path / "c.jsonl", rows)
    out = tmp_path / "out.jsonl"
    args = ("run", str(calls), "-o", str(out), "--tools", TOOLS_SPEC, "--workers", "2", "--window", "4")
    proc = subprocess.Popen(toolfork_cmd(*args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO,
                            env=child_env())
    deadline = time.monotonic() + 30
    while (not out.exists() or out.read_bytes().count(b"\n") < 5) and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 130
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert "stopped after the running calls finished; rerun with --resume to continue" in err and "Traceback" not in err
    partial = read_jsonl(out)  # only whole lines: a warm stop wrote the record of every call it had taken
    assert 5 <= len(partial) < 60 and all(r["status"] == "ok" for r in partial)
    resumed = run_process(*args, "--resume")  # no OutcomeUnknown to re-run: nothing was cut short
    assert resumed.returncode == 0, resumed.stderr
    assert [r["id"] for r in read_jsonl(out)][len(partial):] == [r["id"] for r in rows][len(partial):]


def test_a_reader_that_goes_away_ends_the_job_quietly(tmp_path: Path) -> None:
    rows = [{"id": f"i{i}", "name": "echo", "arguments": {"text": "y" * 1000}} for i in range(3000)]
    calls = write_jsonl(tmp_path / "c.jsonl", rows)
    proc = subprocess.Popen(toolfork_cmd("run", str(calls), "--tools", TOOLS_SPEC, "--workers", "2", "-q"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=child_env())
    assert proc.stdout is not None and proc.stderr is not None
    assert json.loads(proc.stdout.readline())["id"] == "i0"
    proc.stdout.close()  # like `toolfork run ... | head -1`
    assert proc.wait(timeout=20) == 1
    assert "Traceback" not in proc.stderr.read().decode()


LEAN_DRIVER = textwrap.dedent("""
    import json, sys
    from toolfork import cli
    import toolfork.commands.worker
    code = cli.main(["run", sys.argv[1], "-o", sys.argv[2], "--tools", "tests/cli/cli_tools.py:TOOLS", "-q"])
    sdks = {"anthropic", "openai", "ray", "httpx", "boto3"}
    heavy = [m for m in sys.modules
             if m.split(".")[0] in sdks or m.startswith(("toolfork.agent", "toolfork.toolkits"))]
    print(json.dumps({"code": code, "heavy": sorted(heavy)}))
""")


def test_run_and_worker_do_not_import_the_agent_or_any_sdk(tmp_path: Path) -> None:
    calls = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "name": "echo", "arguments": {"text": "x"}}])
    result = subprocess.run([sys.executable, "-c", LEAN_DRIVER, str(calls), str(tmp_path / "o.jsonl")],
                            capture_output=True, text=True, cwd=REPO, env=child_env(), timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report == {"code": 0, "heavy": []}


@pytest.mark.parametrize("mode", ["fork", "sequential"])
@pytest.mark.parametrize("command", [["run", "-", "-o", "-"], ["worker"]])
def test_a_tool_printing_to_stdout_cannot_break_the_jsonl_stream(command: list[str], mode: str) -> None:
    proc = _popen(*command, "--tools", "tests/cli/cli_tools.py:chatty", "--mode", mode, "--workers", "2")
    try:
        for i in range(3):
            _send(proc, {"id": f"c{i}", "name": "chatty", "arguments": {"text": f"t{i}"}})
        results = [_readline(proc) for _ in range(3)]  # every stdout line parses as a record
        assert sorted(r["output"]["content"][0]["text"] for r in results) == ["t0", "t1", "t2"]
    finally:
        code, err = _finish(proc)
    assert code == 0
    assert "chatter from print()" in err and "chatter on fd 1" in err  # the chatter went to stderr
