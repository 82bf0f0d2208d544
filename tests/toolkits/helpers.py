"""Call helpers shared by the toolkit tests: one place says what "this call succeeded / failed" means."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from toolfork.toolkits.http import RetryPolicy
from toolfork.tools import Tool, Toolkit, ToolOutput

# Retries without the real backoff: the fake web services answer at once.
FAST = RetryPolicy(retries=2, backoff=0.001)


def call(toolkit: Toolkit, name: str, **args: Any) -> ToolOutput:
    """One call of a toolkit's tool, whatever its outcome."""
    return {t.name: t for t in toolkit.tools()}[name].invoke(args)


def params(**values: Any) -> list[dict[str, Any]]:
    """Named parameters in the SQL tools' wire form."""
    return [{"name": k, "value": v} for k, v in values.items()]


def ok(tools: dict[str, Tool], name: str, **args: Any) -> ToolOutput:
    out = tools[name].invoke(args)
    assert not out.is_error, out.as_text()
    return out


def err(tools: dict[str, Tool], name: str, **args: Any) -> str:
    out = tools[name].invoke(args)
    assert out.is_error, f"expected an error, got: {out.as_text()[:500]}"
    return out.as_text()


def in_forked_child(body: Callable[[], Any]) -> Any:
    """Run body in a forked child and return what it returned (JSON round-tripped).

    Toolkits must survive being forked into a worker, so the tests exercise them in a real child; the
    child exits with os._exit so it never runs the parent's pytest teardown.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            os.close(read_end)
            os.write(write_end, json.dumps(body()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        payload = handle.read()
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    return json.loads(payload)


def assert_workers_open_their_own_connections(
    kit: Toolkit, tools: dict[str, Tool], dialect: str, id_query: str
) -> None:
    """Run an SQL toolkit in the forking executor: each worker opens its own server connection.

    The fixture database holds three books; the write deletes the one with id 3. id_query selects the
    server's id for the current connection (backend pid, CONNECTION_ID()).
    """
    from toolfork.executor import Executor, ToolCall

    query = {"query": id_query}
    parent_connection = tools[f"{dialect}_select"].invoke(query).data["rows"][0][0]
    with Executor([kit], mode="fork", workers=2, timeout=60) as executor:
        calls = [ToolCall(id=f"c{i}", name=f"{dialect}_select", arguments=query) for i in range(6)]
        calls.append(ToolCall(id="w", name=f"{dialect}_write", arguments={"query": "DELETE FROM books WHERE id = 3"}))
        results = executor.run(calls)
    assert [r.status for r in results] == ["ok"] * 7, [r.error for r in results]
    worker_connections = {r.output.data["rows"][0][0] for r in results[:6] if r.output is not None}
    assert parent_connection not in worker_connections and 1 <= len(worker_connections) <= 2
    assert results[6].output is not None and results[6].output.data["rows_affected"] == 1
    assert tools[f"{dialect}_select"].invoke(query).data["rows"][0][0] == parent_connection
    assert ok(tools, f"{dialect}_select", query="SELECT count(*) FROM books").data["rows"] == [[2]]


def in_bounded_child(body: Callable[[], Any], headroom_mb: int = 1500) -> tuple[Any, float]:
    """Run body in a forked child whose address space may grow by at most ``headroom_mb`` (so a
    regression fails with MemoryError instead of taking the machine's memory); return what body
    returned and how many MB the child's peak RSS grew while it ran."""
    import resource

    def child() -> Any:
        with open("/proc/self/statm") as handle:
            size_mb = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE") / 2**20
        limit = int((size_mb + headroom_mb) * 2**20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        value = body()
        return [value, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024]

    value, grown = in_forked_child(child)
    return value, float(grown)
