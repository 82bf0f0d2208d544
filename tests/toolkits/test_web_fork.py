"""The web toolkits inside the real fork-pool executor: what users actually run.

Tools close over their toolkit's settings and each worker builds its own pooled HTTP client after
the fork (test_web_client.py), so they must work in forked workers, in parallel, with errors coming
back as outputs rather than crashes.
"""

from __future__ import annotations

from tests.toolkits.fakeservers import FakeTavily, FakeZep, Reply
from tests.toolkits.helpers import FAST
from toolfork.executor import Executor, ToolCall
from toolfork.toolkits.tavily import TavilyToolkit
from toolfork.toolkits.zep import ZepMemoryToolkit


def test_parallel_searches_in_forked_workers():
    with FakeTavily() as server:
        toolkit = TavilyToolkit(server.api_key, base_url=server.url, retry=FAST)
        server.script(Reply(429, {"detail": {"error": "slow down"}}, headers={"Retry-After": "0"}))
        calls = [ToolCall(id=f"c{i}", name="tavily_search", arguments={"query": f"topic {i}"}) for i in range(4)]
        calls.append(ToolCall(id="bad", name="tavily_crawl", arguments={"url": "not-a-url"}))
        with Executor([toolkit], mode="fork", workers=2, timeout=30) as ex:
            assert ex.mode == "fork"
            results = ex.run(calls)
    assert [r.call_id for r in results] == [c.id for c in calls]
    for i, result in enumerate(results[:4]):
        assert result.status == "ok", result.error
        assert result.output is not None and not result.output.is_error
        assert result.output.data["results"][0]["title"] == f"Result 1 about topic {i}"
    bad = results[4].output
    assert bad is not None and bad.is_error and "absolute http(s) URL" in bad.as_text()
    assert len(server.requests) == 5  # four searches, one of them retried once after the 429


def test_parallel_memory_writes_create_the_user_once():
    with FakeZep() as server:
        toolkit = ZepMemoryToolkit("new-user", server.api_key, base_url=server.url + "/api/v2", retry=FAST)
        calls = [
            ToolCall(id=f"m{i}", name="zep_add_memory", arguments={"content": f"fact number {i}"}) for i in range(6)
        ]
        with Executor([toolkit], mode="fork", workers=3, timeout=30) as ex:
            results = ex.run(calls)
    for result in results:
        assert result.status == "ok", result.error
        assert result.output is not None and not result.output.is_error, result.output.as_text()
    assert list(server.users) == ["new-user"]
    assert sorted(e["content"] for e in server.episodes["new-user"]) == [f"fact number {i}" for i in range(6)]
