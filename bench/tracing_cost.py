"""What a call costs with tracing off, with tracing on, and what the OpenTelemetry SDK itself costs per
span, on the executor's hot path (fork mode, trivial calls).

Rows: ``tiny`` (a batch of 200 trivial calls, per call), ``small`` (a batch of 4, per batch) and
``submit`` (200 single calls through ``submit``, per call). Modes: ``off`` (the SDK not imported: what
every user without OpenTelemetry gets), ``on-bare`` (an SDK TracerProvider with a SimpleSpanProcessor
into an in-memory exporter: one span per call, made in the host), ``on`` (the same, and the tool starts
one span of its own in the worker, shipped back and exported in the host), ``sdk`` (the SDK alone:
start and end one span with that same processor, no executor; and the span the executor makes, with
its six attributes). Each number is the best of ``--rounds``
rounds (the machine is shared: the minimum is the steadiest). Run each mode in a process of its own,
as tracing off means "the SDK never imported"::

    PYTHONPATH=. python bench/tracing_cost.py off
    PYTHONPATH=. python bench/tracing_cost.py on-bare
    PYTHONPATH=. python bench/tracing_cost.py on
    PYTHONPATH=. python bench/tracing_cost.py sdk

Against another tree (the base commit), point PYTHONPATH there and run ``off``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any


def _setup_sdk() -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


_TOOL_SPAN = [False]


def trivial(x: int) -> int:
    """Return x (in mode ``on``, inside a span of the tool's own)."""
    if _TOOL_SPAN[0]:
        from opentelemetry import trace

        with trace.get_tracer("bench").start_as_current_span("tool work"):
            return x
    return x


def _best(rounds: int, run: Any) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["off", "on", "on-bare", "sdk"])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    exporter = _setup_sdk() if args.mode != "off" else None
    _TOOL_SPAN[0] = args.mode == "on"
    if args.mode == "sdk":
        from opentelemetry import trace

        tracer = trace.get_tracer("bench")
        n = 2000

        def spans() -> None:
            for _ in range(n):
                tracer.start_span("execute_tool trivial", attributes={"gen_ai.tool.name": "trivial"}).end()
            exporter.clear()

        def call_spans() -> None:  # the span the executor makes for a call: its attributes, set as it sets them
            for i in range(n):
                span = tracer.start_span("execute_tool trivial", start_time=time.time_ns(), attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "trivial",
                    "gen_ai.tool.call.id": str(i)})
                span.set_attributes({"toolfork.call.status": "ok", "toolfork.call.wait_s": 0.0001,
                                     "toolfork.worker.pid": 4242})
                span.end()
            exporter.clear()

        print(f"sdk: one span (start + end, SimpleSpanProcessor, in-memory exporter): "
              f"{_best(args.rounds, spans) / n * 1e6:.1f} us; with a call span's six attributes: "
              f"{_best(args.rounds, call_spans) / n * 1e6:.1f} us")
        return
    from toolfork import tool
    from toolfork.executor import Executor, ToolCall

    work = tool(trivial)
    tiny = [ToolCall(str(i), "trivial", {"x": i}) for i in range(200)]
    small = [ToolCall(str(i), "trivial", {"x": i}) for i in range(4)]
    with Executor([work], mode="fork", workers=2) as ex:
        ex.run(tiny)  # warm

        def run_tiny() -> None:
            ex.run(tiny)
            if exporter is not None:
                exporter.clear()

        def run_submit() -> None:
            futures = [ex.submit(ToolCall(f"s{i}", "trivial", {"x": i})) for i in range(200)]
            for f in futures:
                f.result()
            if exporter is not None:
                exporter.clear()

        t_tiny = _best(args.rounds, run_tiny) / len(tiny) * 1e6
        t_small = _best(args.rounds * 10, lambda: ex.run(small)) * 1e3
        t_submit = _best(args.rounds, run_submit) / 200 * 1e6
    print(f"{args.mode}: tiny {t_tiny:.1f} us/call   small {t_small:.3f} ms/batch   submit {t_submit:.1f} us/call")


if __name__ == "__main__":
    main()
