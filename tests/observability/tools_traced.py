"""Tools the observability tests run: they read their ``meta``, start spans of their own with the plain
OpenTelemetry API, count the threads of the process they run in, die and hang."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from opentelemetry import trace

from toolfork.tools import ToolRuntime, tool


@tool
def show_meta(runtime: ToolRuntime) -> str:
    """The call's meta, as JSON."""
    return json.dumps(dict(runtime.meta), sort_keys=True)


@tool
def poke_meta(runtime: ToolRuntime) -> str:
    """Try to change the call's meta."""
    try:
        runtime.meta["tenant"] = "mallory"  # type: ignore[index]
    except TypeError as exc:
        return f"refused: {type(exc).__name__}"
    return "changed"


def traced_body(label: str) -> str:
    """Start two nested spans with the plain OpenTelemetry API; report the threads this process runs."""
    tracer = trace.get_tracer("tests.observability")
    with tracer.start_as_current_span(f"outer {label}") as outer:
        outer.set_attribute("tool.pid", os.getpid())
        with tracer.start_as_current_span(f"inner {label}") as inner:
            inner.add_event("halfway", {"step": 1})
            inner.set_attribute("tool.list", [1, 2, 3])
    return json.dumps({"pid": os.getpid(), "threads": threading.active_count(),
                       "names": sorted(t.name for t in threading.enumerate())})


traced_work = tool(name="traced_work")(traced_body)


@tool
def hang(seconds: float) -> str:
    """Start a span, then sleep past the call's timeout."""
    with trace.get_tracer("tests.observability").start_as_current_span("hanging"):
        time.sleep(seconds)
    return "woke"


@tool
def die() -> str:
    """Kill the process the call runs in."""
    os.kill(os.getpid(), 9)
    return "unreachable"


@tool(inline=True)
def show_meta_inline(runtime: ToolRuntime) -> str:
    """The call's meta, as JSON, run in the host."""
    return json.dumps(dict(runtime.meta), sort_keys=True)


@tool(fresh_process=True)
def show_meta_fresh(runtime: ToolRuntime) -> str:
    """The call's meta, as JSON, in a process of its own."""
    return json.dumps(dict(runtime.meta), sort_keys=True)


@tool
def sdk_imported() -> bool:
    """Whether the OpenTelemetry SDK was imported in the process this worker was forked from."""
    return "opentelemetry.sdk.trace" in sys.modules


TOOLS = [show_meta, poke_meta, traced_work, hang, die, show_meta_inline, show_meta_fresh]
LANE_TOOLS = [show_meta, traced_work, hang, sdk_imported]  # every one fits toolfork run's line lane
