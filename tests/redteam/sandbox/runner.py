"""Running a scenario module's attack as root (here) or as nobody (``setpriv``), in a fresh interpreter
either way: the harness of ``conftest.run_scenario``, for scenario modules other than ``scenarios``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.redteam.conftest import reported


def run(module: str, name: str, user: str, work: Path) -> dict[str, Any]:
    """What scenario ``name`` of ``module`` (``python -m module NAME WORKDIR``) reported, run as ``user``."""
    return reported(module, name, str(work), user=user, timeout=240)
