"""Helpers of the red-team tests: the real CLI in a subprocess, with the hostile tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
