"""Fault behaviour every web toolkit shares, run against each service's local fake.

Each case drives one real tool end to end (tool -> toolkit -> shared HTTP client -> local server):
rate limiting then success, persistent 5xx, a refused key, a server slower than the timeout,
malformed or unexpected JSON, a missing key, and the key never appearing in an output or a log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.toolkits.fakeservers import FakeJinaSearch, FakeServer, FakeSupadata, FakeTavily, FakeZep, Reply
from tests.toolkits.helpers import FAST
from toolfork.toolkits.jina import JinaToolkit
from toolfork.toolkits.supadata import SupadataYouTubeToolkit
from toolfork.toolkits.tavily import TavilyToolkit
from toolfork.toolkits.zep import ZepMemoryToolkit
from toolfork.tools import Toolkit, ToolOutput


@dataclass
class Case:
    service: str
    fake: Callable[[], FakeServer]
    build: Callable[..., Toolkit]  # (server, api_key, **http settings) -> toolkit
    tool: str
    args: dict[str, Any]
    env_var: str

    def __str__(self) -> str:
        return self.tool


def _zep_fake() -> FakeZep:
    fake = FakeZep()
    fake.users["u1"] = {"user_id": "u1", "uuid": "uuid-u1"}
    return fake


CASES = [
    Case(
        "Tavily",
        FakeTavily,
        lambda s, key, **kw: TavilyToolkit(key, base_url=s.url, **kw),
        "tavily_search",
        {"query": "hello"},
        "TAVILY_API_KEY",
    ),
    Case(
        "Jina search",
        FakeJinaSearch,
        lambda s, key, **kw: JinaToolkit(key, search_url=s.url, reader_url=s.url, **kw),
        "jina_search",
        {"query": "hello"},
        "JINA_API_KEY",
    ),
    Case(
        "Supadata",
        FakeSupadata,
        lambda s, key, **kw: SupadataYouTubeToolkit(key, base_url=s.url + "/v1", **kw),
        "youtube_video_metadata",
        {"video": FakeSupadata.VIDEO_ID},
        "SUPADATA_API_KEY",
    ),
    Case(
        "Zep",
        _zep_fake,
        lambda s, key, **kw: ZepMemoryToolkit("u1", key, base_url=s.url + "/api/v2", **kw),
        "zep_search_memory",
        {"query": "hello"},
        "ZEP_API_KEY",
    ),
]


@pytest.fixture(params=CASES, ids=str)
def case(request):
    return request.param


@pytest.fixture
def server(case):
    with case.fake() as s:
        yield s


def run(case: Case, server: FakeServer, key: str | None = None, **settings: Any) -> ToolOutput:
    settings.setdefault("retry", FAST)
    toolkit = case.build(server, server.api_key if key is None else key, **settings)
    tools = {t.name: t for t in toolkit.tools()}
    return tools[case.tool].invoke(case.args)


def test_happy_path(case, server):
    out = run(case, server)
    assert not out.is_error, out.as_text()
    assert len(server.requests) == 1


def test_429_then_200_is_retried(case, server):
    server.script(Reply(429, {"message": "Too many requests"}, headers={"Retry-After": "0"}))
    out = run(case, server)
    assert not out.is_error, out.as_text()
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body  # the same request, sent again


def test_500_three_times_is_an_error_output(case, server):
    server.script(*[Reply(500, {"message": "internal failure"})] * 3)
    out = run(case, server)
    assert out.is_error
    assert out.as_text() == (
        f"{case.service} server error (HTTP 500: internal failure) after 3 attempt(s). Try again later."
    )
    assert len(server.requests) == 3


def test_refused_key(case, server):
    wrong = "wrong-key-ABCDEFGHIJKLMNOP"
    out = run(case, server, key=wrong)
    assert out.is_error
    text = out.as_text()
    assert text.startswith(f"{case.service} refused the API key (HTTP 401")
    assert case.env_var in text
    assert wrong not in text
    assert len(server.requests) == 1  # a refused key is not retried


def test_timeout(case, server):
    server.script(Reply(200, {}, delay=30))
    out = run(case, server, timeout=0.25)
    assert out.is_error
    assert out.as_text().startswith(f"{case.service} did not answer within 0.25 s (read timeout)")


def test_malformed_json(case, server):
    server.script(Reply(200, b"<html><body>Gateway hiccup</body></html", content_type="text/html"))
    out = run(case, server)
    assert out.is_error
    assert out.as_text().startswith(f"{case.service} returned a response that is not valid JSON (HTTP 200, text/html)")


def test_json_of_the_wrong_shape(case, server):
    server.script(Reply(200, ["not", "an", "object"]))
    out = run(case, server)
    assert out.is_error
    assert case.service.split()[0] in out.as_text()


def test_missing_key_is_reported_by_the_call_not_the_constructor(case, server, monkeypatch):
    monkeypatch.delenv(case.env_var, raising=False)
    toolkit = case.build(server, None)  # constructing and listing work without a key
    assert [t.name for t in toolkit.tools()]
    out = {t.name: t for t in toolkit.tools()}[case.tool].invoke(case.args)
    assert out.is_error
    assert f"set the {case.env_var} environment variable" in out.as_text()
    assert server.requests == []


def test_key_never_reaches_an_output_or_a_log(case, server, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    key = server.api_key
    monkeypatch.setenv(case.env_var, key)  # from the environment this time
    outputs = []
    server.script(Reply(503, {"message": f"overloaded for key {key}"}, headers={"Retry-After": "0"}))
    outputs.append(run(case, server, key=""))  # retried, then fine
    server.script(*[Reply(500, {"message": f"boom {key}"})] * 3)
    outputs.append(run(case, server, key=""))
    server.script(Reply(401, {"message": f"key {key} revoked"}))
    outputs.append(run(case, server, key=""))
    server.script(Reply(200, f"not json {key}".encode(), content_type="text/plain"))
    outputs.append(run(case, server, key=""))
    assert [o.is_error for o in outputs] == [False, True, True, True]
    assert any(
        r.headers.get("authorization", "").endswith(key) or r.headers.get("x-api-key") == key for r in server.requests
    ), "the key was sent to the server"
    for out in outputs:
        assert key not in repr(out.to_dict())
    assert caplog.records
    for record in caplog.records:
        assert key not in record.getMessage()
        assert key not in repr(record.args)
