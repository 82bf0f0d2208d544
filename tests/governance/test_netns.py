"""No network: a forked child in its own network namespace cannot reach a server on 127.0.0.1 that
its parent (and an unrestricted sibling) reaches."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from toolfork.governance import NetworkIsolationError, enter_no_network, netns

from .forked import become_nobody, in_child


@pytest.fixture
def server() -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def _connect(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            return "connected"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


def test_a_child_without_network_cannot_reach_127_0_0_1_that_the_parent_reaches(server: int) -> None:
    assert _connect(server) == "connected"
    assert in_child(lambda: _connect(server)).value == "connected"  # an unrestricted sibling

    def body() -> str:
        enter_no_network()
        return _connect(server)

    out = in_child(body)
    assert out.raised is None, out.raised
    assert out.value.startswith("OSError") and "unreachable" in out.value, out.value
    assert _connect(server) == "connected"  # the parent keeps its network


def test_an_unprivileged_worker_gets_a_user_namespace_with_it(server: int) -> None:
    def body() -> tuple[str, int]:
        become_nobody()
        enter_no_network()
        import os
        return _connect(server), os.getuid()

    out = in_child(body)
    assert out.raised is None, out.raised
    reached, uid = out.value
    assert "unreachable" in reached and uid == 65534  # files keep their owner: uid mapped onto itself


def test_a_process_running_threads_is_refused_naming_why() -> None:
    def body() -> None:
        stop = threading.Event()
        t = threading.Thread(target=stop.wait)
        t.start()
        try:
            enter_no_network()
        finally:
            stop.set()
            t.join()

    out = in_child(body)
    assert out.raised is not None and out.raised.startswith("NetworkIsolationError")
    assert "2 threads" in out.raised


def test_probe_says_it_can_be_enforced_here() -> None:
    verdict = netns.probe()
    assert verdict.ok, verdict.reason
    assert issubclass(NetworkIsolationError, OSError)
