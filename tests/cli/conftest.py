"""Helpers for the CLI tests: input files, running ``toolfork`` in-process or as a real process."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS_SPEC = "tests/cli/cli_tools.py:TOOLS"
# ``stamp`` is not in TOOLS, whose size the start-up lines report: a test that needs it adds this spec.
STAMP_SPEC = "tests/cli/cli_tools.py:stamp"


def write_jsonl(path: Path, rows: Iterable[Any]) -> Path:
    """Rows that are str are written as they are (to make malformed lines), others as JSON."""
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def toolfork_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolfork.cli", *args]


def run_process(*args: str, stdin: str | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(toolfork_cmd(*args), input=stdin, capture_output=True, text=True, cwd=REPO,
                          timeout=timeout, env=child_env())


def run_on_a_terminal(*args: str, timeout: float = 60) -> tuple[int, str]:
    """Run ``toolfork`` with a pseudo-terminal as its stderr: (exit status, what the terminal got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(toolfork_cmd(*args), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=slave, cwd=REPO, env=child_env())
    os.close(slave)
    chunks: list[bytes] = []
    while True:  # drain as we go: a full pty buffer would block the child
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO once the child has closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=timeout), b"".join(chunks).decode()


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TOOLFORK_MODE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Specs such as ``tests/cli/cli_tools.py:TOOLS`` are relative to the cwd, as for a user."""
    monkeypatch.chdir(REPO)
