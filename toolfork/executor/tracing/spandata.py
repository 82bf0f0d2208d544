"""Finished spans as plain data, and back: how a worker's spans cross to the host.

Why plain data: a sandboxed call's frames cross a data-only wire (``wire.dataonly``: None, bool, int up
to 64 bits, float, str, lists, dicts) and a tool can write anything into its worker's frames, so the
host rebuilds each span from checked fields only and drops one that is not the shape of a span.

    worker: ReadableSpan ── encode ──> {"name", "trace_id" (hex), "span_id", "parent_id", "start", "end",
                                        "kind", "status", "status_description", "attributes", "events",
                                        "scope", "scope_version"}
    host:   dict ── decode(resource) ──> ReadableSpan (or None: not a span)
"""

from __future__ import annotations

from typing import Any

_SCALARS = (str, bool, int, float)


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


def _checked_attributes(value: Any) -> dict[str, Any] | None:
    if type(value) is not dict:
        return None
    out: dict[str, Any] = {}
    for key, item in value.items():
        if type(key) is not str:
            return None
        if type(item) is list:
            if not all(type(x) in _SCALARS for x in item):
                return None
            out[key] = tuple(item)
        elif type(item) in _SCALARS:
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


def decode(data: Any, resource: Any) -> Any:
    """The ``ReadableSpan`` ``data`` stands for (with the host's ``resource``), or None when it is not
    the shape of one."""
    if type(data) is not dict:
        return None
    name, start, end = data.get("name"), data.get("start"), data.get("end")
    trace_id, span_id = _hex_id(data.get("trace_id"), 32), _hex_id(data.get("span_id"), 16)
    parent_raw = data.get("parent_id")
    parent_id = None if parent_raw is None else _hex_id(parent_raw, 16)
    flags, kind, status = data.get("flags"), data.get("kind"), data.get("status")
    description = data.get("status_description")
    attributes = _checked_attributes(data.get("attributes"))
    scope, scope_version = data.get("scope"), data.get("scope_version")
    events_raw = data.get("events")
    if type(name) is not str or type(start) is not int or type(end) is not int or trace_id is None \
            or span_id is None or (parent_raw is not None and parent_id is None) or type(flags) is not int \
            or not 0 <= flags <= 255 or kind not in _KINDS or status not in _STATUS_CODES \
            or not (description is None or type(description) is str) or attributes is None \
            or not (scope is None or type(scope) is str) or not (scope_version is None or type(scope_version) is str) \
            or type(events_raw) is not list:
        return None
    Event, ReadableSpan, InstrumentationScope, SpanContext, SpanKind, TraceFlags, Status, StatusCode = \
        _SDK or _sdk_classes()
    events = []
    for item in events_raw:
        if type(item) is not list or len(item) != 3 or type(item[0]) is not str or type(item[1]) is not int:
            return None
        event_attributes = _checked_attributes(item[2])
        if event_attributes is None:
            return None
        events.append(Event(item[0], event_attributes, item[1]))
    trace_flags = TraceFlags(flags)
    context = SpanContext(trace_id, span_id, is_remote=False, trace_flags=trace_flags)
    parent = None if parent_id is None else SpanContext(trace_id, parent_id, is_remote=True, trace_flags=trace_flags)
    return ReadableSpan(
        name=name, context=context, parent=parent, resource=resource, attributes=attributes, events=events,
        kind=SpanKind(kind), status=Status(StatusCode(status), description), start_time=start, end_time=end,
        instrumentation_scope=None if scope is None else InstrumentationScope(scope, scope_version))


def _sdk_classes() -> tuple[Any, ...]:
    """The SDK's classes a span is rebuilt with, imported once (the host has the SDK: it traces)."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
    from opentelemetry.trace.status import Status, StatusCode

    _SDK[:] = [Event, ReadableSpan, InstrumentationScope, SpanContext, SpanKind, TraceFlags, Status, StatusCode]
    return tuple(_SDK)


_SDK: list[Any] = []
_KINDS = frozenset(range(5))  # SpanKind: INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER
_STATUS_CODES = frozenset(range(3))  # StatusCode: UNSET, OK, ERROR

__all__ = ["decode", "encode"]
