"""One call as the place it runs receives it: a single value, built once in the host.

Why: the fields a worker, a Ray task or the sequential backend need to run a call (id, tool name,
arguments, effective timeout, the batch's context, the call's ``meta``, the trace parent) used to be
spelled out by position wherever a call was handed on. Now a ``Dispatch`` makes its ``CallItem`` once
(``Dispatch.item``) and every backend carries that value whole, as CPython's process pool carries its
``_CallItem``::

    CallBook.admit ── Dispatch(call, tool, timeout, context, trace) ── .item() ──> CallItem
        fork pool:   CALLS frame [CallItem, ...] ──pipe──> worker._serve: one unpack, then the call
        line lane:   the worker parses the raw line and makes the same fields there
        Ray:         ray_task.run_call(..., CallItem, ...) in the Ray worker
        sequential, inline: the Dispatch itself, in the host (nothing crosses)

A plain tuple, typed and built in one place (``Dispatch.item``), unpacked in one statement where the
call runs: a NamedTuple would say the same by name, but pickles ten times slower (its
``__getnewargs__`` is Python code run per call) and this is the hot path of every call.

``trace`` is None when the host traces nothing (no OpenTelemetry SDK provider); else the call span's
``(trace_id, span_id, trace_flags)`` as ints, the parent of every span the tool starts where it runs.
"""

from __future__ import annotations

from typing import Any

TraceParent = tuple[int, int, int]  # trace id, span id, trace flags: the call's span, as plain data


#: What a call needs where it runs, in this order (see the module docstring).
CallItem = tuple[
    str,  # id
    str,  # name: the tool's
    dict[str, Any],  # arguments
    float | None,  # the effective timeout (None: unbounded)
    dict[str, Any] | None,  # the batch's context snapshot (None: empty)
    dict[str, str] | None,  # ``ToolCall.meta`` (None: none)
    TraceParent | None,  # the call's span (None: not traced)
]
FIELDS = ("id", "name", "arguments", "timeout", "context", "meta", "trace")


__all__ = ["FIELDS", "CallItem", "TraceParent"]
