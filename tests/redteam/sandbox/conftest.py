"""The escape suite's harness: every scenario as root (here, in the test process) and as nobody (the
same scenario in a subprocess under ``setpriv``), each in a work directory both can write."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.redteam.conftest import reported, shared_dir

USERS = ["root", "nobody"]


def run_scenario(name: str, user: str, work: Path, module: str = "tests.redteam.sandbox.scenarios") -> dict[str, Any]:
    """What scenario ``name`` (of ``module``) reported, run as ``user``."""
    return reported(module, name, str(work), user=user)


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
