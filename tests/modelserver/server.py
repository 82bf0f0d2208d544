"""A scripted stand-in for the Anthropic and OpenAI model APIs on 127.0.0.1.

The agent's tests talk to it through the real SDKs by base URL, so the provider code under test is
exactly the code users run; only the model's choices are scripted. The server records every
request, checks the rules the real APIs enforce (a 400 names the broken rule), and shuts down without
leaving a thread behind, even with keep-alive connections or a delayed turn in flight.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from . import anthropic_wire, openai_chat_wire, openai_responses_wire
from .common import new_id
from .recorded import RecordedRequest
from .script import Answer, ErrorTurn, ScriptItem, Turn
from .wire import WireFormat

WIRES: dict[str, WireFormat] = {
    w.path: w for w in (anthropic_wire.WIRE, openai_chat_wire.WIRE, openai_responses_wire.WIRE)
}

_EXHAUSTED = object()
_SEND_ERRORS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class ScriptedModelServer:
    """Serves scripted turns over the three model APIs; see tests/modelserver/README.md.

    `strict=True` (the default) answers 400 in the API's error shape when a request breaks a rule the
    real API enforces (e.g. a tool call without its result); such a request consumes no turn and is
    reported by `assert_exhausted()`.
    """

    def __init__(self, *, strict: bool = True) -> None:
        self.strict = strict
        self._lock = threading.Condition()
        self._queue: deque[ScriptItem] = deque()
        self._requests: list[RecordedRequest] = []
        self._failures: list[str] = []
        self._closing = threading.Event()
        self._handlers: dict[threading.Thread, socket.socket] = {}
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------------------------------

    def start(self) -> ScriptedModelServer:
        if self._httpd is not None:
            raise RuntimeError("ScriptedModelServer is already running")
        if self._closing.is_set():
            raise RuntimeError("ScriptedModelServer cannot be restarted after close(); make a new one")
        self._httpd = _HTTPServer(("127.0.0.1", 0), self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"ScriptedModelServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, cut open connections, interrupt delays, and join every thread."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            self._closing.set()
            return
        self._closing.set()
        httpd.shutdown()
        with self._lock:
            handlers = dict(self._handlers)
        for conn in handlers.values():
            _shutdown(conn)
        httpd.server_close()
        thread.join()
        for handler in handlers:
            handler.join(timeout=10)
        self._httpd = None
        stuck = [t.name for t in handlers if t.is_alive()]
        if stuck:
            raise RuntimeError(f"ScriptedModelServer: handler threads did not stop: {stuck}")

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("ScriptedModelServer is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """For `anthropic.Anthropic(base_url=...)`; the OpenAI SDK wants `openai_base_url`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    # ---- script and records ----------------------------------------------------------------------

    def script(self, items: Iterable[ScriptItem]) -> None:
        """Append turns; each model request consumes the next one, whatever its API flavour."""
        new = list(items)
        for i, item in enumerate(new):
            if not isinstance(item, (Turn, ErrorTurn)) and not callable(item):
                raise TypeError(
                    f"script item {i} must be a Turn, an ErrorTurn or a callable(request) -> Turn, "
                    f"got {type(item).__name__}"
                )
        with self._lock:
            self._queue.extend(new)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def failures(self) -> list[str]:
        """Server-side problems: exhausted script, rejected requests, dynamic turns that raised."""
        with self._lock:
            return list(self._failures)

    def assert_exhausted(self) -> None:
        """Raise AssertionError unless every turn was used and no request failed server-side."""
        with self._lock:
            problems = list(self._failures)
            if self._queue:
                problems.insert(0, f"{len(self._queue)} scripted turn(s) were never requested")
        if problems:
            raise AssertionError("scripted model server: " + "; ".join(problems))

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until `count` requests have arrived, for tests that drive the client from a thread."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._requests) >= count, timeout):
                raise AssertionError(f"expected {count} model request(s), got {len(self._requests)}")
            return list(self._requests)

    # ---- request handling (runs on handler threads) ----------------------------------------------

    def _register(self, thread: threading.Thread, conn: socket.socket) -> None:
        with self._lock:
            self._handlers[thread] = conn
        if self._closing.is_set():
            _shutdown(conn)

    def _unregister(self, thread: threading.Thread) -> None:
        with self._lock:
            self._handlers.pop(thread, None)

    def _fail(self, message: str) -> None:
        with self._lock:
            self._failures.append(message)

    def _handle(self, handler: _Handler) -> None:
        path = urlsplit(handler.path).path
        raw = handler.rfile.read(int(handler.headers.get("content-length") or 0))
        wire = WIRES.get(path)
        if wire is None:
            self._fail(f"request to unknown endpoint POST {path}")
            message = f"unknown endpoint POST {path}; served: {', '.join(sorted(WIRES))}"
            _send_json(handler, 404, {"error": {"type": "not_found_error", "message": message}}, {})
            return
        rejection: str | None = None
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body, rejection = raw.decode("utf-8", "replace"), "request body is not valid JSON"
        if rejection is None and not isinstance(body, dict):
            rejection = "request body must be a JSON object"
        if rejection is None and self.strict:
            rejection = wire.validate(body)
        stream = isinstance(body, dict) and body.get("stream") is True
        headers = {k.lower(): v for k, v in handler.headers.items()}
        record = RecordedRequest(wire.api, path, headers, body, stream, wire, rejection=rejection)
        with self._lock:
            self._requests.append(record)
            number = len(self._requests)
            item: object = None if rejection else (self._queue.popleft() if self._queue else _EXHAUSTED)
            self._lock.notify_all()
        answer = self._answer_for(item, record, number)
        self._send(handler, wire, record, answer)

    def _answer_for(self, item: object, record: RecordedRequest, number: int) -> Answer:
        where = f"request #{number} ({record.api})"
        if record.rejection is not None:
            self._fail(f"{where} rejected with 400: {record.rejection}")
            return ErrorTurn(400, record.rejection, should_retry=False)
        if item is _EXHAUSTED:
            self._fail(f"{where}: script exhausted")
            return ErrorTurn(500, f"script exhausted: no scripted turn left for {where}", should_retry=False)
        if isinstance(item, (Turn, ErrorTurn)):
            return item
        try:
            answer = item(record)  # type: ignore[operator]
        except Exception as exc:
            self._fail(f"{where}: dynamic turn raised {type(exc).__name__}: {exc}")
            return ErrorTurn(500, f"dynamic turn raised {type(exc).__name__}: {exc}", should_retry=False)
        if not isinstance(answer, (Turn, ErrorTurn)):
            self._fail(f"{where}: dynamic turn returned {type(answer).__name__}, not Turn/ErrorTurn")
            return ErrorTurn(500, "dynamic turn returned neither Turn nor ErrorTurn", should_retry=False)
        return answer

    def _send(self, handler: _Handler, wire: WireFormat, record: RecordedRequest, answer: Answer) -> None:
        if answer.delay and self._closing.wait(answer.delay):
            handler.close_connection = True
            return
        body = record.body if isinstance(record.body, dict) else {}
        try:
            if isinstance(answer, ErrorTurn) and not (answer.mid_stream and record.stream):
                record.status = answer.status
                extra: dict[str, str] = {}
                if answer.retry_after is not None:
                    extra["retry-after"] = f"{answer.retry_after:g}"
                if answer.should_retry is not None:
                    extra["x-should-retry"] = "true" if answer.should_retry else "false"
                _send_json(handler, answer.status, wire.error_body(answer), extra, wire.request_id_header)
            elif isinstance(answer, ErrorTurn):
                record.status = 200
                _send_stream(handler, list(wire.stream_error(answer, body)), wire.request_id_header)
            elif record.stream:
                record.status = 200
                _send_stream(handler, list(wire.stream(answer, body)), wire.request_id_header)
            else:
                record.status = 200
                _send_json(handler, 200, wire.respond(answer, body), {}, wire.request_id_header)
        except _SEND_ERRORS:
            handler.close_connection = True  # the client gave up (timeout); nothing left to tell it


class _HTTPServer(ThreadingHTTPServer):
    """Tracks each handler thread with its socket so close() can cut keep-alive reads and join it."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], owner: ScriptedModelServer) -> None:
        self.owner = owner
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._run, args=(request, client_address), name="ScriptedModelServer-handler", daemon=True
        )
        self.owner._register(thread, request)
        thread.start()

    def _run(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            self.owner._unregister(threading.current_thread())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect
    timeout = 60  # an idle keep-alive connection ends on its own even if close() is never called
    server: _HTTPServer

    def do_POST(self) -> None:
        self.server.owner._handle(self)

    def do_GET(self) -> None:
        _send_json(self, 404, {"error": {"type": "not_found_error", "message": "only POST is served"}}, {})

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the records are the log; stderr noise would bury test output


def _shutdown(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by its handler


def _send_json(
    handler: BaseHTTPRequestHandler,
    status: int,
    payload: Any,
    extra: dict[str, str],
    request_id_header: str = "x-request-id",
) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    handler.send_header(request_id_header, new_id("req_"))
    for name, value in extra.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


def _send_stream(handler: BaseHTTPRequestHandler, events: list[bytes], request_id_header: str) -> None:
    """SSE over chunked encoding, one chunk per event, so clients see events arrive separately."""
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream; charset=utf-8")
    handler.send_header("cache-control", "no-cache")
    handler.send_header("transfer-encoding", "chunked")
    handler.send_header(request_id_header, new_id("req_"))
    handler.end_headers()
    for event in events:
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
    handler.wfile.write(b"0\r\n\r\n")
