"""Tavily web search, page extraction and site crawl (https://docs.tavily.com/api-reference).

Tool names carry the ``tavily_`` prefix because Jina offers the same verbs: an agent given both
toolkits must still have unique tool names.

Options (``options={"tavily_search": {...}}`` or ``with_options("tavily_search", ...)``) are the
request fields of Tavily's API under their own names; see ``TavilyToolkit.OPTIONS`` and
docs/toolkits-web.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from toolfork.tools import Tool, Toolkit, ToolOutput

from ._options import Check, WebOptions, boolean, date, integer, number, one_of, regexes, string, strings
from .http import HttpClient, RetryPolicy, ServiceError, clip, is_http_url

__all__ = ["TavilyToolkit"]

DEFAULT_BASE_URL = "https://api.tavily.com"
ENV_VAR = "TAVILY_API_KEY"

_DEPTH = one_of("basic", "advanced")
_FORMAT = one_of("markdown", "text")
_SEARCH_OPTIONS: dict[str, Check] = {
    # the tool's own parameters: fixed, or their default with Default(...)
    "search_depth": one_of("basic", "advanced", "fast", "ultra-fast"),
    "topic": one_of("general", "news", "finance"),
    "time_range": one_of("day", "week", "month", "year"),
    "max_results": integer(1, 20),
    # sent on every search
    "chunks_per_source": integer(1, 3),
    "include_answer": one_of(True, False, "basic", "advanced"),
    "include_raw_content": one_of(True, False, "markdown", "text"),
    "include_images": boolean,
    "include_image_descriptions": boolean,
    "include_favicon": boolean,
    "include_domains": strings(max_items=300, what="domains"),
    "exclude_domains": strings(max_items=150, what="domains"),
    "country": string,
    "start_date": date,
    "end_date": date,
    "auto_parameters": boolean,
}
_EXTRACT_OPTIONS: dict[str, Check] = {
    "extract_depth": _DEPTH,  # the tool's parameter
    "format": _FORMAT,
    "include_images": boolean,
    "include_favicon": boolean,
    "timeout": number(1, 60),
}
_CRAWL_OPTIONS: dict[str, Check] = {
    "max_depth": integer(1, 5),  # the tool's parameters
    "limit": integer(1, 100),
    "max_breadth": integer(1, 500),
    "select_paths": regexes(),
    "select_domains": regexes(),
    "exclude_paths": regexes(),
    "exclude_domains": regexes(),
    "allow_external": boolean,
    "include_images": boolean,
    "extract_depth": _DEPTH,
    "format": _FORMAT,
    "include_favicon": boolean,
    "timeout": number(10, 150),
}
# Options that name a tool parameter: fixed (out of the model's schema), or its default with Default().
_PARAMETERS = {
    "tavily_search": ("search_depth", "topic", "time_range", "max_results"),
    "tavily_extract": ("extract_depth",),
    "tavily_crawl": ("max_depth", "limit"),
}


class TavilyToolkit(WebOptions, Toolkit):
    """Tools: ``tavily_search``, ``tavily_extract``, ``tavily_crawl``.

    The key comes from ``api_key`` or ``TAVILY_API_KEY`` and is looked up when a tool runs, so the
    toolkit can be built (and its definitions listed) without one; a call without a key returns an
    error output naming the variable. ``max_page_chars`` bounds each page's text so one long page
    cannot flood the model's context.

    ``options`` maps a tool name to Tavily request fields, checked here (an unknown name or a value
    Tavily would refuse raises ``OptionError`` naming it), e.g.
    ``TavilyToolkit(options={"tavily_search": {"search_depth": "advanced", "include_domains":
    ["arxiv.org"]}})``. ``search_depth``, ``topic``, ``time_range``, ``max_results`` (search),
    ``extract_depth`` (extract), ``max_depth`` and ``limit`` (crawl) fix the tool parameter of that
    name (it leaves the model's schema), or with ``Default(value)`` only set its default; the
    others are sent with every request of that tool.
    """

    name = "tavily"
    OPTIONS = {"tavily_search": _SEARCH_OPTIONS, "tavily_extract": _EXTRACT_OPTIONS, "tavily_crawl": _CRAWL_OPTIONS}
    PARAMETERS = _PARAMETERS

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        max_page_chars: int = 10_000,
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self._init_options(options)
        if max_page_chars < 1:
            raise ValueError(f"max_page_chars must be >= 1, got {max_page_chars}")
        self.max_page_chars = max_page_chars
        self.http = HttpClient(
            "Tavily",
            base_url,
            api_key=api_key,
            env_var=ENV_VAR,
            timeout=timeout,
            retry=retry,
            owner="TavilyToolkit",
        )

    def guidelines(self) -> str | None:
        return (
            "Use tavily_search for questions about current events or facts you are unsure of, then "
            "tavily_extract to read the full text of the most relevant result URLs. Use tavily_crawl "
            "only when the answer spans many pages of one site; it is slow and costs more. Cite the "
            "URLs you used."
        )

    def provide(self) -> list[Tool]:
        http = self.http
        page_chars = self.max_page_chars
        search_extra = self.request_options("tavily_search")
        extract_extra = self.request_options("tavily_extract")
        crawl_extra = self.request_options("tavily_crawl")

        def post(endpoint: str, body: dict[str, Any]) -> dict[str, Any] | ToolOutput:
            """The endpoint's JSON object, or the error output the model should read instead."""
            try:
                # Search, extract and crawl only read: safe to retry after a 5xx.
                data = http.request("POST", endpoint, json=body, idempotent=True)
            except ServiceError as exc:
                return ToolOutput.error(str(exc))
            if not isinstance(data, dict) or not isinstance(data.get("results"), list):
                return _unexpected(endpoint, data)
            return data

        def pages(data: dict[str, Any]) -> list[dict[str, Any]]:
            return [
                _with_extras(r, {"url": r.get("url"), "content": clip(str(r.get("raw_content") or ""), page_chars)})
                for r in data["results"]
                if isinstance(r, dict)
            ]

        @self.option_tool("tavily_search")
        def tavily_search(
            query: str,
            topic: Literal["general", "news", "finance"] = "general",
            time_range: Literal["day", "week", "month", "year"] | None = None,
            max_results: Annotated[int, Field(ge=1, le=20)] = 5,
            search_depth: Literal["basic", "advanced", "fast", "ultra-fast"] = "basic",
        ) -> ToolOutput:
            """Search the web with Tavily; returns a short answer and the best matching pages.

            Args:
                query: what to look for, as a question or keywords
                topic: "news" for recent events, "finance" for markets and companies, else "general"
                time_range: only pages published within this period before today
                max_results: number of results, 1 to 20
                search_depth: "advanced" is slower and costs more but finds more relevant passages;
                    "fast" and "ultra-fast" answer sooner with less relevant passages
            """
            if not query.strip():
                return ToolOutput.error("query must not be empty")
            body: dict[str, Any] = {
                "include_answer": True,
                **search_extra,
                "query": query,
                "topic": topic,
                "max_results": max_results,
                "search_depth": search_depth,
            }
            if time_range is not None:
                body["time_range"] = time_range
            data = post("search", body)
            if isinstance(data, ToolOutput):
                return data
            found: dict[str, Any] = {
                "answer": data.get("answer"),
                "results": [
                    _with_extras(
                        r,
                        {
                            "title": r.get("title"),
                            "url": r.get("url"),
                            "content": clip(str(r.get("content") or ""), page_chars),
                            "score": r.get("score"),
                        },
                        raw_chars=page_chars,
                    )
                    for r in data["results"]
                    if isinstance(r, dict)
                ],
            }
            if data.get("images"):  # asked for with the include_images option
                found["images"] = data["images"]
            return ToolOutput.from_value(found)

        @self.option_tool("tavily_extract")
        def tavily_extract(
            urls: Annotated[list[str], Field(min_length=1, max_length=20)],
            extract_depth: Literal["basic", "advanced"] = "basic",
        ) -> ToolOutput:
            """Fetch web pages with Tavily and return their main text as markdown.

            Args:
                urls: absolute http(s) URLs to read, 1 to 20
                extract_depth: "advanced" also gets tables and embedded content, and works on more
                    sites, but is slower and costs more
            """
            bad = [u for u in urls if not is_http_url(u)]
            if bad:
                return ToolOutput.error(f"not an absolute http(s) URL: {', '.join(map(repr, bad))}")
            data = post("extract", {**extract_extra, "urls": urls, "extract_depth": extract_depth})
            if isinstance(data, ToolOutput):
                return data
            extracted = pages(data)
            failed = [
                {"url": f.get("url"), "error": f.get("error")}
                for f in data.get("failed_results") or []
                if isinstance(f, dict)
            ]
            if not extracted and failed:
                reasons = "; ".join(f"{f['url']}: {f['error']}" for f in failed)
                return ToolOutput.error(f"Tavily could not extract any of the URLs ({reasons})")
            return ToolOutput.from_value({"results": extracted, "failed": failed})

        @self.option_tool("tavily_crawl")
        def tavily_crawl(
            url: str,
            instructions: str | None = None,
            max_depth: Annotated[int, Field(ge=1, le=5)] = 1,
            limit: Annotated[int, Field(ge=1, le=100)] = 20,
        ) -> ToolOutput:
            """Crawl a website from a start URL with Tavily and return the text of the pages found.

            Args:
                url: absolute http(s) URL where the crawl starts
                instructions: what to look for, in plain language, so only relevant pages are kept
                max_depth: how many links away from the start URL to go, 1 to 5
                limit: the most pages to return, 1 to 100
            """
            if not is_http_url(url):
                return ToolOutput.error(f"url must be an absolute http(s) URL, got {url!r}")
            body: dict[str, Any] = {**crawl_extra, "url": url, "max_depth": max_depth, "limit": limit}
            if instructions:
                body["instructions"] = instructions
            data = post("crawl", body)
            if isinstance(data, ToolOutput):
                return data
            return ToolOutput.from_value({"base_url": data.get("base_url", url), "pages": pages(data)})

        return [tavily_search, tavily_extract, tavily_crawl]


def _with_extras(result: dict[str, Any], out: dict[str, Any], raw_chars: int | None = None) -> dict[str, Any]:
    """``out`` plus what the options asked Tavily for (favicon, images, raw page text)."""
    if result.get("favicon"):
        out["favicon"] = result["favicon"]
    if result.get("images"):
        out["images"] = result["images"]
    if raw_chars is not None and result.get("raw_content"):
        out["raw_content"] = clip(str(result["raw_content"]), raw_chars)
    return out


def _unexpected(endpoint: str, data: Any) -> ToolOutput:
    return ToolOutput.error(f"Tavily {endpoint} returned JSON without a 'results' list: {str(data)[:200]!r}")
