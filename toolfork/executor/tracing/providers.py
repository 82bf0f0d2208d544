"""The global OpenTelemetry SDK providers, flushed when a command is about to end.

Why: the SDK shuts its providers down (exporting what they hold) from an ``atexit`` hook, which a
process that leaves by ``os._exit`` (``toolfork mcp serve`` on SIGTERM, so a stuck thread cannot hold
the exit up) never runs; the spans and metrics a batch processor or a periodic reader still holds would
be lost. A command calls ``flush()`` on its way out, after its Executor is closed (so the spans the
close ended are in): each global SDK provider exports what it holds. Nothing is imported when the SDK
is not: the check is a dictionary look-up.
"""

from __future__ import annotations

import contextlib
import sys

FLUSH_MS = 10_000  # what an exit waits at most for each provider's exporters (a collector that is down)

_SDK_PROVIDERS = (("opentelemetry.sdk.trace", "opentelemetry.trace", "get_tracer_provider", "TracerProvider"),
                  ("opentelemetry.sdk.metrics", "opentelemetry.metrics", "get_meter_provider", "MeterProvider"))


def flush() -> None:
    """Export what the global SDK tracer and meter providers hold (those that are SDK providers)."""
    for sdk_name, api_name, getter, kind in _SDK_PROVIDERS:
        sdk, api = sys.modules.get(sdk_name), sys.modules.get(api_name)
        if sdk is None or api is None:
            continue
        current = getattr(api, getter)()
        if isinstance(current, getattr(sdk, kind)):
            with contextlib.suppress(Exception):  # an exporter that fails must not fail the exit
                current.force_flush(FLUSH_MS)


__all__ = ["FLUSH_MS", "flush"]
