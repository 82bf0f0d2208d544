"""One call as the place it runs receives it: a single named value, built once in the host.

Why: the fields a worker, a Ray task or the sequential backend need to run a call (id, tool name,
arguments, effective timeout, the batch's context, the call's ``meta``, the trace parent) used to be
spelled out by position wherever a call was handed on. Now a ``Dispatch`` makes its ``CallItem`` once
(``Dispatch.item``) and every backend carries that value whole, as CPython's process pool carries its
``_CallItem``::

    Executor._dispatches ── Dispatch(call, tool, timeout, context, trace) ── .item ──> CallItem
        fork pool:   CALLS frame [CallItem, ...] ──pipe──> worker: run_item(CallItem)
        line lane:   the worker parses the raw line and makes the CallItem there
        Ray:         ray_task(CallItem, ...) in the task
        sequential:  run in the host from the same CallItem

A NamedTuple: it unpacks like the tuple it replaces (the worker's loop stays a tuple unpack) and the
pickle of a list of them names the class once per frame.

``trace`` is None when the host traces nothing (no OpenTelemetry SDK provider); else the call span's
``(trace_id, span_id, trace_flags)`` as ints, the parent of every span the tool starts where it runs.
"""

from __future__ import annotations

from typing import Any, NamedTuple

TraceParent = tuple[int, int, int]  # trace id, span id, trace flags: the call's span, as plain data


class CallItem(NamedTuple):
    """What a call needs where it runs (see the module docstring)."""

    id: str
    name: str
    arguments: dict[str, Any]
    timeout: float | None  # the effective timeout (None: unbounded)
    context: dict[str, Any] | None  # the batch's context snapshot (None: empty)
    meta: dict[str, str] | None = None  # ``ToolCall.meta`` (None: none)
    trace: TraceParent | None = None  # the call's span (None: not traced)


__all__ = ["CallItem", "TraceParent"]
