"""The host's OpenTelemetry SDK, as a user sets it up: a global TracerProvider (once per process, as the
API allows) and, per test, an in-memory exporter behind a SimpleSpanProcessor (and a BatchSpanProcessor,
whose exporter thread must never run in a worker)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def sdk_provider() -> TracerProvider:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    return provider


def _exporting(with_batch: bool) -> Iterator[InMemorySpanExporter]:
    provider = sdk_provider()
    exporter = InMemorySpanExporter()
    processors = [SimpleSpanProcessor(exporter)]
    if with_batch:
        processors.append(BatchSpanProcessor(InMemorySpanExporter(), schedule_delay_millis=50))
    for processor in processors:
        provider.add_span_processor(processor)
    try:
        yield exporter
    finally:
        for processor in processors:
            processor.shutdown()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The host's spans, exported in memory; a BatchSpanProcessor runs beside (its thread in the host)."""
    yield from _exporting(with_batch=True)


@pytest.fixture
def simple_spans() -> Iterator[InMemorySpanExporter]:
    """The host's spans, with no processor thread (a sandbox's probe forks a child that must run one thread)."""
    yield from _exporting(with_batch=False)
