"""Local stand-ins for the paid web services the web toolkits call (Tavily, Jina, Supadata, Zep).

Each fake is a real HTTP server on 127.0.0.1 (port 0, so tests run in parallel under xdist) in a
background thread. It speaks the service's documented wire format: request paths, auth header, JSON
request and response bodies and the service's own error shape, and it validates what it receives the
way the service does (missing fields, bad enums, wrong key), so a toolkit that sends the wrong thing
fails here too. Every request is recorded so tests can assert exactly what was sent.

Fault injection: ``server.script(Reply(...), ...)`` queues replies that are served, in order, before
the service logic answers again (429 then 200, 500 three times, a slow reply, malformed JSON).
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = [
    "FakeJinaReader",
    "FakeJinaSearch",
    "FakeServer",
    "FakeSupadata",
    "FakeTavily",
    "FakeZep",
    "Recorded",
    "Reply",
]


@dataclass
class Recorded:
    """One request as the server saw it. Header names are lower-cased."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    json: Any = None
    peer: tuple[str, int] | None = None  # the client's (host, port): one per TCP connection


@dataclass
class Reply:
    """What to answer: a JSON value (dict/list) or raw bytes/str, after ``delay`` seconds.

    ``drop=True`` closes the connection without answering, as a server does with a kept-alive
    connection it has just timed out.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    content_type: str = "application/json"
    drop: bool = False

    def encode(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


class FakeServer:
    """Base class: a threaded HTTP server on 127.0.0.1:0 that records requests and routes them."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._script: list[Reply] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> FakeServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 keeps connections alive between requests, as the real services do, so a
            # client's connection reuse is visible in ``Recorded.peer``.
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with fake._lock:
                    fake._connections.add(self.connection)

            def finish(self) -> None:
                with fake._lock:
                    fake._connections.discard(self.connection)
                super().finish()

            def _serve(self) -> None:
                fake._dispatch(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a delayed reply
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        with self._lock:  # kept-alive connections: end their handler threads
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # -- test helpers --------------------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Serve these replies, in order, to the next requests (before the service logic)."""
        with self._lock:
            self._script.extend(replies)

    def last(self) -> Recorded:
        assert self.requests, "no request received"
        return self.requests[-1]

    def iter_text(self) -> Iterator[str]:
        """Everything the server received, as text (to check what a client sent)."""
        for r in self.requests:
            yield r.path
            yield json.dumps(r.query)
            yield json.dumps(r.headers)
            yield r.body.decode(errors="replace")

    # -- dispatch ------------------------------------------------------------------------------------

    def _dispatch(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        parsed: Any = None
        if body:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        req = Recorded(
            method=h.command,
            path=unquote(parts.path),
            query=query,
            headers={k.lower(): v for k, v in h.headers.items()},
            body=body,
            json=parsed,
            peer=tuple(h.client_address[:2]),  # type: ignore[arg-type]
        )
        with self._lock:
            self.requests.append(req)
            scripted = self._script.pop(0) if self._script else None
        reply = scripted if scripted is not None else self.handle(req)
        if reply.delay and self._stopping.wait(reply.delay):
            return
        if reply.drop:
            h.close_connection = True
            return
        payload = reply.encode()
        try:
            h.send_response(reply.status)
            if payload or reply.body is not None:
                h.send_header("Content-Type", reply.content_type)
            for name, value in reply.headers.items():
                h.send_header(name, value)
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            if payload:
                h.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass

    def handle(self, req: Recorded) -> Reply:  # pragma: no cover - subclasses route
        return Reply(404, {"message": "not found"})


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _bearer_ok(req: Recorded, key: str) -> bool:
    return req.headers.get("authorization") == f"Bearer {key}"


# ------------------------------------------------------------------------------------------------
# Tavily: POST https://api.tavily.com/{search,extract,crawl}, "Authorization: Bearer tvly-...",
# errors as {"detail": {"error": "..."}}.
# ------------------------------------------------------------------------------------------------


class FakeTavily(FakeServer):
    TOPICS = ("general", "news", "finance")
    TIME_RANGES = ("day", "week", "month", "year", "d", "w", "m", "y")

    def __init__(self, api_key: str = "tvly-dev-FAKEKEY0123456789") -> None:
        super().__init__()
        self.api_key = api_key
        self.pages: dict[str, str] = {}  # url -> page text served by extract/crawl

    @staticmethod
    def _err(status: int, message: str) -> Reply:
        return Reply(status, {"detail": {"error": message}})

    # The request fields each endpoint documents; anything else is refused here (stricter than the
    # service, which may ignore an unknown field), so a misspelt option cannot pass unnoticed.
    FIELDS = {
        "/search": {
            "query", "auto_parameters", "topic", "search_depth", "chunks_per_source", "max_results",
            "time_range", "start_date", "end_date", "include_answer", "include_raw_content",
            "include_images", "include_image_descriptions", "include_favicon", "include_domains",
            "exclude_domains", "country",
        },
        "/extract": {"urls", "include_images", "extract_depth", "format", "timeout", "include_favicon"},
        "/crawl": {
            "url", "instructions", "max_depth", "max_breadth", "limit", "select_paths", "select_domains",
            "exclude_paths", "exclude_domains", "allow_external", "include_images", "extract_depth",
            "format", "include_favicon", "timeout",
        },
    }
    BOOLS = ("auto_parameters", "include_images", "include_image_descriptions", "include_favicon",
             "allow_external")
    LISTS = ("include_domains", "exclude_domains", "select_paths", "select_domains", "exclude_paths")

    def _check_fields(self, path: str, body: dict[str, Any]) -> Reply | None:
        unknown = sorted(set(body) - self.FIELDS[path])
        if unknown:
            return self._err(400, f"Unknown field(s): {', '.join(unknown)}.")
        for name in self.BOOLS:
            if name in body and not isinstance(body[name], bool):
                return self._err(400, f"{name} must be a boolean.")
        for name in self.LISTS:
            if name in body and not (isinstance(body[name], list) and all(isinstance(v, str) for v in body[name])):
                return self._err(400, f"{name} must be a list of strings.")
        if body.get("format", "markdown") not in ("markdown", "text"):
            return self._err(400, "Invalid format.")
        if body.get("include_answer", False) not in (True, False, "basic", "advanced"):
            return self._err(400, "Invalid include_answer.")
        if body.get("include_raw_content", False) not in (True, False, "markdown", "text"):
            return self._err(400, "Invalid include_raw_content.")
        if "chunks_per_source" in body and body["chunks_per_source"] not in (1, 2, 3):
            return self._err(400, "chunks_per_source must be between 1 and 3.")
        for name in ("start_date", "end_date"):
            if name in body and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(body[name])):
                return self._err(400, f"{name} must be YYYY-MM-DD.")
        return None

    def handle(self, req: Recorded) -> Reply:
        if not _bearer_ok(req, self.api_key):
            return self._err(401, "Unauthorized: missing or invalid API key.")
        if req.method != "POST":
            return Reply(405, {"detail": "Method Not Allowed"})
        if not isinstance(req.json, dict):
            return self._err(400, "Request body must be a JSON object.")
        route = {"/search": self._search, "/extract": self._extract, "/crawl": self._crawl}.get(req.path)
        if route is None:
            return Reply(404, {"detail": "Not Found"})
        return self._check_fields(req.path, req.json) or route(req.json)

    def _page(self, url: str) -> str:
        return self.pages.get(url, f"# {url}\n\nThe text of {url}.")

    def _search(self, body: dict[str, Any]) -> Reply:
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            return self._err(400, "Query is missing.")
        topic = body.get("topic", "general")
        if topic not in self.TOPICS:
            return self._err(400, f"Invalid topic. Must be one of {list(self.TOPICS)}.")
        if body.get("time_range") is not None and body["time_range"] not in self.TIME_RANGES:
            return self._err(400, "Invalid time_range.")
        depth = body.get("search_depth", "basic")
        if depth not in ("basic", "advanced", "fast", "ultra-fast"):
            return self._err(400, "Invalid search_depth.")
        max_results = body.get("max_results", 5)
        if not isinstance(max_results, int) or not 0 <= max_results <= 20:
            return self._err(400, "max_results must be between 0 and 20.")
        slug = re.sub(r"[^a-z0-9]+", "-", query.lower()).strip("-")
        hosts = body.get("include_domains") or ["example.com"]
        results = [
            {
                "title": f"Result {i + 1} about {query}",
                "url": f"https://{hosts[i % len(hosts)]}/{slug}/{i + 1}",
                "content": f"Snippet {i + 1}: {query} explained.",
                "score": round(0.9 - i * 0.1, 2),
                "raw_content": f"Full page {i + 1} about {query}." if body.get("include_raw_content") else None,
            }
            for i in range(max_results)
        ]
        if body.get("include_favicon"):
            for r in results:
                r["favicon"] = f"https://{urlsplit(r['url']).hostname}/favicon.ico"
        return Reply(
            200,
            {
                "query": query,
                "follow_up_questions": None,
                "answer": f"A short answer about {query}." if body.get("include_answer") else None,
                "images": [f"https://img.example.com/{slug}.png"] if body.get("include_images") else [],
                "results": results,
                "response_time": 0.42,
            },
        )

    def _extract(self, body: dict[str, Any]) -> Reply:
        urls = body.get("urls")
        if isinstance(urls, str):
            urls = [urls]
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
            return self._err(400, "urls is required and must be a string or a list of strings.")
        if len(urls) > 20:
            return self._err(400, "Too many URLs: the maximum is 20.")
        if body.get("extract_depth", "basic") not in ("basic", "advanced"):
            return self._err(400, "Invalid extract_depth.")
        results, failed = [], []
        for url in urls:
            host = urlsplit(url).hostname or ""
            if host.endswith(".invalid"):
                failed.append({"url": url, "error": "Failed to fetch the URL."})
            else:
                results.append({"url": url, "raw_content": self._page(url), "images": []})
        return Reply(200, {"results": results, "failed_results": failed, "response_time": 0.31})

    def _crawl(self, body: dict[str, Any]) -> Reply:
        url = body.get("url")
        if not isinstance(url, str) or not url:
            return self._err(400, "url is required.")
        max_depth = body.get("max_depth", 1)
        limit = body.get("limit", 50)
        if not isinstance(max_depth, int) or not 1 <= max_depth <= 5:
            return self._err(400, "max_depth must be between 1 and 5.")
        if not isinstance(limit, int) or limit < 1:
            return self._err(400, "limit must be greater than 0.")
        base = url.rstrip("/")
        pages = [base] + [f"{base}/page-{d}-{i}" for d in range(1, max_depth + 1) for i in range(1, 4)]
        results = [{"url": u, "raw_content": self._page(u), "favicon": None} for u in pages[:limit]]
        return Reply(200, {"base_url": url, "results": results, "response_time": 1.2})


# ------------------------------------------------------------------------------------------------
# Jina: search is POST https://s.jina.ai/ {"q": ...}; the reader is POST https://r.jina.ai/ {"url": ...};
# "Authorization: Bearer jina_...", "Accept: application/json" gives {"code", "status", "data"};
# errors as {"data": null, "code", "name", "status", "message", "readableMessage"}.
# ------------------------------------------------------------------------------------------------


def _jina_err(code: int, name: str, status: int, message: str) -> Reply:
    return Reply(
        code,
        {
            "data": None,
            "code": code,
            "name": name,
            "status": status,
            "message": message,
            "readableMessage": f"{name}: {message}",
        },
    )


class FakeJinaSearch(FakeServer):
    def __init__(self, api_key: str = "jina_FAKEKEY0123456789abcdef") -> None:
        super().__init__()
        self.api_key = api_key

    def handle(self, req: Recorded) -> Reply:
        auth = req.headers.get("authorization")
        if auth is None:
            return _jina_err(401, "AuthenticationRequiredError", 40103, "Authentication is required.")
        if auth != f"Bearer {self.api_key}":
            return _jina_err(401, "AuthenticationFailedError", 40102, "Invalid API key, please check.")
        if req.method != "POST" or req.path != "/":
            return _jina_err(404, "NotFoundError", 40400, "Not found.")
        body = req.json if isinstance(req.json, dict) else {}
        q = body.get("q")
        if not isinstance(q, str) or not q.strip():
            return _jina_err(400, "ParamValidationError", 40001, "Missing query parameter q.")
        num = body.get("num", 5)
        if not isinstance(num, int) or not 1 <= num <= 20:
            return _jina_err(400, "ParamValidationError", 40001, "num must be between 1 and 20.")
        unknown = sorted(set(body) - {"q", "num", "gl", "hl", "location", "page"})
        if unknown:
            return _jina_err(400, "ParamValidationError", 40001, f"Unknown parameter(s): {', '.join(unknown)}.")
        for name in ("gl", "hl", "location"):
            if name in body and (not isinstance(body[name], str) or not body[name]):
                return _jina_err(400, "ParamValidationError", 40001, f"{name} must be a non-empty string.")
        bad = _bad_bool_headers(req, ("x-no-cache",))
        if bad:
            return bad
        site = req.headers.get("x-site") or "example.org"
        no_content = req.headers.get("x-respond-with") == "no-content"
        results = []
        for i in range(num):
            item = {
                "title": f"{q} - page {i + 1}",
                "url": f"https://{site}/search/{i + 1}",
                "description": f"About {q}, result {i + 1}.",
                "date": "2024-05-01",
            }
            if not no_content:
                item["content"] = f"Full text of result {i + 1} about {q}."
            results.append(item)
        if "application/json" not in req.headers.get("accept", ""):
            text = "\n\n".join(f"[{i + 1}] Title: {r['title']}\nURL: {r['url']}" for i, r in enumerate(results))
            return Reply(200, text, content_type="text/plain; charset=utf-8")
        return Reply(200, {"code": 200, "status": 20000, "data": results, "meta": {"usage": {"tokens": 100}}})


def _bad_bool_headers(req: Recorded, names: tuple[str, ...]) -> Reply | None:
    for name in names:
        if name in req.headers and req.headers[name] not in ("true", "false"):
            return _jina_err(400, "ParamValidationError", 40001, f"{name} must be true or false.")
    return None


class FakeJinaReader(FakeServer):
    ENUM_HEADERS = {
        "x-return-format": ("markdown", "html", "text", "screenshot", "pageshot"),
        "x-retain-images": ("none", "all"),
        "x-engine": ("browser", "direct", "cf-browser-rendering"),
    }

    def __init__(self, api_key: str = "jina_FAKEKEY0123456789abcdef") -> None:
        super().__init__()
        self.api_key = api_key
        self.pages: dict[str, str] = {}

    def handle(self, req: Recorded) -> Reply:
        auth = req.headers.get("authorization")
        # The reader works without a key (lower rate limit); a wrong key is refused.
        if auth is not None and auth != f"Bearer {self.api_key}":
            return _jina_err(401, "AuthenticationFailedError", 40102, "Invalid API key, please check.")
        if req.method != "POST" or req.path != "/":
            return _jina_err(404, "NotFoundError", 40400, "Not found.")
        body = req.json if isinstance(req.json, dict) else {}
        url = body.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            return _jina_err(400, "ParamValidationError", 40001, "Invalid URL.")
        host = urlsplit(url).hostname or ""
        if host.endswith(".invalid"):
            return _jina_err(422, "AssertionFailureError", 42206, f"Failed to goto {url}: net::ERR_NAME_NOT_RESOLVED")
        bad = _bad_bool_headers(
            req, ("x-no-cache", "x-with-links-summary", "x-with-images-summary", "x-with-generated-alt")
        )
        if bad:
            return bad
        for header, allowed in self.ENUM_HEADERS.items():
            if header in req.headers and req.headers[header] not in allowed:
                return _jina_err(400, "ParamValidationError", 40001, f"Invalid {header}: {req.headers[header]}.")
        for header in ("x-token-budget", "x-timeout"):
            if header in req.headers and not req.headers[header].isdigit():
                return _jina_err(400, "ParamValidationError", 40001, f"{header} must be an integer.")
        content = self.pages.get(url, f"# Page at {url}\n\nSome **markdown** text.")
        fmt = req.headers.get("x-return-format", "markdown")
        if fmt == "html":
            content = f"<html><body>{content}</body></html>"
        elif fmt == "text":
            content = content.replace("#", "").replace("**", "").strip()
        selector = req.headers.get("x-target-selector")
        if selector:
            content = f"[{selector}] {content}"
        data = {
            "title": f"Title of {host}",
            "description": f"Description of {host}",
            "url": url,
            "content": content,
            "usage": {"tokens": max(1, len(content) // 4)},
        }
        if req.headers.get("x-with-links-summary") == "true":
            data["links"] = {"Home": f"https://{host}/"}
        if req.headers.get("x-with-images-summary") == "true":
            data["images"] = {"Logo": f"https://{host}/logo.png"}
        if "application/json" not in req.headers.get("accept", ""):
            return Reply(200, f"Title: {data['title']}\n\nMarkdown Content:\n{content}", content_type="text/plain")
        return Reply(200, {"code": 200, "status": 20000, "data": data})


# ------------------------------------------------------------------------------------------------
# Supadata: GET https://api.supadata.ai/v1/youtube/{transcript,video,channel,playlist}, "x-api-key";
# errors as {"error": "<code>", "message", "details", "documentationUrl"}.
# ------------------------------------------------------------------------------------------------

_VIDEO_URL = re.compile(r"(?:v=|youtu\.be/|/shorts/|/embed/)([A-Za-z0-9_-]{11})")


class FakeSupadata(FakeServer):
    VIDEO_ID = "dQw4w9WgXcQ"
    CHANNEL_ID = "UCuAXFkgsw1L7xaCfnd5JJOw"
    PLAYLIST_ID = "PLFgquLnL59alCl_2TQvOiD5Vgm1hCaGSI"

    def __init__(self, api_key: str = "sd_FAKEKEY0123456789abcdef") -> None:
        super().__init__()
        self.api_key = api_key
        self.transcripts = {
            "en": [
                ("Never gonna give you up", 18000, 2000),
                ("never gonna let you down", 20000, 2100),
            ],
            "es": [("Nunca te voy a abandonar", 18000, 2000)],
        }

    @staticmethod
    def _err(status: int, code: str, message: str, details: str) -> Reply:
        return Reply(
            status,
            {
                "error": code,
                "message": message,
                "details": details,
                "documentationUrl": f"https://docs.supadata.ai/errors/{code}",
            },
        )

    def handle(self, req: Recorded) -> Reply:
        if req.headers.get("x-api-key") != self.api_key:
            return self._err(401, "unauthorized", "Invalid API key", "The x-api-key header is missing or wrong.")
        if req.method != "GET":
            return self._err(405, "method-not-allowed", "Method not allowed", req.method)
        route = {
            "/v1/youtube/transcript": self._transcript,
            "/v1/youtube/video": self._video,
            "/v1/youtube/channel": self._channel,
            "/v1/youtube/playlist": self._playlist,
        }.get(req.path)
        if route is None:
            return self._err(404, "not-found", "Endpoint not found", req.path)
        return route(req.query)

    def _video_id(self, value: str | None) -> str | None:
        if not value:
            return None
        m = _VIDEO_URL.search(value)
        return m.group(1) if m else value

    def _transcript(self, q: dict[str, str]) -> Reply:
        video = self._video_id(q.get("videoId") or q.get("url"))
        if video is None:
            return self._err(400, "invalid-request", "Invalid request", "Either url or videoId is required.")
        if video != self.VIDEO_ID:
            return self._err(404, "transcript-unavailable", "Transcript unavailable", f"No transcript for {video}.")
        if "chunkSize" in q and not (q["chunkSize"].isdigit() and int(q["chunkSize"]) > 0):
            return self._err(400, "invalid-request", "Invalid request", "chunkSize must be a positive integer.")
        lang = q.get("lang") or "en"
        if lang not in self.transcripts:
            lang = "en"  # Supadata falls back to the first available language
        chunks = self.transcripts[lang]
        if q.get("text") == "true":
            content: Any = " ".join(c[0] for c in chunks)
        else:
            content = [{"text": t, "offset": o, "duration": d, "lang": lang} for t, o, d in chunks]
        return Reply(200, {"content": content, "lang": lang, "availableLangs": sorted(self.transcripts)})

    def _video(self, q: dict[str, str]) -> Reply:
        video = self._video_id(q.get("id"))
        if video is None:
            return self._err(400, "invalid-request", "Invalid request", "id is required.")
        if video != self.VIDEO_ID:
            return self._err(404, "not-found", "The requested item could not be found", f"video {video}")
        return Reply(
            200,
            {
                "id": video,
                "title": "Rick Astley - Never Gonna Give You Up (Official Music Video)",
                "description": "The official video.",
                "duration": 213,
                "channel": {"id": self.CHANNEL_ID, "name": "Rick Astley"},
                "tags": ["rick astley", "80s"],
                "thumbnail": f"https://i.ytimg.com/vi/{video}/hqdefault.jpg",
                "uploadDate": "2009-10-25T06:57:33.000Z",
                "viewCount": 1600000000,
                "likeCount": 18000000,
                "transcriptLanguages": sorted(self.transcripts),
            },
        )

    def _channel(self, q: dict[str, str]) -> Reply:
        channel = q.get("id")
        if not channel:
            return self._err(400, "invalid-request", "Invalid request", "id is required.")
        if channel not in (
            self.CHANNEL_ID,
            "@RickAstleyYT",
            f"https://www.youtube.com/channel/{self.CHANNEL_ID}",
        ):
            return self._err(404, "not-found", "The requested item could not be found", f"channel {channel}")
        return Reply(
            200,
            {
                "id": self.CHANNEL_ID,
                "name": "Rick Astley",
                "handle": "@RickAstleyYT",
                "description": "The official channel.",
                "subscriberCount": 4000000,
                "videoCount": 300,
                "viewCount": 2500000000,
                "thumbnail": "https://yt3.ggpht.com/rick.jpg",
                "banner": "https://yt3.ggpht.com/rick-banner.jpg",
            },
        )

    def _playlist(self, q: dict[str, str]) -> Reply:
        playlist = q.get("id")
        if not playlist:
            return self._err(400, "invalid-request", "Invalid request", "id is required.")
        if self.PLAYLIST_ID not in playlist:
            return self._err(404, "not-found", "The requested item could not be found", f"playlist {playlist}")
        return Reply(
            200,
            {
                "id": self.PLAYLIST_ID,
                "title": "Rick Astley - Greatest Hits",
                "description": "All the hits.",
                "videoCount": 25,
                "viewCount": 1000000,
                "lastUpdated": "2024-01-01T00:00:00.000Z",
                "channel": {"id": self.CHANNEL_ID, "name": "Rick Astley"},
            },
        )


# ------------------------------------------------------------------------------------------------
# Zep Cloud (api/v2): users, POST /graph (add data), POST /graph/search; "Authorization: Api-Key ...";
# errors as {"message": "..."}.
# ------------------------------------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z0-9']+")


class FakeZep(FakeServer):
    PREFIX = "/api/v2"
    MAX_DATA = 10_000

    def __init__(self, api_key: str = "z_FAKEKEY0123456789abcdef.zep") -> None:
        super().__init__()
        self.api_key = api_key
        self.users: dict[str, dict[str, Any]] = {}
        self.episodes: dict[str, list[dict[str, Any]]] = {}
        self.edges: dict[str, list[dict[str, Any]]] = {}

    @staticmethod
    def _err(status: int, message: str) -> Reply:
        return Reply(status, {"message": message})

    def handle(self, req: Recorded) -> Reply:
        if req.headers.get("authorization") != f"Api-Key {self.api_key}":
            return self._err(401, "unauthorized")
        if not req.path.startswith(self.PREFIX + "/"):
            return self._err(404, "not found")
        path = req.path[len(self.PREFIX) :]
        body = req.json if isinstance(req.json, dict) else None
        if req.method == "POST" and body is None:
            return self._err(400, "invalid JSON body")
        if path == "/users" and req.method == "POST":
            return self._create_user(body or {})
        if path.startswith("/users/") and req.method == "GET":
            user = self.users.get(path[len("/users/") :])
            return Reply(200, user) if user else self._err(404, "not found")
        if path == "/graph" and req.method == "POST":
            return self._add(body or {})
        if path == "/graph/search" and req.method == "POST":
            return self._search(body or {})
        return self._err(404, "not found")

    def _create_user(self, body: dict[str, Any]) -> Reply:
        user_id = body.get("user_id")
        if not isinstance(user_id, str) or not user_id:
            return self._err(400, "user_id is required")
        if user_id in self.users:
            return self._err(400, f"user {user_id} already exists")
        user = {
            "uuid": str(uuid.uuid4()),
            "user_id": user_id,
            "created_at": _now(),
            "email": body.get("email"),
            "first_name": body.get("first_name"),
            "last_name": body.get("last_name"),
            "metadata": body.get("metadata") or {},
        }
        self.users[user_id] = user
        return Reply(201, user)

    def _add(self, body: dict[str, Any]) -> Reply:
        user_id = body.get("user_id")
        if not isinstance(user_id, str) or not user_id:
            return self._err(400, "user_id or graph_id is required")
        if body.get("type") not in ("text", "json", "message"):
            return self._err(400, "type must be one of text, json, message")
        data = body.get("data")
        if not isinstance(data, str) or not data.strip():
            return self._err(400, "data is required")
        if len(data) > self.MAX_DATA:
            return self._err(400, f"data exceeds the maximum of {self.MAX_DATA} characters")
        if user_id not in self.users:
            return self._err(404, "user not found")
        episode = {
            "uuid": str(uuid.uuid4()),
            "content": data,
            "created_at": _now(),
            "source": body["type"],
            "source_description": body.get("source_description"),
            "processed": False,
        }
        self.episodes.setdefault(user_id, []).append(episode)
        self.edges.setdefault(user_id, []).append(
            {
                "uuid": str(uuid.uuid4()),
                "name": "RELATES_TO",
                "fact": data,
                "created_at": episode["created_at"],
                "valid_at": episode["created_at"],
                "invalid_at": None,
                "expired_at": None,
                "source_node_uuid": self.users[user_id]["uuid"],
                "target_node_uuid": str(uuid.uuid4()),
                "episodes": [episode["uuid"]],
            }
        )
        return Reply(202, episode)

    def _search(self, body: dict[str, Any]) -> Reply:
        user_id = body.get("user_id")
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            return self._err(400, "query is required")
        if len(query) > 400:
            return self._err(400, "query must be at most 400 characters")
        limit = body.get("limit", 10)
        if not isinstance(limit, int) or not 1 <= limit <= 50:
            return self._err(400, "limit must be between 1 and 50")
        scope = body.get("scope", "edges")
        if scope not in ("edges", "nodes", "episodes"):
            return self._err(400, "scope must be one of edges, nodes, episodes")
        reranker = body.get("reranker", "rrf")
        if reranker not in ("rrf", "mmr", "node_distance", "episode_mentions", "cross_encoder"):
            return self._err(400, f"unknown reranker {reranker}")
        for name in ("mmr_lambda", "min_score", "min_fact_rating"):
            value = body.get(name)
            if value is not None and (not isinstance(value, (int, float)) or not 0 <= value <= 1):
                return self._err(400, f"{name} must be between 0 and 1")
        if reranker == "node_distance" and not body.get("center_node_uuid"):
            return self._err(400, "center_node_uuid is required for the node_distance reranker")
        if not isinstance(user_id, str) or user_id not in self.users:
            return self._err(404, "user not found")
        words = {w.lower() for w in _WORD.findall(query)}
        scored = []
        for edge in self.edges.get(user_id, []):
            overlap = len(words & {w.lower() for w in _WORD.findall(edge["fact"])})
            if overlap:
                scored.append((overlap, edge))
        scored.sort(key=lambda pair: -pair[0])
        edges = [dict(e, score=round(s / max(1, len(words)), 3)) for s, e in scored[:limit]]
        if scope == "edges":
            return Reply(200, {"edges": edges})
        if scope == "nodes":
            names: dict[str, str] = {}
            for edge in edges:
                for word in _WORD.findall(edge["fact"]):
                    if word[:1].isupper() and word.lower() in words:
                        names.setdefault(word, edge["fact"])
            nodes = [
                {
                    "uuid": str(uuid.uuid4()),
                    "name": n,
                    "summary": f"Mentioned in: {f}",
                    "labels": ["Entity"],
                    "created_at": _now(),
                }
                for n, f in list(names.items())[:limit]
            ]
            return Reply(200, {"nodes": nodes})
        return Reply(200, {"episodes": self.episodes.get(user_id, [])[:limit]})
