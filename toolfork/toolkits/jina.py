"""Jina web search (s.jina.ai) and URL reader (r.jina.ai), https://jina.ai/reader.

Both endpoints are asked for JSON (``Accept: application/json``) so the toolkit gets titles and URLs
as fields instead of parsing Jina's text rendering. The reader works without a key (at a lower rate
limit), so only ``jina_search`` insists on one.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from toolfork.tools import Tool, Toolkit, ToolOutput, tool

from .http import HttpClient, RetryPolicy, ServiceError, clip, is_http_url

__all__ = ["JinaToolkit"]

DEFAULT_SEARCH_URL = "https://s.jina.ai"
DEFAULT_READER_URL = "https://r.jina.ai"
ENV_VAR = "JINA_API_KEY"


class JinaToolkit(Toolkit):
    """Tools: ``jina_search``, ``jina_read_url``.

    The key comes from ``api_key`` or ``JINA_API_KEY`` at call time; ``jina_search`` without one
    returns an error output naming the variable, ``jina_read_url`` goes out without it.
    """

    name = "jina"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        search_url: str = DEFAULT_SEARCH_URL,
        reader_url: str = DEFAULT_READER_URL,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        max_page_chars: int = 20_000,
    ) -> None:
        super().__init__()
        if max_page_chars < 1:
            raise ValueError(f"max_page_chars must be >= 1, got {max_page_chars}")
        self.max_page_chars = max_page_chars
        common: dict[str, Any] = {
            "api_key": api_key,
            "env_var": ENV_VAR,
            "timeout": timeout,
            "retry": retry,
            "owner": "JinaToolkit",
        }
        self.search_http = HttpClient("Jina search", search_url, **common)
        self.reader_http = HttpClient("Jina reader", reader_url, **common)

    def guidelines(self) -> str | None:
        return (
            "Use jina_search to find pages about a topic (it returns titles, URLs and short "
            "descriptions), then jina_read_url on the most promising URLs to read them as markdown. "
            "Cite the URLs you used."
        )

    def provide(self) -> list[Tool]:
        search_http = self.search_http
        reader_http = self.reader_http
        page_chars = self.max_page_chars

        @tool("jina_search")
        def jina_search(query: str, num: Annotated[int, Field(ge=1, le=20)] = 5) -> ToolOutput:
            """Search the web with Jina; returns titles, URLs and short descriptions of matching pages.

            Args:
                query: what to look for, as a question or keywords
                num: number of results, 1 to 20
            """
            if not query.strip():
                return ToolOutput.error("query must not be empty")
            try:
                data = search_http.request(
                    "POST", "", json={"q": query, "num": num}, headers={"X-Respond-With": "no-content"},
                    idempotent=True,  # a search only reads
                )
            except ServiceError as exc:
                return ToolOutput.error(str(exc))
            items = data.get("data") if isinstance(data, dict) else None
            if not isinstance(items, list):
                return _unexpected("search", data)
            return ToolOutput.from_value(
                {
                    "results": [
                        {
                            "title": r.get("title"),
                            "url": r.get("url"),
                            "description": clip(str(r.get("description") or ""), page_chars),
                        }
                        for r in items
                        if isinstance(r, dict)
                    ]
                }
            )

        @tool("jina_read_url")
        def jina_read_url(url: str) -> ToolOutput:
            """Read a web page with Jina and return its main content as markdown.

            Args:
                url: the absolute http(s) URL of the page
            """
            if not is_http_url(url):
                return ToolOutput.error(f"url must be an absolute http(s) URL, got {url!r}")
            try:
                data = reader_http.request(
                    "POST",
                    "",
                    json={"url": url},
                    headers={"X-Return-Format": "markdown"},
                    require_key=False,
                    idempotent=True,  # reading a page changes nothing
                )
            except ServiceError as exc:
                return ToolOutput.error(str(exc))
            page = data.get("data") if isinstance(data, dict) else None
            if not isinstance(page, dict):
                return _unexpected("reader", data)
            return ToolOutput.from_value(
                {
                    "title": page.get("title"),
                    "url": page.get("url", url),
                    "content": clip(str(page.get("content") or ""), page_chars),
                }
            )

        return [jina_search, jina_read_url]


def _unexpected(endpoint: str, data: Any) -> ToolOutput:
    return ToolOutput.error(f"Jina {endpoint} returned JSON without a 'data' field: {str(data)[:200]!r}")
