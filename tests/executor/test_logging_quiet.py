"""A program that configures no logging gets nothing on stderr from toolfork (the library convention: a
``NullHandler`` on the ``toolfork`` logger), and one that does configure logging gets the same warning.

The warning path is real: a forked worker dies mid-call, which the pool logs at WARNING."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """
import logging, sys
from toolfork.executor import Executor, ToolCall
from tests.executor.tools_for_tests import exit_now
if sys.argv[1] == "configured":
    logging.basicConfig(level=logging.WARNING)
with Executor([exit_now], mode="fork", workers=1) as ex:
    [result] = ex.run([ToolCall("c1", "exit_now", {"code": 3})])
print(result.status)
"""


def _run(how: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROGRAM, how], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_program_that_configures_no_logging_gets_nothing_on_stderr() -> None:
    done = _run("quiet")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "crashed"
    assert done.stderr == ""


def test_a_program_that_configures_logging_gets_the_warning() -> None:
    done = _run("configured")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "crashed"
    assert "WARNING:toolfork.executor:worker" in done.stderr and "c1" in done.stderr
