"""A sandboxed call's spans are data about that call: the host binds them to the call before any span
processor sees them.

Why: a sandboxed tool may be hostile, and it writes its SPANS frame itself (it can send anything its
worker can): the trace and span ids, the parents, the name, the scope and the timestamps are its to
choose. Exported as sent, they could place an ``execute_tool transfer_funds`` span under toolfork's
own scope in another tenant's trace. So the host keeps only what the spans say about the call's own
work, and fixes the rest from what it knows of the call::

    SPANS frame ──spandata.check──> checked spans (a malformed one: dropped, counted by tracing.host)
        ──bind(spans, call)──> trace id      := the call's trace
                               span id       := a new one, made by the host
                               parent        := the new id of a span of the same frame that ended after
                                                it (the tool's tree, never a cycle), else the call's
                                                ``execute_tool`` span
                               scope         := SCOPE (not toolfork's, whatever the tool named)
                               start, end,   := clamped into the call's start..end (as the host saw it)
                               event times
        ──spandata.build(the SDK's span limits)──> the host's span processors

The name, kind, status, attributes and events stay the tool's: data, within the SDK's limits. A warm
(trusted) call's spans are not rebound (see docs/observability.md); both kinds go through ``check``
and the limits.
"""

from __future__ import annotations

import random
from typing import NamedTuple

from toolfork.executor.tracing.spandata import Checked
from toolfork.executor.wire.callitem import TraceParent

SCOPE = "sandboxed-tool"  # the instrumentation scope of every span a sandboxed call sends


class CallWindow(NamedTuple):
    """What the host knows of a sandboxed call: its span (None: the call is not traced) and when it ran,
    in nanoseconds since the epoch."""

    trace: TraceParent | None
    start: int
    end: int


def _new_id(taken: set[int]) -> int:
    while True:
        span_id = random.getrandbits(64)
        if span_id and span_id not in taken:
            taken.add(span_id)
            return span_id


def bind(spans: list[Checked], call: CallWindow) -> list[Checked]:
    """``spans`` (in the order the tool's spans ended) rebound to ``call`` (see the module docstring);
    nothing when the call has no span to bind them to."""
    if call.trace is None:
        return []
    trace_id, call_span, _flags = call.trace
    lo, hi = call.start, max(call.start, call.end)
    taken = {call_span}
    later: dict[int, int] = {}  # a tool's span id -> the new id of a span that ended after this one
    out: list[Checked] = []
    for span in reversed(spans):  # from the last to end: a parent ends after its children
        new_id = _new_id(taken)
        parent = call_span if span.parent_id is None else later.get(span.parent_id, call_span)
        start = min(max(span.start, lo), hi)
        end = min(max(span.end, start), hi)
        events = [(name, min(max(at, start), end), attributes) for name, at, attributes in span.events]
        out.append(span._replace(trace_id=trace_id, span_id=new_id, parent_id=parent, start=start, end=end,
                                 events=events, scope=SCOPE, scope_version=None))
        later.setdefault(span.span_id, new_id)
    out.reverse()
    return out


__all__ = ["SCOPE", "CallWindow", "bind"]
