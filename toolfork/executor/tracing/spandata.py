"""Finished spans as plain data, and back: how a worker's spans cross to the host.

Why plain data: a sandboxed call's frames cross a data-only wire (``wire.dataonly``: None, bool, int up
to 64 bits, float, str, lists, dicts) and a tool can write anything into its worker's frames, so the
host rebuilds each span from checked fields only and drops one that is not the shape of a span.

    worker: ReadableSpan ── encode ──> {"name", "trace_id" (hex), "span_id", "parent_id", "start", "end",
                                        "kind", "status", "status_description", "attributes", "events",
                                        "scope", "scope_version"}
    host:   dict ── check ──> Checked (or None: not a span) ── build(resource, limits) ──> ReadableSpan

``check`` refuses what an exporter could not encode (a negative timestamp, an int past 64 bits, a
lone surrogate): one such span used to make the OTLP exporter drop the whole batch it was in, other
calls' spans included. ``build`` applies the SDK's span limits, so no processor sees more than the
host's own spans could hold.
"""

from __future__ import annotations

from typing import Any, NamedTuple


def encode(span: Any) -> dict[str, Any]:
    """A finished SDK span (``ReadableSpan``) as plain data."""
    ctx = span.context
    parent = span.parent
    scope = span.instrumentation_scope
    return {
        "name": span.name,
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "flags": int(ctx.trace_flags),
        "parent_id": None if parent is None else f"{parent.span_id:016x}",
        "start": span.start_time,
        "end": span.end_time,
        "kind": span.kind.value,
        "status": span.status.status_code.value,
        "status_description": span.status.description,
        "attributes": _attributes(span.attributes),
        "events": [[e.name, e.timestamp, _attributes(e.attributes)] for e in span.events],
        "scope": None if scope is None else scope.name,
        "scope_version": None if scope is None else scope.version,
    }


def _attributes(attributes: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        out[key] = list(value) if isinstance(value, (tuple, list)) else value
    return out


_INT64 = (-(1 << 63), (1 << 63) - 1)  # what OTLP carries as an int attribute
_TIME = (1 << 64) - 1  # a timestamp: nanoseconds since the epoch, as an unsigned 64-bit number


def _text(value: Any) -> bool:
    """A str every exporter can encode (a lone surrogate fails protobuf's UTF-8, and the batch with it)."""
    if type(value) is not str:
        return False
    if value.isascii():
        return True
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _scalar(value: Any) -> bool:
    kind = type(value)
    if kind is int:
        return _INT64[0] <= value <= _INT64[1]
    return kind is bool or kind is float or (kind is str and _text(value))


def _checked_attributes(value: Any) -> dict[str, Any] | None:
    if type(value) is not dict:
        return None
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not _text(key):
            return None
        if type(item) is list:
            if not all(_scalar(x) for x in item):
                return None
            out[key] = tuple(item)
        elif _scalar(item):
            out[key] = item
        else:
            return None
    return out


def _hex_id(value: Any, digits: int) -> int | None:
    if type(value) is not str or len(value) != digits:
        return None
    try:
        number = int(value, 16)
    except ValueError:
        return None
    return number or None


def _time(value: Any) -> bool:
    return type(value) is int and 0 <= value <= _TIME


class Checked(NamedTuple):
    """A span's fields, each checked (``check``); the host may rebind them (``tracing.confine``)."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    flags: int
    start: int
    end: int
    kind: int
    status: int
    description: str | None
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]]
    scope: str | None
    scope_version: str | None


def check(data: Any) -> Checked | None:
    """The fields ``data`` stands for, or None when it is not the shape of a span: a field of the wrong
    type, an id of zero, a timestamp that is not nanoseconds since the epoch or an end before its
    start, an int attribute past 64 bits, text no exporter can encode."""
    if type(data) is not dict:
        return None
    name: Any = data.get("name")
    start: Any = data.get("start")
    end: Any = data.get("end")
    trace_id, span_id = _hex_id(data.get("trace_id"), 32), _hex_id(data.get("span_id"), 16)
    parent_raw = data.get("parent_id")
    parent_id = None if parent_raw is None else _hex_id(parent_raw, 16)
    flags, kind, status = data.get("flags"), data.get("kind"), data.get("status")
    description = data.get("status_description")
    attributes = _checked_attributes(data.get("attributes"))
    scope, scope_version = data.get("scope"), data.get("scope_version")
    events_raw = data.get("events")
    if not _text(name) or not _time(start) or not _time(end) or end < start or trace_id is None \
            or span_id is None or (parent_raw is not None and parent_id is None) or type(flags) is not int \
            or not 0 <= flags <= 255 or kind not in _KINDS or status not in _STATUS_CODES \
            or not (description is None or _text(description)) or attributes is None \
            or not (scope is None or _text(scope)) or not (scope_version is None or _text(scope_version)) \
            or type(events_raw) is not list:
        return None
    events = []
    for item in events_raw:
        if type(item) is not list or len(item) != 3 or not _text(item[0]) or not _time(item[1]):
            return None
        event_attributes = _checked_attributes(item[2])
        if event_attributes is None:
            return None
        events.append((item[0], item[1], event_attributes))
    return Checked(name, trace_id, span_id, parent_id, flags, start, end, kind, status, description, attributes,
                   events, scope, scope_version)


def build(span: Checked, resource: Any, limits: Any) -> Any:
    """The ``ReadableSpan`` of checked fields, with the host's ``resource``, cut to the SDK's span
    ``limits`` (a ``SpanLimits``: attribute count and length, events and their attributes) as the SDK
    cuts the spans it makes, the latest kept: an exporter sees what the host's own spans could hold,
    and how much was cut (cut here, not by the SDK's containers, which log a line per item dropped)."""
    Event, ReadableSpan, InstrumentationScope, SpanContext, SpanKind, TraceFlags, Status, StatusCode, \
        BoundedAttributes, BoundedList = _SDK or _sdk_classes()

    def bounded(attributes: dict[str, Any], most: int | None, longest: int | None) -> Any:
        cut = 0 if most is None else max(0, len(attributes) - most)
        if cut:
            attributes = dict(list(attributes.items())[cut:])
        out = BoundedAttributes(most, attributes, immutable=True, max_value_len=longest)
        out.dropped = cut
        return out

    kept = span.events if limits.max_events is None else span.events[max(0, len(span.events) - limits.max_events):]
    events = BoundedList(limits.max_events)
    for name, timestamp, attributes in kept:
        events.append(Event(name, bounded(attributes, limits.max_event_attributes, limits.max_attribute_length),
                            timestamp))
    events.dropped = len(span.events) - len(kept)
    trace_flags = TraceFlags(span.flags)
    context = SpanContext(span.trace_id, span.span_id, is_remote=False, trace_flags=trace_flags)
    parent = None if span.parent_id is None else SpanContext(span.trace_id, span.parent_id, is_remote=True,
                                                             trace_flags=trace_flags)
    return ReadableSpan(
        name=span.name, context=context, parent=parent, resource=resource, events=events,
        attributes=bounded(span.attributes, limits.max_span_attributes, limits.max_span_attribute_length),
        kind=SpanKind(span.kind), status=Status(StatusCode(span.status), span.description),
        start_time=span.start, end_time=span.end,
        instrumentation_scope=None if span.scope is None else InstrumentationScope(span.scope, span.scope_version))


def decode(data: Any, resource: Any, limits: Any = None) -> Any:
    """The ``ReadableSpan`` ``data`` stands for (with the host's ``resource``, cut to ``limits``: the
    SDK's defaults when None), or None when it is not the shape of one."""
    checked = check(data)
    if checked is None:
        return None
    return build(checked, resource, limits if limits is not None else default_limits())


def default_limits() -> Any:
    from opentelemetry.sdk.trace import SpanLimits

    return SpanLimits()


def _sdk_classes() -> tuple[Any, ...]:
    """The SDK's classes a span is rebuilt with, imported once (the host has the SDK: it traces)."""
    from opentelemetry.attributes import BoundedAttributes
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util import BoundedList
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
    from opentelemetry.trace.status import Status, StatusCode

    _SDK[:] = [Event, ReadableSpan, InstrumentationScope, SpanContext, SpanKind, TraceFlags, Status, StatusCode,
               BoundedAttributes, BoundedList]
    return tuple(_SDK)


_SDK: list[Any] = []
_KINDS = frozenset(range(5))  # SpanKind: INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER
_STATUS_CODES = frozenset(range(3))  # StatusCode: UNSET, OK, ERROR

__all__ = ["Checked", "build", "check", "decode", "default_limits", "encode"]
