"""``--metrics-port``: a long-running command (``toolfork worker``, ``toolfork mcp serve``) serves its
metrics for Prometheus to scrape.

    Executor ──(toolfork.executor.metering: OpenTelemetry instruments)──> MeterProvider (the SDK's)
        └─ PrometheusMetricReader ──> prometheus_client's registry ──> http://HOST:PORT/metrics

The command sets the global MeterProvider (OpenTelemetry SDK, with the Prometheus reader of
``opentelemetry-exporter-prometheus``) before it builds its Executor, so the Executor's instruments are
made on it; it starts the HTTP server after the Executor is built, so no worker inherits its socket.
A port that cannot be listened on is a usage error naming the address and the reason.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from toolfork.commands._loading import UsageError
from toolfork.executor.backends.host_fds import host_only, release

DEFAULT_HOST = "127.0.0.1"


def add_metrics_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metrics-port", type=_port, default=None, metavar="PORT",
                        help="serve Prometheus metrics at http://HOST:PORT/metrics (port 0: any free port; the "
                             "URL is printed on stderr); needs the 'prometheus' extra")
    parser.add_argument("--metrics-host", default=None, metavar="HOST",
                        help=f"the address --metrics-port listens on (default {DEFAULT_HOST})")


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 0 to 65535, got {text!r}")
    return int(text)


class MetricsEndpoint:
    """The command's metrics: ``prepare`` before the Executor is built, ``start`` after, ``close`` at the end."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._provider: Any = None
        self._server: Any = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MetricsEndpoint | None:
        """None without ``--metrics-port``; ``--metrics-host`` alone is a usage error."""
        if args.metrics_port is None:
            if args.metrics_host is not None:
                raise UsageError("--metrics-host needs --metrics-port")
            return None
        return cls(args.metrics_host or DEFAULT_HOST, args.metrics_port)

    def prepare(self) -> None:
        """Set the global MeterProvider, with a reader Prometheus scrapes (before the Executor is built)."""
        from toolfork._extras import import_optional

        for module in ("prometheus_client", "opentelemetry.sdk.metrics", "opentelemetry.exporter.prometheus"):
            import_optional(module, "--metrics-port")
        from opentelemetry import metrics
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

        from toolfork.executor.metering import SECONDS_BUCKETS
        current = metrics.get_meter_provider()
        if type(current).__name__ not in ("_ProxyMeterProvider", "NoOpMeterProvider"):
            raise UsageError("--metrics-port: a MeterProvider is configured already in this process (its readers "
                             "decide where metrics go); leave out --metrics-port or that configuration")
        # The histograms' buckets in seconds on every SDK version (older ones ignore the instruments' advice).
        seconds = View(instrument_name="toolfork.call.*",
                       aggregation=ExplicitBucketHistogramAggregation(boundaries=SECONDS_BUCKETS))
        self._provider = MeterProvider(metric_readers=[PrometheusMetricReader()], views=[seconds])
        metrics.set_meter_provider(self._provider)

    def start(self, command: str) -> None:
        """Listen (after the Executor is built); says where on stderr."""
        from prometheus_client import start_http_server

        try:
            started = start_http_server(self.port, addr=self.host)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise UsageError(f"--metrics-port: cannot listen on {self.host}:{self.port}: {reason}") from None
        server = started[0] if isinstance(started, tuple) else None
        if server is not None:
            self._server = server
            self.port = server.server_port
            host_only(server.fileno())
        host = f"[{self.host}]" if ":" in self.host else self.host
        print(f"toolfork {command}: metrics at http://{host}:{self.port}/metrics", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._server is not None:
            release(self._server.fileno())
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._provider is not None:
            self._provider.shutdown()
            self._provider = None


__all__ = ["DEFAULT_HOST", "MetricsEndpoint", "add_metrics_arguments"]
