"""The global OpenTelemetry SDK providers, flushed when a command is about to end, within one deadline.

Why: the SDK shuts its providers down (exporting what they hold) from an ``atexit`` hook, which a
process that leaves by ``os._exit`` (``toolfork mcp serve`` on SIGTERM, so a stuck thread cannot hold
the exit up) never runs; the spans and metrics a batch processor or a periodic reader still holds would
be lost. A command calls ``flush()`` on its way out, after its Executor is closed (so the spans the
close ended are in): each global SDK provider exports what it holds. Nothing is imported when the SDK
is not: the check is a dictionary look-up.

Why a deadline: an exporter waits for its collector (the OTLP exporter: 10 s a try, and tries again),
and the SDK's own exit hooks join its export threads without a bound, so a collector that accepts and
never answers held a finished job's exit for half a minute. Every telemetry wait at a command's exit
shares one deadline, ``EXIT_BOUND_S`` from the first of them::

    flush()                      force_flush of each provider ─┐  in daemon threads, each waited for
    atexit (bound_at_exit())     shutdown of each provider    ─┴─ only until the one deadline; an
                                                                  export still stuck then is abandoned
"""

from __future__ import annotations

import atexit
import functools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

EXIT_BOUND_S = 3.0  # what a command's exit waits, in all, for its telemetry (a collector that is down or stuck)

_SDK_PROVIDERS = (("opentelemetry.sdk.trace", "opentelemetry.trace", "get_tracer_provider", "TracerProvider"),
                  ("opentelemetry.sdk.metrics", "opentelemetry.metrics", "get_meter_provider", "MeterProvider"),
                  ("opentelemetry.sdk._logs", "opentelemetry._logs", "get_logger_provider", "LoggerProvider"))
_deadline: list[float] = []  # set by the first wait at exit: every later one shares it


def _sdk_providers() -> list[Any]:
    """The global providers that are the SDK's (a dictionary look-up each when the SDK is not loaded)."""
    found = []
    for sdk_name, api_name, getter, kind in _SDK_PROVIDERS:
        sdk, api = sys.modules.get(sdk_name), sys.modules.get(api_name)
        if sdk is None or api is None or not hasattr(api, getter) or not hasattr(sdk, kind):
            continue
        current = getattr(api, getter)()
        if isinstance(current, getattr(sdk, kind)):
            found.append(current)
    return found


def _left() -> float:
    """Seconds left of the exit's one deadline (which starts now if nothing waited before)."""
    if not _deadline:
        _deadline.append(time.monotonic() + EXIT_BOUND_S)
    return max(0.0, _deadline[0] - time.monotonic())


def _bounded(steps: list[Callable[[], object]]) -> None:
    """Run ``steps`` side by side in daemon threads; wait for them until the deadline, not after."""
    threads = [threading.Thread(target=_quietly, args=(step,), name="toolfork-telemetry-exit", daemon=True)
               for step in steps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(_left())


def _quietly(step: Callable[[], object]) -> None:
    try:
        step()
    except Exception:  # an exporter that fails must not fail the exit
        pass


def flush() -> None:
    """Export what the global SDK providers hold, waiting at most until the exit's deadline."""
    providers = _sdk_providers()
    if providers:
        budget_ms = int(_left() * 1000)
        _bounded([functools.partial(p.force_flush, budget_ms) for p in providers])


def bound_at_exit() -> None:
    """Replace the SDK providers' own exit hooks (an unbounded shutdown) with one within the deadline."""
    providers = _sdk_providers()
    for provider in providers:
        atexit.unregister(provider.shutdown)
    if providers:
        atexit.register(_shutdown, providers)


def _shutdown(providers: list[Any]) -> None:
    _bounded([provider.shutdown for provider in providers])


__all__ = ["EXIT_BOUND_S", "bound_at_exit", "flush"]
