"""TavilyToolkit against a local server speaking Tavily's wire format."""

from __future__ import annotations

import pytest

from tests.toolkits.fakeservers import FakeTavily
from tests.toolkits.helpers import FAST, call
from toolfork.toolkits.tavily import TavilyToolkit
from toolfork.tools import ToolInputError


@pytest.fixture
def server():
    with FakeTavily() as s:
        yield s


@pytest.fixture
def toolkit(server):
    return TavilyToolkit(server.api_key, base_url=server.url, retry=FAST)


def test_definitions_and_guidelines():
    tk = TavilyToolkit()  # no key needed to build and list the tools
    tools = {t.name: t for t in tk.tools()}
    assert list(tools) == ["tavily_search", "tavily_extract", "tavily_crawl"]
    search = tools["tavily_search"].to_json_schema()
    assert search["required"] == ["query"]
    assert search["properties"]["topic"]["enum"] == ["general", "news", "finance"]
    assert (
        search["properties"]["max_results"]["minimum"],
        search["properties"]["max_results"]["maximum"],
    ) == (1, 20)
    assert tools["tavily_extract"].to_json_schema()["properties"]["urls"]["maxItems"] == 20
    assert all(t.description for t in tools.values())
    text = tk.guidelines() or ""
    assert "tavily_search" in text and "tavily_extract" in text
    assert [t.name for t in TavilyToolkit().only(["tavily_search"]).tools()] == ["tavily_search"]
    assert [t.name for t in TavilyToolkit().exclude(["tavily_crawl"]).tools()] == [
        "tavily_search",
        "tavily_extract",
    ]


def test_search_sends_the_documented_request_and_maps_results(server, toolkit):
    out = call(toolkit, "tavily_search", query="python 3.13 release", topic="news", time_range="week", max_results=3)
    assert not out.is_error, out.as_text()
    req = server.last()
    assert (req.method, req.path) == ("POST", "/search")
    assert req.headers["authorization"] == f"Bearer {server.api_key}"
    assert req.headers["content-type"] == "application/json"
    assert req.json == {
        "query": "python 3.13 release",
        "topic": "news",
        "max_results": 3,
        "search_depth": "basic",
        "include_answer": True,
        "time_range": "week",
    }
    assert out.data["answer"] == "A short answer about python 3.13 release."
    assert [r["url"] for r in out.data["results"]] == [
        "https://example.com/python-3-13-release/1",
        "https://example.com/python-3-13-release/2",
        "https://example.com/python-3-13-release/3",
    ]
    assert set(out.data["results"][0]) == {"title", "url", "content", "score"}
    assert "python 3.13 release explained" in out.as_text()


def test_search_defaults_leave_out_time_range(server, toolkit):
    assert not call(toolkit, "tavily_search", query="weather").is_error
    assert "time_range" not in server.last().json
    assert server.last().json["max_results"] == 5


def test_search_bad_input_never_reaches_the_server(server, toolkit):
    out = call(toolkit, "tavily_search", query="   ")
    assert out.is_error and "query must not be empty" in out.as_text()
    with pytest.raises(ToolInputError, match="max_results"):
        call(toolkit, "tavily_search", query="x", max_results=50)
    with pytest.raises(ToolInputError, match="topic"):
        call(toolkit, "tavily_search", query="x", topic="sports")
    assert server.requests == []


def test_extract_returns_pages_and_failures(server, toolkit):
    server.pages["https://docs.example.com/a"] = "# A\n\nAlpha text."
    out = call(toolkit, "tavily_extract", urls=["https://docs.example.com/a", "https://down.invalid/b"])
    assert not out.is_error, out.as_text()
    assert server.last().path == "/extract"
    assert server.last().json == {
        "urls": ["https://docs.example.com/a", "https://down.invalid/b"],
        "extract_depth": "basic",
    }
    assert out.data["results"] == [{"url": "https://docs.example.com/a", "content": "# A\n\nAlpha text."}]
    assert out.data["failed"] == [{"url": "https://down.invalid/b", "error": "Failed to fetch the URL."}]


def test_extract_with_every_url_failing_is_an_error(toolkit):
    out = call(toolkit, "tavily_extract", urls=["https://a.invalid/", "https://b.invalid/"])
    assert out.is_error
    assert "could not extract any of the URLs" in out.as_text()
    assert "https://a.invalid/: Failed to fetch the URL." in out.as_text()


def test_extract_validates_urls(server, toolkit):
    out = call(toolkit, "tavily_extract", urls=["https://ok.example.com", "not a url", "ftp://x.org/f"])
    assert out.is_error
    assert "'not a url'" in out.as_text() and "'ftp://x.org/f'" in out.as_text()
    with pytest.raises(ToolInputError, match="urls"):
        call(toolkit, "tavily_extract", urls=[])
    assert server.requests == []


def test_long_pages_are_clipped(server):
    server.pages["https://big.example.com/"] = "x" * 5000
    tk = TavilyToolkit(server.api_key, base_url=server.url, retry=FAST, max_page_chars=100)
    out = call(tk, "tavily_extract", urls=["https://big.example.com/"])
    content = out.data["results"][0]["content"]
    assert content.startswith("x" * 100) and content.endswith("[... truncated 4900 characters]")


def test_crawl(server, toolkit):
    out = call(
        toolkit,
        "tavily_crawl",
        url="https://docs.example.com",
        instructions="API reference pages",
        max_depth=2,
        limit=4,
    )
    assert not out.is_error, out.as_text()
    assert server.last().path == "/crawl"
    assert server.last().json == {
        "url": "https://docs.example.com",
        "max_depth": 2,
        "limit": 4,
        "instructions": "API reference pages",
    }
    assert out.data["base_url"] == "https://docs.example.com"
    assert [p["url"] for p in out.data["pages"]] == [
        "https://docs.example.com",
        "https://docs.example.com/page-1-1",
        "https://docs.example.com/page-1-2",
        "https://docs.example.com/page-1-3",
    ]
    assert "The text of https://docs.example.com/page-1-2." in out.data["pages"][2]["content"]


def test_crawl_validates_input(server, toolkit):
    out = call(toolkit, "tavily_crawl", url="docs.example.com")
    assert out.is_error and "absolute http(s) URL" in out.as_text()
    with pytest.raises(ToolInputError, match="max_depth"):
        call(toolkit, "tavily_crawl", url="https://docs.example.com", max_depth=9)
    assert server.requests == []


def test_server_side_validation_error_is_reported(server, toolkit):
    # A field the fake (like Tavily) refuses: the server's own words reach the model.
    from tests.toolkits.fakeservers import Reply

    server.script(Reply(400, {"detail": {"error": "Invalid country for topic news."}}))
    out = call(toolkit, "tavily_search", query="x")
    assert out.is_error
    assert out.as_text() == "Tavily rejected the request (HTTP 400: Invalid country for topic news.)."


def test_no_key_is_an_error_output_naming_the_variable(server, monkeypatch):
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    tk = TavilyToolkit(base_url=server.url)
    for name, args in [
        ("tavily_search", {"query": "x"}),
        ("tavily_extract", {"urls": ["https://example.com"]}),
        ("tavily_crawl", {"url": "https://example.com"}),
    ]:
        out = call(tk, name, **args)
        assert out.is_error
        assert "TAVILY_API_KEY" in out.as_text()
    assert server.requests == []
    monkeypatch.setenv("TAVILY_API_KEY", server.api_key)
    assert not call(tk, "tavily_search", query="x").is_error
