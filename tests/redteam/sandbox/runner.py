"""Running a scenario module's attack as root (here) or as nobody (``setpriv``), in a fresh interpreter
either way: the harness of ``conftest.run_scenario``, for scenario modules other than ``scenarios``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.redteam.conftest import NOBODY, REPO, child_env


def run(module: str, name: str, user: str, work: Path) -> dict[str, Any]:
    """What scenario ``name`` of ``module`` (``python -m module NAME WORKDIR``) reported, run as ``user``."""
    become = [] if user == "root" else ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    done = subprocess.run([*become, sys.executable, "-m", module, name, str(work)], capture_output=True,
                          cwd=REPO, env=child_env(), timeout=240, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    return json.loads(done.stdout.decode().splitlines()[-1])  # type: ignore[no-any-return]
