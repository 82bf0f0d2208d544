"""No silent way around a sandbox through an adapter: a framework function that cannot be sent to a
worker is refused (never run in the host) when the Executor's limits sandbox its calls, and still runs
in the host, with a WARNING, when they do not; a sandboxed function's value and exception come back as
data, and one that returns an object whose unpickling would run code has that code never run."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from tests.planted import Planted
from toolfork import Limits
from toolfork.adapters._common import SandboxRefused
from toolfork.adapters.callables import SandboxedCallError, UnsendableResult
from toolfork.adapters.pydantic_ai import pooled_function
from toolfork.executor import Executor

OFFLINE = Limits(network=False)


def _unsendable(marker: Path) -> Any:
    numbers = (i for i in range(3))  # a closure over a generator: dill cannot send it

    def touch() -> str:
        marker.write_text(str(os.getpid() + next(numbers) * 0))
        return "ran"

    return touch


def test_an_unsendable_function_under_sandboxed_limits_is_refused_not_run_in_the_host(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    with Executor([], mode="fork", workers=1, limits=OFFLINE) as ex:
        stand_in = pooled_function(_unsendable(marker), False, ex)
        with pytest.raises(SandboxRefused, match=r"sandboxed.*never runs in the host"):
            stand_in()
    assert not marker.exists()


def test_an_unsendable_function_without_a_sandbox_runs_in_the_host_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    marker = tmp_path / "ran.txt"
    with Executor([], mode="fork", workers=1) as ex, caplog.at_level(logging.INFO, "toolfork.adapters"):
        assert pooled_function(_unsendable(marker), False, ex)() == "ran"
    assert marker.read_text() == str(os.getpid())
    assert [r.levelno for r in caplog.records if "runs in the host" in r.getMessage()] == [logging.WARNING]


def returns_planted(marker: str) -> Any:
    return Planted(marker)


def returns_data(n: int) -> Any:
    return {"n": n, "pid": os.getpid(), "raw": b"\x00"}


def raises(message: str) -> Any:
    raise KeyError(message)


def test_a_sandboxed_function_crosses_as_data(tmp_path: Path) -> None:
    marker = tmp_path / "planted.txt"
    with Executor([], mode="fork", workers=1, limits=OFFLINE) as ex:
        value = pooled_function(returns_data, False, ex)(3)
        with pytest.raises(UnsendableResult, match=r"Planted.*not data"):
            pooled_function(returns_planted, False, ex)(str(marker))
        with pytest.raises(SandboxedCallError, match="KeyError: 'boom'") as raised:
            pooled_function(raises, False, ex)("boom")
    assert value["n"] == 3 and value["raw"] == b"\x00" and value["pid"] != os.getpid()
    assert "in raises" in raised.value.traceback_text
    assert not marker.exists()


def test_a_langgraph_node_refuses_sandboxed_calls_instead_of_unpickling_them() -> None:
    pytest.importorskip("langgraph")
    from langchain_core.messages import HumanMessage

    from tests.adapters.fakes import langgraph_graph
    from tests.adapters.lc_tools import lc_where
    from toolfork.adapters.langgraph import ToolforkToolNode

    with ToolforkToolNode([lc_where], workers=1, limits=OFFLINE) as node:
        graph = langgraph_graph(node, [("lc_where", {"tag": "w"})])
        with pytest.raises(SandboxRefused, match=r"LangGraph node carries values.*pickled"):
            graph.invoke({"messages": [HumanMessage("go")]})


def test_the_relay_unpickles_nothing_from_a_connection_without_a_live_session(tmp_path: Path) -> None:
    import pickle
    import socket
    import struct

    from toolfork.adapters.relay import CallObjects

    marker = tmp_path / "planted.txt"
    session = CallObjects()
    ref = session.ref(object())  # the relay is listening, a session is known to it
    data = pickle.dumps(("0" * 32, Planted(str(marker))))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(ref.address)
        sock.sendall(struct.pack("<Q", len(data)) + data)
        sock.settimeout(10)
        try:
            while sock.recv(1 << 16):
                pass
        except OSError:
            pass
    assert not marker.exists(), "the host unpickled what an unknown connection sent"
