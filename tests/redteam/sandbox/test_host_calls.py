"""A sandboxed session's host tools, as root and as nobody: the session reaches a host file only through
the host tool it was opened with; a tool it was not opened with never runs, however it is asked for (the
API, a forged frame for the running call, one for a call to come). Before host tools there was no line
from a sandboxed session to the host at all; each forged frame here reaches the host's reader."""

from __future__ import annotations

from typing import Any

import pytest

from tests.redteam.conftest import shared_dir
from tests.redteam.sandbox.conftest import USERS, run_scenario

MODULE = "tests.redteam.sandbox.host_call_attacks"


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", USERS)
def test_a_sandboxed_session_reaches_the_host_only_through_its_host_tools(user: str) -> None:
    with shared_dir("toolfork-hostcalls-", "the host-call attacks") as work:
        work.chmod(0o777)
        s: dict[str, Any] = run_scenario("host_calls", user, work, module=MODULE)
    assert s["direct_read"]["status"] != "ok" or "the host's file" not in str(s["direct_read"]["data"]), s
    assert s["through_reach"] == {"status": "ok", "data": "the host's file", "error": None}, s
    assert "HostToolError" in s["ask_mark"]["data"] and "host_tools are: reach" in s["ask_mark"]["data"], s
    assert s["forged_now"]["status"] == "ok"  # the host refused it: the forger's own session pays, none other
    assert s["forged_later"]["status"] != "ok" or s["after_forged_now"]["status"] != "ok", s
    assert s["marks"] == [False, False, False], s  # mark never ran
