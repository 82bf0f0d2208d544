"""A tiny OTLP/HTTP receiver (what a collector is to a command whose ``OTEL_*`` variables point at it):
it takes the protobuf ``ExportTraceServiceRequest`` / ``ExportMetricsServiceRequest`` bodies the SDK's
``otlp_proto_http`` exporters POST to ``/v1/traces`` and ``/v1/metrics``, and keeps them decoded.

    command (OTEL_TRACES_EXPORTER=otlp_proto_http) ── POST /v1/traces ──> Receiver.spans()
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    trace_state: str
    attributes: dict[str, Any]
    status_code: int
    service: str


class Receiver:
    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.lock = threading.Lock()
        self.url = ""

    def env(self) -> dict[str, str]:
        """The ``OTEL_*`` variables that send a command's traces and metrics here."""
        return {"OTEL_TRACES_EXPORTER": "otlp_proto_http", "OTEL_METRICS_EXPORTER": "otlp_proto_http",
                "OTEL_EXPORTER_OTLP_ENDPOINT": self.url, "OTEL_SERVICE_NAME": "toolfork-under-test",
                "OTEL_LOGS_EXPORTER": "none"}

    def spans(self) -> list[Span]:
        with self.lock:
            requests = list(self.traces)
        out = []
        for request in requests:
            for rs in request.resource_spans:
                service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), "")
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.append(Span(s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                                        s.trace_state, {a.key: _value(a.value) for a in s.attributes},
                                        s.status.code, service))
        return out

    def metric_points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """The data points of the metric ``name`` received so far: (attributes, the point)."""
        with self.lock:
            requests = list(self.metrics)
        points: list[tuple[dict[str, Any], Any]] = []
        for request in requests:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        if m.name != name:
                            continue
                        kind = m.WhichOneof("data")
                        for p in getattr(m, kind).data_points:
                            points.append(({a.key: _value(a.value) for a in p.attributes}, p))
        return points

    def wait_for(self, predicate: Any, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"not received in {timeout} s: {[s.name for s in self.spans()]}"
            time.sleep(0.05)


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class _Handler(BaseHTTPRequestHandler):
    receiver: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        if self.path == "/v1/traces":
            request: Any = ExportTraceServiceRequest()
            request.ParseFromString(body)
            with self.receiver.lock:
                self.receiver.traces.append(request)
        elif self.path == "/v1/metrics":
            request = ExportMetricsServiceRequest()
            request.ParseFromString(body)
            with self.receiver.lock:
                self.receiver.metrics.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    handler = type("Handler", (_Handler,), {"receiver": receiver})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
