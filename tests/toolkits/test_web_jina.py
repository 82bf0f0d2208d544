"""JinaToolkit against local servers speaking s.jina.ai's and r.jina.ai's wire formats."""

from __future__ import annotations

import pytest

from tests.toolkits.fakeservers import FakeJinaReader, FakeJinaSearch
from tests.toolkits.helpers import FAST, call
from toolfork.toolkits.jina import JinaToolkit
from toolfork.tools import ToolInputError


@pytest.fixture
def search():
    with FakeJinaSearch() as s:
        yield s


@pytest.fixture
def reader():
    with FakeJinaReader() as s:
        yield s


@pytest.fixture
def toolkit(search, reader):
    return JinaToolkit(search.api_key, search_url=search.url, reader_url=reader.url, retry=FAST)


def test_definitions_do_not_clash_with_tavily():
    from toolfork.toolkits.tavily import TavilyToolkit

    jina = [t.name for t in JinaToolkit().tools()]
    assert jina == ["jina_search", "jina_read_url"]
    assert not set(jina) & {t.name for t in TavilyToolkit().tools()}
    assert "jina_read_url" in (JinaToolkit().guidelines() or "")


def test_search(search, toolkit):
    out = call(toolkit, "jina_search", query="fork safety in python", num=3)
    assert not out.is_error, out.as_text()
    req = search.last()
    assert (req.method, req.path) == ("POST", "/")
    assert req.json == {"q": "fork safety in python", "num": 3}
    assert req.headers["authorization"] == f"Bearer {search.api_key}"
    assert req.headers["accept"] == "application/json"
    assert req.headers["x-respond-with"] == "no-content"
    assert out.data == {
        "results": [
            {
                "title": f"fork safety in python - page {i}",
                "url": f"https://example.org/search/{i}",
                "description": f"About fork safety in python, result {i}.",
            }
            for i in (1, 2, 3)
        ]
    }


def test_search_input_checks(search, toolkit):
    assert "query must not be empty" in call(toolkit, "jina_search", query="").as_text()
    with pytest.raises(ToolInputError, match="num"):
        call(toolkit, "jina_search", query="x", num=0)
    assert search.requests == []


def test_read_url(reader, toolkit):
    reader.pages["https://blog.example.com/post"] = "# Post\n\nHello **world**."
    out = call(toolkit, "jina_read_url", url="https://blog.example.com/post")
    assert not out.is_error, out.as_text()
    req = reader.last()
    assert req.json == {"url": "https://blog.example.com/post"}
    assert req.headers["accept"] == "application/json"
    assert req.headers["x-return-format"] == "markdown"
    assert req.headers["authorization"] == f"Bearer {reader.api_key}"
    assert out.data == {
        "title": "Title of blog.example.com",
        "url": "https://blog.example.com/post",
        "content": "# Post\n\nHello **world**.",
    }


def test_read_url_works_without_a_key_but_search_does_not(search, reader, monkeypatch):
    monkeypatch.delenv("JINA_API_KEY", raising=False)
    tk = JinaToolkit(search_url=search.url, reader_url=reader.url, retry=FAST)
    out = call(tk, "jina_read_url", url="https://example.com/")
    assert not out.is_error, out.as_text()
    assert "authorization" not in reader.last().headers
    out = call(tk, "jina_search", query="x")
    assert out.is_error
    assert out.as_text() == (
        "Jina search needs an API key: set the JINA_API_KEY environment variable or pass api_key=... to JinaToolkit."
    )
    assert search.requests == []


def test_read_url_rejects_non_urls_and_reports_unreachable_pages(reader, toolkit):
    out = call(toolkit, "jina_read_url", url="file:///etc/passwd")
    assert out.is_error and "absolute http(s) URL" in out.as_text()
    assert reader.requests == []
    out = call(toolkit, "jina_read_url", url="https://gone.invalid/page")
    assert out.is_error
    assert "Jina reader rejected the request (HTTP 422: AssertionFailureError: Failed to goto" in out.as_text()


def test_long_page_is_clipped(search, reader):
    reader.pages["https://big.example.com/"] = "y" * 1000
    tk = JinaToolkit(search.api_key, search_url=search.url, reader_url=reader.url, max_page_chars=10)
    out = call(tk, "jina_read_url", url="https://big.example.com/")
    assert out.data["content"] == "y" * 10 + "\n[... truncated 990 characters]"
