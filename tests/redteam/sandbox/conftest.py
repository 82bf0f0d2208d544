"""The escape suite's harness: every scenario as root (here, in the test process) and as nobody (the
same scenario in a subprocess under ``setpriv``), each in a work directory both can write."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.redteam.conftest import REPO, become, child_env, shared_dir

USERS = ["root", "nobody"]


def run_scenario(name: str, user: str, work: Path, module: str = "tests.redteam.sandbox.scenarios") -> dict[str, Any]:
    """What scenario ``name`` (of ``module``) reported, run as ``user``."""
    # Each attack runs in a fresh interpreter, as root or as nobody: the test process may hold at-fork
    # hooks other tests left (a library's thread restarted in every fork), which the sandbox refuses.
    done = subprocess.run([*become(user), sys.executable, "-m", module, name, str(work)],
                          capture_output=True, cwd=REPO, env=child_env(), timeout=180, check=False)
    assert done.returncode == 0, (
        done.stderr.decode(errors="replace")[-3000:] + f"\n(nobody must be able to run {sys.executable}: where the "
        "interpreter lives under a home of mode 700, as pyenv's under /root, let others traverse it: chmod o+x)")
    return json.loads(done.stdout.decode().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture
def work() -> Iterator[Path]:
    """A directory root and nobody can both write (pytest's own are root's alone)."""
    with shared_dir("toolfork-escape-", "the escape suite") as path:
        yield path


@pytest.fixture
def attack(work: Path) -> Callable[[str, str], dict[str, Any]]:
    def run(name: str, user: str) -> dict[str, Any]:
        return run_scenario(name, user, work)

    return run
