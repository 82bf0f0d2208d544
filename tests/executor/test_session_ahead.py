"""``Executor.session_ahead``: a session opened before anyone asks for it is handed, whole, to the next
``session`` whose arguments are all equal, and to no other; it is not counted against ``max_sessions``,
and one let go unused is said (``on_discard``, once). Judged by the factory's own log: it runs once per
session, ahead or at the open."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.executor import session_tools as S
from tests.executor.session_tools import dep, spoil, values
from toolfork.executor import Executor, ToolCall
from toolfork.executor.sessions.session import TooManySessions


def _runs(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def _until_runs(log: Path, n: int) -> None:
    end = time.monotonic() + 20
    while len(_runs(log)) < n and time.monotonic() < end:
        time.sleep(0.01)
    assert len(_runs(log)) == n, _runs(log)


def test_a_session_opened_ahead_is_handed_to_an_equal_open_and_to_no_other(
        make_executor: Callable[..., Executor], tmp_path: Path) -> None:
    log = tmp_path / "factory.log"
    discarded: list[str] = []
    ex = make_executor(S.SESSION_TOOLS, mode="fork", workers=1)
    assert ex.session_ahead(S.logged_factory, "ada", str(log), checkpoint=True,
                            on_discard=lambda: discarded.append("ada")) is True
    _until_runs(log, 1)  # its factory ran before any open
    with ex.session(S.logged_factory, "ada", str(log), checkpoint=True) as s:
        assert _runs(log) == ["ada"]  # handed over: its factory did not run again
        assert values(s.run([dep(1, 5)])) == [5]
        assert s.run([spoil("exit")])[0].status == "crashed"  # its checkpoint takes over, as at any open
        assert values(s.run([dep(2, 1)])) == [6] and s.restores == 1
    assert ex.session_ahead(S.logged_factory, "bob", str(log), checkpoint=True,
                            on_discard=lambda: discarded.append("bob")) is True
    _until_runs(log, 2)
    for owner, checkpoint in (("carol", True), ("bob", False)):  # another argument; another checkpoint
        with ex.session(S.logged_factory, owner, str(log), checkpoint=checkpoint) as s:
            assert s.run([ToolCall("t", "tagged", {})])[0].output.as_text() == f"{owner}:-"
    assert _runs(log) == ["ada", "bob", "carol", "bob"]  # each of those two ran its own factory at its open
    assert discarded == []
    ex.close()  # bob's, opened ahead and never taken, is let go now: said once
    assert discarded == ["bob"]


def test_a_session_opened_ahead_is_not_counted_against_max_sessions(
        make_executor: Callable[..., Executor], tmp_path: Path) -> None:
    log = tmp_path / "factory.log"
    discarded: list[str] = []
    ex = make_executor(S.SESSION_TOOLS, mode="fork", workers=1, max_sessions=1)
    assert ex.session_ahead(S.logged_factory, "ada", str(log), on_discard=lambda: discarded.append("ada"))
    _until_runs(log, 1)
    with ex.session(S.logged_factory, "ada", str(log)):
        ex.session_ahead(S.logged_factory, "bob", str(log), on_discard=lambda: discarded.append("bob"))
        _until_runs(log, 2)
        with pytest.raises(TooManySessions, match="max_sessions"):  # the bound counts sessions handed out
            ex.session(S.logged_factory, "bob", str(log))
    with ex.session(S.logged_factory, "bob", str(log)) as s:  # one closed: bob's is handed over now
        assert s.run([ToolCall("t", "tagged", {})])[0].output.as_text() == "bob:-"
    assert _runs(log) == ["ada", "bob"] and discarded == []


def test_a_backend_that_opens_nothing_ahead_says_so(tmp_path: Path) -> None:
    discarded: list[int] = []
    with Executor(S.SESSION_TOOLS, mode="sequential") as ex:
        kept = ex.session_ahead(S.logged_factory, "ada", str(tmp_path / "log"), on_discard=lambda: discarded.append(1))
        assert kept is False
    assert discarded == [] and not (tmp_path / "log").exists()
