"""No process toolfork forks holds the host's own descriptors, and a tool that ransacks every descriptor
it holds cannot stall or corrupt the host: as root and as nobody.

The scenario (``host_fd_scenarios``) runs in a fresh interpreter started with no descriptor but the
standard three, so what a process below it holds is what toolfork gave it: the host's epoll and wake-up
pipes are nobody's but the host's; a worker holds its three channels, a session's process its four,
each close-on-exec, beside the standard streams and the user's own file; their stdin is the null
device, so the host's input stays the host's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.redteam.conftest import reported, shared_dir

INPUT = b'{"id": "1", "name": "echo", "arguments": {"text": "the host reads this"}}\n'


def scenario(user: str, work: Path | str) -> dict[str, Any]:
    return reported("tests.redteam.host_fd_scenarios", str(work), user=user, timeout=150, stdin=INPUT)


@pytest.fixture
def work() -> Iterator[Path]:
    with shared_dir("toolfork-hostfds-", "these attacks") as path:
        yield path


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_forked_processes_hold_their_own_channels_and_a_ransacking_tool_changes_nothing(user: str,
                                                                                        work: Path) -> None:
    seen = scenario(user, work)
    assert seen["seen"]["wrong"] == [], "\n".join(seen["seen"]["wrong"])
    assert len(seen["seen"]["own"]) == 4, seen["seen"]["own"]  # three workers (two pools) and a session
    assert [seen["ada"], seen["bob"]] == ["ada:1", "bob:1"]
    # Tools of both pools and of a session read, wrote into, and closed every descriptor they held while
    # the host ran futures, a batch and another session: each of those is its own, and later work goes on.
    assert seen["futures"] == [f"f{i}" for i in range(1, 21)]
    assert seen["batch"] == [f"r{i}" for i in range(10)]
    assert seen["cy"] == ["cy:1", "cy:2"]
    assert "ok" not in seen["hostile"], seen["hostile"]  # each broke only its own channels
    assert seen["after"] == ["a1", "b1"]
    assert seen["user_file_open"] is True
    assert seen["stdin"] == INPUT.decode(), "a tool read the host's stdin"
    assert seen["left"] == [], f"processes left behind: {seen['left']}"


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_an_asyncio_loops_epoll_and_self_pipe_are_in_no_forked_process(user: str, work: Path) -> None:
    """The Executor made inside a running loop: no process below holds the loop's epoll or self-pipe, and
    while a tool ransacks what it holds, every awaited call comes back, each its own."""
    seen = scenario(user, "--in-loop")
    assert seen["held"] == [], "\n".join(seen["held"])
    assert seen["awaited"] == [f"a{i}" for i in range(20)]
    assert seen["hostile"] != "ok"
    assert seen["left"] == [], f"processes left behind: {seen['left']}"
