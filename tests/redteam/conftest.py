"""Helpers of the red-team tests: the real CLI in a subprocess, with the hostile tools."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "tests/redteam/hostile_tools.py:TOOLS"


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TOOLFORK_MODE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def toolfork(*args: str, stdin: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    """The real command, in a subprocess that is waited for (and killed by ``run`` on a timeout)."""
    return subprocess.run([sys.executable, "-m", "toolfork.cli", *args], input=stdin, capture_output=True,
                          cwd=REPO, timeout=timeout, env=child_env())


def records(data: bytes) -> list[dict[str, Any]]:
    """Output lines, decoded strictly as UTF-8 (what jq and node need) and parsed as JSON."""
    text = data.decode("utf-8", errors="strict")
    return [json.loads(line) for line in text.splitlines()]


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


NOBODY = 65534


def become(user: str) -> list[str]:
    """The command prefix that runs a program as ``user`` ("root": as we are, "nobody": through setpriv)."""
    return [] if user == "root" else ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def reported(module: str, *args: str, user: str = "root", timeout: float = 180,
             stdin: bytes | None = None) -> dict[str, Any]:
    """What ``python -m module ARGS`` printed as its last line (JSON), run as ``user`` in a fresh
    interpreter: the test process may hold at-fork hooks other tests left, which the sandbox refuses."""
    done = subprocess.run([*become(user), sys.executable, "-m", module, *args], input=stdin, capture_output=True,
                          cwd=REPO, env=child_env(), timeout=timeout, check=False)
    assert done.returncode == 0, (
        done.stderr.decode(errors="replace")[-3000:] + f"\n(nobody must be able to run {sys.executable}: where the "
        "interpreter lives under a home of mode 700, as pyenv's under /root, let others traverse it: chmod o+x)")
    return json.loads(done.stdout.decode().splitlines()[-1])  # type: ignore[no-any-return]


@contextlib.contextmanager
def shared_dir(prefix: str, suite: str) -> Iterator[Path]:
    """A directory root and nobody can both write (pytest's own are root's alone), removed after; a
    suite that attacks as both users fails, naming itself, where it cannot become nobody."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.fail(f"{suite} runs as root with setpriv (it attacks as root and as nobody)")
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
