"""The host takes back no more than it agreed to: what a sandboxed call hands over (its result, its
context, a progress value, a memory file) is rebuilt within the call's ceiling, never at the size the
call chose; past the ceiling the call fails ``ResultTooLarge``, the host keeps nothing of it, and the
next call runs. As root and as nobody; the host's peak resident set is measured in the host process
(``ru_maxrss``), with margins no load can break (memory is not time).

On the tree before the ceiling these calls came back ``ok`` and the host grew by 850 MB (shared
references) and 4 GB (the stretched memory file, mapped at its ``st_size`` with ``MAP_POPULATE``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.redteam.sandbox.conftest import USERS
from tests.redteam.sandbox.runner import run

users = pytest.mark.parametrize("user", USERS)
SANE_MB = 400  # the default ceiling is 256 MB (counted as copies: the host holds about half of it)


def attack(name: str, user: str, work: Path) -> dict[str, Any]:
    return run("tests.redteam.sandbox.takeback", name, user, work)


def too_large(ev: dict[str, Any], ceiling_mb: int) -> None:
    assert ev["status"] == "error" and ev["error_type"] == "ResultTooLarge", ev
    assert f"over the ceiling of {ceiling_mb} MB" in ev["error"] and "max_result_mb" in ev["error"], ev
    assert ev["after"] == "ok", ev  # the executor goes on


@users
@pytest.mark.parametrize("where", ["result", "context", "progress"])
def test_shared_references_are_rebuilt_within_the_ceiling(where: str, user: str, work: Path) -> None:
    ev = attack(f"shared_{where}", user, work)
    too_large(ev, 256)
    assert ev["host_grew_mb"] < SANE_MB, ev
    assert ev["context_keys"] == [], ev  # nothing of the call stays in the host's context


@users
def test_a_tools_own_ceiling_is_its_bound(user: str, work: Path) -> None:
    ev = attack("shared_result_own_ceiling", user, work)
    too_large(ev, 16)
    assert ev["host_grew_mb"] < 100, ev


@users
def test_a_memory_file_stretched_to_2_gib_is_read_at_its_declared_length(user: str, work: Path) -> None:
    ev = attack("stretched_memory_file", user, work)
    assert ev["status"] == "ok" and ev["text_len"] == 300_000, ev
    assert ev["host_grew_mb"] < SANE_MB, ev


@users
def test_a_frame_declared_at_2_gib_is_refused_before_it_is_mapped(user: str, work: Path) -> None:
    ev = attack("declared_huge_frame", user, work)
    assert ev["status"] == "error" and ev["after"] == "ok", ev
    assert ev["host_grew_mb"] < SANE_MB, ev
