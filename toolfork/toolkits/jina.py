"""Jina web search (s.jina.ai) and URL reader (r.jina.ai), https://jina.ai/reader.

Both endpoints are asked for JSON (``Accept: application/json``) so the toolkit gets titles and URLs
as fields instead of parsing Jina's text rendering. The reader works without a key (at a lower rate
limit), so only ``jina_search`` insists on one.

Options (``options={"jina_read_url": {...}}`` or ``with_options``) are Jina's request settings under
snake_case names; most travel as Jina's ``X-...`` headers (``target_selector`` is
``X-Target-Selector``), the search's ``gl``/``hl``/``location`` in the body. See
``JinaToolkit.OPTIONS`` and docs/toolkits-web.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from toolfork.tools import Tool, Toolkit, ToolOutput, tool

from ._options import Check, WebOptions, boolean, integer, one_of, pattern, string
from .http import HttpClient, RetryPolicy, ServiceError, clip, is_http_url

__all__ = ["JinaToolkit"]

DEFAULT_SEARCH_URL = "https://s.jina.ai"
DEFAULT_READER_URL = "https://r.jina.ai"
ENV_VAR = "JINA_API_KEY"

_SEARCH_OPTIONS: dict[str, Check] = {
    "num": integer(1, 20),  # the tool's parameter
    "site": pattern(r"[A-Za-z0-9.-]+\.[A-Za-z]{2,}", "a domain name such as 'docs.python.org'"),
    "gl": pattern(r"[a-z]{2}", "a two-letter lower-case country code such as 'us'"),
    "hl": pattern(r"[a-z]{2}(-[A-Za-z]{2,4})?", "a language code such as 'en' or 'zh-cn'"),
    "location": string,
    "no_cache": boolean,
}
_READER_OPTIONS: dict[str, Check] = {
    "return_format": one_of("markdown", "html", "text"),
    "target_selector": string,
    "remove_selector": string,
    "wait_for_selector": string,
    "with_links_summary": boolean,
    "with_images_summary": boolean,
    "with_generated_alt": boolean,
    "retain_images": one_of("none", "all"),
    "no_cache": boolean,
    "engine": one_of("browser", "direct", "cf-browser-rendering"),
    "token_budget": integer(1, None),
    "timeout": integer(1, 180),
    "locale": pattern(r"[a-z]{2}(-[A-Z]{2})?", "a locale such as 'en-US'"),
}
# Option -> Jina header; a bool travels as "true" (a False option sends nothing).
_HEADERS = {
    "site": "X-Site",
    "no_cache": "X-No-Cache",
    "return_format": "X-Return-Format",
    "target_selector": "X-Target-Selector",
    "remove_selector": "X-Remove-Selector",
    "wait_for_selector": "X-Wait-For-Selector",
    "with_links_summary": "X-With-Links-Summary",
    "with_images_summary": "X-With-Images-Summary",
    "with_generated_alt": "X-With-Generated-Alt",
    "retain_images": "X-Retain-Images",
    "engine": "X-Engine",
    "token_budget": "X-Token-Budget",
    "timeout": "X-Timeout",
    "locale": "X-Locale",
}
_BODY = ("gl", "hl", "location")


def _wire(opts: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """A tool's options as (headers, body fields); ``num`` is the tool parameter's default, not here."""
    headers: dict[str, str] = {}
    body: dict[str, Any] = {}
    for name, value in opts.items():
        if name in _BODY:
            body[name] = value
        elif name in _HEADERS:
            if value is False:
                continue
            headers[_HEADERS[name]] = "true" if value is True else str(value)
    return headers, body


class JinaToolkit(WebOptions, Toolkit):
    """Tools: ``jina_search``, ``jina_read_url``.

    The key comes from ``api_key`` or ``JINA_API_KEY`` at call time; ``jina_search`` without one
    returns an error output naming the variable, ``jina_read_url`` goes out without it.

    ``options``: ``{"jina_search": {"site": "docs.python.org", "gl": "us", ...},
    "jina_read_url": {"target_selector": "main", "return_format": "text", ...}}``, checked here
    (``OptionError`` names a bad one). ``num`` fixes ``jina_search``'s parameter (``Default(n)``:
    only its default).
    """

    name = "jina"
    OPTIONS = {"jina_search": _SEARCH_OPTIONS, "jina_read_url": _READER_OPTIONS}
    PARAMETERS = {"jina_search": ("num",)}

    def __init__(
        self,
        api_key: str | None = None,
        *,
        search_url: str = DEFAULT_SEARCH_URL,
        reader_url: str = DEFAULT_READER_URL,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        max_page_chars: int = 20_000,
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self._init_options(options)
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
        search_headers, search_body = _wire(self.tool_options("jina_search"))
        reader_headers, _ = _wire(self.tool_options("jina_read_url"))
        reader_headers = {"X-Return-Format": "markdown", **reader_headers}

        @self.option_tool("jina_search")
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
                    "POST",
                    "",
                    json={**search_body, "q": query, "num": num},
                    headers={"X-Respond-With": "no-content", **search_headers},
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
                    headers=reader_headers,
                    require_key=False,
                    idempotent=True,  # reading a page changes nothing
                )
            except ServiceError as exc:
                return ToolOutput.error(str(exc))
            page = data.get("data") if isinstance(data, dict) else None
            if not isinstance(page, dict):
                return _unexpected("reader", data)
            read: dict[str, Any] = {
                "title": page.get("title"),
                "url": page.get("url", url),
                "content": clip(str(page.get("content") or ""), page_chars),
            }
            for extra in ("links", "images"):  # asked for with the with_*_summary options
                if page.get(extra):
                    read[extra] = page[extra]
            return ToolOutput.from_value(read)

        return [jina_search, jina_read_url]


def _unexpected(endpoint: str, data: Any) -> ToolOutput:
    return ToolOutput.error(f"Jina {endpoint} returned JSON without a 'data' field: {str(data)[:200]!r}")
