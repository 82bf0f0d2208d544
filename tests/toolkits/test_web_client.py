"""The per-process pooled HTTP client (toolkits/_client.py): reused within a process, never across fork.

The fake servers speak HTTP/1.1 keep-alive and record each request's client (host, port), so "the
connection was reused" and "the child opened its own" are read off the server, not assumed.
"""

from __future__ import annotations

import os
from typing import Any

from tests.toolkits.fakeservers import FakeTavily, FakeZep, Reply
from tests.toolkits.helpers import FAST, call, in_forked_child
from toolfork.executor import Executor, ToolCall
from toolfork.toolkits import _client
from toolfork.toolkits._client import client_pid, close_clients, shared_client
from toolfork.toolkits.tavily import TavilyToolkit
from toolfork.toolkits.zep import ZepMemoryToolkit
from toolfork.tools import tool


@tool
def client_probe() -> dict[str, Any]:
    """Which pooled client this process uses, and which process built it."""
    client = shared_client()
    return {"id": id(client), "created_in": client_pid(client), "pid": os.getpid()}


def test_calls_in_one_process_reuse_one_connection():
    with FakeTavily() as server:
        first = TavilyToolkit(server.api_key, base_url=server.url, retry=FAST)
        second = TavilyToolkit(server.api_key, base_url=server.url, retry=FAST, timeout=5)
        for toolkit in (first, second, first):
            assert not call(toolkit, "tavily_search", query="keep alive").is_error
        peers = {r.peer for r in server.requests}
    assert len(server.requests) == 3
    assert len(peers) == 1, peers  # one TCP connection for three calls from two toolkit instances
    assert shared_client() is shared_client()
    assert client_pid(shared_client()) == os.getpid()


def test_a_client_made_before_fork_is_never_used_in_a_forked_child():
    with FakeTavily() as server:
        toolkit = TavilyToolkit(server.api_key, base_url=server.url, retry=FAST)
        assert not call(toolkit, "tavily_search", query="parent").is_error  # the parent's pool is warm
        parent = shared_client()
        parent_peer = server.last().peer

        def child() -> dict[str, Any]:
            out = call(toolkit, "tavily_search", query="child")
            client = shared_client()
            return {"ok": not out.is_error, "id": id(client), "created_in": client_pid(client), "pid": os.getpid()}

        seen = in_forked_child(child)
        child_peer = server.last().peer
        assert not call(toolkit, "tavily_search", query="parent again").is_error
        after_peer = server.last().peer
    assert seen["ok"]
    assert seen["created_in"] == seen["pid"] != os.getpid()
    assert seen["id"] != id(parent)  # the inherited object still exists in the child, so ids cannot collide
    assert child_peer != parent_peer  # the child opened its own connection
    assert after_peer == parent_peer  # and the parent's kept-alive connection survived the child
    assert shared_client() is parent


def test_workers_build_their_own_client_and_reuse_it():
    with FakeTavily() as server:
        # Options travel with the toolkit into the worker too.
        options = {"tavily_search": {"search_depth": "advanced", "include_domains": ["arxiv.org"]}}
        toolkit = TavilyToolkit(server.api_key, base_url=server.url, retry=FAST, options=options)
        assert not call(toolkit, "tavily_search", query="host").is_error  # a client exists before the fork
        host = client_probe.invoke({}).data
        host_peer = server.last().peer
        calls = [ToolCall(id="p1", name="client_probe", arguments={})]
        calls += [ToolCall(id=f"s{i}", name="tavily_search", arguments={"query": f"worker {i}"}) for i in range(3)]
        calls.append(ToolCall(id="p2", name="client_probe", arguments={}))
        with Executor([toolkit, client_probe], mode="fork", workers=1, timeout=30) as ex:
            results = ex.run(calls)
        worker_peers = {r.peer for r in server.requests[1:]}
        sent = [(r.json["search_depth"], r.json["include_domains"]) for r in server.requests]
    assert [r.status for r in results] == ["ok"] * 5, [r.error for r in results]
    assert sent == [("advanced", ["arxiv.org"])] * 4
    probes = [r.output.data for r in (results[0], results[4]) if r.output is not None]
    assert host["created_in"] == host["pid"] == os.getpid()
    for probe in probes:
        assert probe["pid"] != os.getpid()
        assert probe["created_in"] == probe["pid"]  # built in the worker, after the fork
        assert probe["id"] != host["id"]
    assert probes[0]["id"] == probes[1]["id"]  # one client for every call in the worker
    assert len(worker_peers) == 1 and host_peer not in worker_peers  # one kept-alive connection of its own


def test_pid_guard_and_close():
    first = shared_client()
    # A process forked without the at-fork hooks running: the recorded pid no longer matches.
    _client._owner_pid = -1
    rebuilt = shared_client()
    assert rebuilt is not first and client_pid(rebuilt) == os.getpid()
    assert not first.is_closed  # an inherited client is dropped, never closed
    close_clients()
    assert rebuilt.is_closed
    fresh = shared_client()
    assert fresh is not rebuilt and not fresh.is_closed
    first.close()  # the test made it an orphan; a real child would just exit with it


def test_a_dropped_keep_alive_connection_is_retried_only_when_safe():
    with FakeTavily() as server:
        toolkit = TavilyToolkit(server.api_key, base_url=server.url, retry=FAST)
        server.script(Reply(drop=True))
        out = call(toolkit, "tavily_search", query="retried")  # a search only reads: sent again
        assert not out.is_error, out.as_text()
        assert [r.json["query"] for r in server.requests] == ["retried", "retried"]
    with FakeZep() as server:
        toolkit = ZepMemoryToolkit("ana", server.api_key, base_url=server.url + "/api/v2", retry=FAST)
        assert not call(toolkit, "zep_add_memory", content="first").is_error  # creates the user
        server.script(Reply(drop=True))
        out = call(toolkit, "zep_add_memory", content="second")
        assert out.is_error
        assert "closed the connection without an answer" in out.as_text()
        assert "not retried" in out.as_text()
        assert [r.json["data"] for r in server.requests if r.path.endswith("/graph")] == ["first", "second"]


def test_each_toolkit_keeps_its_own_timeout_on_the_shared_client():
    with FakeTavily() as server:
        impatient = TavilyToolkit(server.api_key, base_url=server.url, retry=FAST, timeout=0.2)
        patient = TavilyToolkit(server.api_key, base_url=server.url, retry=FAST, timeout=10)
        body = {"query": "slow", "answer": None, "results": []}
        server.script(Reply(body=body, delay=0.6), Reply(body=body, delay=0.6))
        slow = call(impatient, "tavily_search", query="slow")
        assert slow.is_error and "did not answer within 0.2 s (read timeout)" in slow.as_text()
        assert not call(patient, "tavily_search", query="slow").is_error
        assert not call(impatient, "tavily_search", query="fast again").is_error  # the pool recovered
