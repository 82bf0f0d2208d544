"""The standard ``OTEL_*`` environment variables: the commands that run tools (``toolfork run``,
``toolfork worker``, ``toolfork mcp serve``) set OpenTelemetry up from them, as ``opentelemetry-instrument``
would, before their Executor is built.

    OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER / OTEL_LOGS_EXPORTER set (and not "none")?
      no ─> nothing: the SDK is not imported, the command starts as fast as without OpenTelemetry
      yes ─> the SDK's own configurator ─> global TracerProvider, MeterProvider, LoggerProvider with the
             exporters, resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) and sampler the variables name
    the Executor traces and meters through them (toolfork.executor.tracing, toolfork.executor.metering)
    on the way out, also after SIGINT/SIGTERM: toolfork.executor.tracing.providers.flush()

Why the SDK's configurator (``opentelemetry.sdk._configuration._OTelSDKConfigurator``) and not our own
reading of the variables: it is what ``opentelemetry-instrument`` runs and what every distro
(``opentelemetry-distro``) subclasses, so each variable means here what it means there, exporters are
found by their entry-point names (``otlp``, ``otlp_proto_http``, ``console``, ...), and what a later SDK
adds works without us. Its module is private by name; the class is the SDK's named extension point.

When it cannot run (no SDK, an exporter that is not installed, a setting the SDK refuses such as
``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT=-5``) the command says why on stderr, naming the setting, and goes on
without telemetry: a job is not stopped by its telemetry. Nor is it held up at its exit: every wait for
an exporter there shares one deadline (``providers.EXIT_BOUND_S``, see ``bound_at_exit``). Already
configured (the command runs under ``opentelemetry-instrument``): nothing is configured twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

from toolfork.commands._loading import UsageError
from toolfork.commands._terminal import escape
from toolfork.executor.tracing.providers import bound_at_exit

SIGNALS = ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER")


def asked() -> list[str]:
    """The ``OTEL_*_EXPORTER`` variables set to something other than ``none``."""
    return [name for name in SIGNALS if os.environ.get(name, "").strip().lower() not in ("", "none")]


def configure(command: str, metrics_taken: bool = False) -> bool:
    """Set the SDK up from the ``OTEL_*`` variables when they ask for it; whether it was. With
    ``metrics_taken`` (``--metrics-port`` set the MeterProvider already), ``OTEL_METRICS_EXPORTER`` is
    a usage error: both would decide where the metrics go."""
    names = asked()
    if not names:
        return False
    if metrics_taken and "OTEL_METRICS_EXPORTER" in names:
        raise UsageError("--metrics-port and OTEL_METRICS_EXPORTER both say where the metrics go: use one")
    try:
        from opentelemetry import trace
        from opentelemetry.sdk._configuration import _OTelSDKConfigurator
    except ImportError as exc:
        _unset(command, names, f"the OpenTelemetry SDK is not installed ({exc}; pip install 'toolfork[otlp]')")
        return False
    except Exception as exc:  # the SDK refuses a setting as it loads (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT=-5)
        _unset(command, names, str(exc) or type(exc).__name__)
        return False
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        bound_at_exit()
        return False  # configured already (opentelemetry-instrument): its set-up stands
    try:
        with _quiet_meter_override() if metrics_taken else contextlib.nullcontext():
            _OTelSDKConfigurator().configure()
    except Exception as exc:  # an exporter that is not installed, a bad OTLP protocol, a bad setting, ...
        _unset(command, names, str(exc) or type(exc).__name__)
        bound_at_exit()  # a provider it set before failing stays (the API sets each once): bounded too
        return False
    bound_at_exit()
    return True



def _unset(command: str, names: list[str], reason: str) -> None:
    print(f"toolfork {command}: warning: {', '.join(names)} set, but OpenTelemetry could not be set up from "
          f"them: {escape(reason)}; running without it", file=sys.stderr, flush=True)


class _DropMeterOverride(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "MeterProvider is not allowed" not in record.getMessage()


@contextlib.contextmanager
def _quiet_meter_override() -> Iterator[None]:
    """``--metrics-port``'s MeterProvider stays; the configurator's attempt to replace it is not news."""
    logger = logging.getLogger("opentelemetry.metrics._internal")
    drop = _DropMeterOverride()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


__all__ = ["SIGNALS", "asked", "configure"]
