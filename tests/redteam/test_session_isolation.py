"""A session holds only its own channels, and programs its tools start hold none: as root and as nobody.

Each attack runs in a fresh interpreter (``session_scenarios``), started with no descriptor but the
standard three, so what a tool finds in its process is what toolfork gave it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.redteam.conftest import reported, shared_dir


def attack(name: str, user: str, work: Path) -> dict[str, Any]:
    return reported("tests.redteam.session_scenarios", name, str(work), user=user, timeout=150)


@pytest.fixture
def work() -> Iterator[Path]:
    with shared_dir("toolfork-session-", "these attacks") as path:
        yield path


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_later_session_cannot_reach_an_earlier_ones_channels(user: str, work: Path) -> None:
    """Session B's tool writes well-formed result frames and junk into every descriptor it has and reads
    from them: it holds none of A's pipes or sockets, and A's next calls are A's own."""
    seen = attack("siblings", user, work)
    assert seen["first"] == "ada:1"
    assert seen["shared"] == [], f"session B holds session A's channels: {seen['shared']}"
    assert seen["after"] == ["ada:2", "ada:3", "ada:4"], seen


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_program_a_session_tool_left_behind_holds_no_channel(user: str, work: Path) -> None:
    """``sleep 60 &`` from a session's tool, then the template dies: the session's next call ends with a
    status naming what happened instead of waiting for the sleep, and later sessions open."""
    seen = attack("orphan", user, work)
    assert seen["next"] != "hung", seen
    assert seen["next"].startswith("crashed:") and "supervisor" in seen["next"], seen
    assert seen["later"] == "ok:bob:1", seen
