"""The zygote that starts the conformance clients (``tests/mcp/warm_python.py``): a script started through
its shim runs as ``python SCRIPT`` would (argv, environment, working directory, standard streams, exit
status, a process of its own); one that leaves a process behind fails; killing the shim kills the script."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.mcp.conftest import allow_new, children
from tests.mcp.warm_python import LEFT_BEHIND_STATUS, warm_starter
from tests.procs import all_gone

SCRIPT = '''
import json, os, sys, time
import email.mime.text  # imported by the zygote beforehand
print(json.dumps({"name": __name__, "argv": sys.argv, "cwd": os.getcwd(), "pid": os.getpid(),
                  "ppid": os.getppid(), "path0": sys.path[0], "env": os.environ.get("WARM_TEST"),
                  "stdin": sys.stdin.read()}))
print("to stderr", file=sys.stderr)
mode = sys.argv[1]
if mode == "orphan":
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
elif mode == "sleep":
    if os.fork() == 0:  # its own child too: the whole group goes
        time.sleep(60)
        os._exit(0)
    time.sleep(60)
elif mode == "raise":
    raise ValueError("from the script")
sys.exit(int(mode))
'''


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("warm") / "script.py"
    path.write_text(SCRIPT)
    return path


@pytest.fixture(scope="module")
def shim(script: Path) -> Iterator[list[str]]:
    before = children()
    with warm_starter([str(script)], grace_s=1.0) as command:
        allow_new(before)
        yield command


def run(shim: list[str], script: Path, mode: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*shim, str(script), mode], input="what the caller wrote", capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "WARM_TEST": mode}, timeout=60)


def test_the_script_runs_as_main_with_the_callers_argv_env_cwd_and_streams(
        shim: list[str], script: Path, tmp_path: Path) -> None:
    import json

    done = run(shim, script, "3", tmp_path)
    seen = json.loads(done.stdout)
    assert (done.returncode, done.stderr) == (3, "to stderr\n")
    assert seen["name"] == "__main__" and seen["argv"] == [str(script), "3"]
    assert (seen["cwd"], seen["path0"], seen["env"]) == (str(tmp_path), str(script.parent), "3")
    assert seen["stdin"] == "what the caller wrote"
    assert json.loads(run(shim, script, "0", tmp_path).stdout)["pid"] != seen["pid"]  # a new process each time


def test_an_uncaught_error_prints_its_traceback_and_exits_1(shim: list[str], script: Path, tmp_path: Path) -> None:
    done = run(shim, script, "raise", tmp_path)
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "ValueError: from the script" in done.stderr


def test_a_script_that_leaves_a_process_behind_fails(shim: list[str], script: Path, tmp_path: Path) -> None:
    done = run(shim, script, "orphan", tmp_path)
    assert done.returncode == LEFT_BEHIND_STATUS
    assert done.stderr.endswith(f"warm_python: {script} left processes behind 1 s after it exited; killed\n")


def test_killing_the_shim_kills_the_script_and_its_children(shim: list[str], script: Path, tmp_path: Path) -> None:
    import json

    proc = subprocess.Popen([*shim, str(script), "sleep"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    assert proc.stdout is not None
    pid = json.loads(proc.stdout.readline())["pid"]
    group = [p.pid for p in psutil.Process(pid).children()] + [pid]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    left = all_gone(group, 10)  # a process that ends between two looks is gone, not an error
    assert not left, f"still there: {left}"


def test_the_shim_imports_nothing_outside_the_standard_library() -> None:
    from tests.mcp import warm_python

    done = subprocess.run([sys.executable, "-S", "-c", f"import runpy; runpy.run_path({warm_python.__file__!r})"],
                          capture_output=True, text=True, timeout=60)
    assert "ModuleNotFoundError" not in done.stderr, done.stderr
