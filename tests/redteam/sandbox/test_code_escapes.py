"""The published escapes of smolagents' local Python executor, run as ordinary Python in a sandboxed
session (a tool ``exec_cell(code)`` that execs a cell against the session's namespace, nothing
restricted in Python), as root and as nobody. Each must be stopped by the sandbox itself: the test looks
at the effect in the host (a marker outside the workspace, a connection to a listener on 127.0.0.1, a
process alive after ``close()``, the host's secret seen), and at a file each cell wrote in its workspace
first, which proves the cell ran.

On the tree before sandboxed sessions, ``ex.session(..., limits=...)`` gave the factory a ``limits``
argument and no sandbox: every escape below reached the host (its marker written, the listener
connected, the secret read)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.redteam.conftest import shared_dir
from tests.redteam.sandbox.conftest import USERS, run_scenario
from tests.redteam.sandbox.session_attacks import ESCAPES

MODULE = "tests.redteam.sandbox.session_attacks"
# escape -> the file its cell writes in the workspace before it tries (the proof that it ran)
MARKED = {"getattr_to_posix": "ran_getattr", "subclasses_to_popen": "ran_popen", "ctypes_libc_system": "ran_ctypes",
          "os_system": "ran_os_system", "write_outside": "ran_write"}


@pytest.fixture(scope="module")
def seen() -> Iterator[Callable[[str], dict[str, Any]]]:
    """What the escape cells did as USER (run once per user for the module)."""
    done: dict[str, dict[str, Any]] = {}
    with shared_dir("toolfork-escapes-", "the code escapes") as base:
        def get(user: str) -> dict[str, Any]:
            if user not in done:
                work = base / user
                work.mkdir()
                work.chmod(0o777)
                done[user] = run_scenario("escapes", user, work, module=MODULE)
                assert done[user]["leftover_children"] == [], done[user]
            return done[user]

        yield get


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("escape", list(MARKED))
def test_the_escape_runs_but_changes_nothing_outside_the_workspace(escape: str, user: str, seen: Any) -> None:
    """CVE-2025-5120 (getattr to posix), CVE-2025-9959 (``__subclasses__`` to ``subprocess.Popen``),
    ctypes' ``CDLL(None).system``, ``os.system`` and a plain write: each ran (its file in the
    workspace is there) and its marker outside the workspace is not."""
    s = seen(user)
    assert MARKED[escape] in s["ran"], s["ran"]
    assert s[escape]["marker"] is False, f"{escape} wrote outside the workspace: {s[escape]}"


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_every_escape_cell_ran(user: str, seen: Any) -> None:
    """The control: each cell wrote its file in the workspace, so each escape really ran unrestricted."""
    assert seen(user)["ran"] == sorted(["ran_getattr", "ran_popen", "ran_ctypes", "ran_os_system", "ran_write",
                                        "ran_connect", "ran_daemons", "ran_env"])
    assert len(ESCAPES) == 8


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_a_listener_on_127_0_0_1_in_the_host_gets_no_connection(user: str, seen: Any) -> None:
    s = seen(user)
    assert s["connect_127"]["status"] == "error", s["connect_127"]
    assert s["accepted"] is False


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_daemons_a_cell_forks_do_not_outlive_close(user: str, seen: Any) -> None:
    """``Popen(..., start_new_session=True)`` and a double-forked ``setsid`` daemon: alive while the
    session is open, gone after ``close()``."""
    s = seen(user)
    assert s["daemons"]["status"] == "ok", s["daemons"]
    assert s["daemons_alive_open"] == [True, True]
    assert s["daemons_alive_after_close"] is False


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_the_hosts_environment_is_not_visible(user: str, seen: Any) -> None:
    """A secret put in the host's ``os.environ`` before the executor started: not in ``os.environ``,
    ``os.getenv``, libc's ``getenv`` or the process's ``/proc/self/environ``, which shows none of the
    variables the host was started with either (``PYTHONPATH``, set for the scenario's interpreter)."""
    s = seen(user)
    environ, getenv, libc, proc, names = s["host_environment"]["out"]
    assert environ is None and getenv is None and libc is None
    assert s["secret"] not in proc and "TOOLFORK_SESSION_SECRET" not in proc
    assert "PYTHONPATH" not in proc, "the host's start-up environment shows in /proc/self/environ"
    assert names == ["LANG", "PATH"]
