"""Benchmark rows for the framework adapters: each framework's own tool execution against the
toolfork adapter, in the framework's own loop (a scripted model, no network), on three workloads:

- ``sleep``: one model response asking for 3 calls that each sleep 0.5 s (I/O-bound);
- ``cpu``: 3 calls that each spin pure Python for about ``CPU_N`` iterations (GIL-bound in a thread);
- ``hung``: 1 call that never returns; the adapter's tool has a 1 s timeout, the stock framework has
  nothing that can stop a stuck sync tool, so its run is capped (killed by this harness at ``CAP``).

Every cell runs in a fresh subprocess (imports and the Executor's start are not timed: a long-lived
app pays them once), timing only the agent run. ``python -m toolfork.bench.adapters`` writes
bench/results/adapters.md and adapters.json; ``--only langgraph,pydantic-ai`` narrows the frameworks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

FRAMEWORKS = ("langgraph", "pydantic-ai", "openai-agents")
VARIANTS = ("default", "toolfork")
WORKLOADS = ("sleep", "cpu", "hung")
SLEEP_S = 0.5
CPU_N = 3_000_000
HUNG_TIMEOUT_S = 1.0
CAP = 5.0  # a hung stock run is killed here; reported as ">= CAP"
REPS = 5  # sleep and cpu cells: best of this many runs


# ----------------------------------------------------------------------------- the tools (module level:
# forked workers inherit them, and every framework can wrap the plain functions)

def nap(seconds: float) -> str:
    """Sleep for a while (I/O-bound work).

    Args:
        seconds: how long
    """
    time.sleep(seconds)
    return f"slept {seconds}"


def spin(n: int) -> str:
    """Pure-Python arithmetic (CPU-bound work).

    Args:
        n: iterations
    """
    total = 0
    for i in range(n):
        total += i * i
    return str(total)


def stuck() -> str:
    """Never return."""
    while True:
        time.sleep(60)


def _calls(workload: str) -> list[tuple[str, dict[str, Any]]]:
    if workload == "sleep":
        return [("nap", {"seconds": SLEEP_S})] * 3
    if workload == "cpu":
        return [("spin", {"n": CPU_N})] * 3
    if workload == "hung":
        return [("stuck", {})]
    return []  # "warmup": the model answers at once (loads what the framework imports lazily)


def _toolfork_tools() -> list[Any]:
    from toolfork import tool

    return [tool(nap), tool(spin), tool(timeout=HUNG_TIMEOUT_S)(stuck)]


# ----------------------------------------------------------------------------- one cell per framework

def _langgraph(variant: str, workload: str) -> Callable[[], Any]:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool as lc_tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    node: Any
    if variant == "toolfork":
        from toolfork.adapters.langgraph import ToolforkToolNode

        # True: a failed call (the hung one) is an error message, as the harness counts it, not raised
        node = ToolforkToolNode(_toolfork_tools(), workers=3, handle_tool_errors=True)
    else:
        node = ToolNode([lc_tool(nap), lc_tool(spin), lc_tool(stuck)])
    calls = [{"name": n, "args": a, "id": f"c{i}", "type": "tool_call"} for i, (n, a) in enumerate(_calls(workload))]
    replies = [AIMessage(content="", tool_calls=calls)] if calls else []
    model = GenericFakeChatModel(messages=iter([*replies, AIMessage(content="done")]))
    g = StateGraph(MessagesState)
    g.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    g.add_node("tools", node)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    graph = g.compile()
    return lambda: graph.invoke({"messages": [HumanMessage("go")]})


def _pydantic_ai(variant: str, workload: str) -> Callable[[], Any]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    calls = _calls(workload)

    def respond(messages: list[Any], info: Any) -> ModelResponse:
        if len(messages) == 1 and calls:
            return ModelResponse(parts=[ToolCallPart(n, a, tool_call_id=f"c{i}") for i, (n, a) in enumerate(calls)])
        return ModelResponse(parts=[TextPart("done")])

    if variant == "toolfork":
        from toolfork.adapters.pydantic_ai import ToolforkToolset

        agent = Agent(FunctionModel(respond), toolsets=[ToolforkToolset(_toolfork_tools(), workers=3)])
    else:
        agent = Agent(FunctionModel(respond), tools=[nap, spin, stuck])
    return lambda: agent.run_sync("go")


def _openai_agents(variant: str, workload: str) -> Callable[[], Any]:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    calls = _calls(workload)

    class Scripted(Model):
        turns = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            self.turns += 1
            if self.turns == 1 and calls:
                output: list[Any] = [ResponseFunctionToolCall(type="function_call", call_id=f"c{i}", name=n,
                                                              arguments=json.dumps(a), id=f"fc{i}")
                                     for i, (n, a) in enumerate(calls)]
            else:
                output = [ResponseOutputMessage(id="m", type="message", role="assistant", status="completed",
                                                content=[ResponseOutputText(type="output_text", text="done",
                                                                            annotations=[])])]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the adapter benchmark runs its agents without streaming (Runner.run)")

    if variant == "toolfork":
        from toolfork.adapters.openai_agents import function_tools
        from toolfork.executor import Executor

        tools: list[Any] = function_tools(_toolfork_tools(), Executor(_toolfork_tools(), workers=3))
    else:
        tools = [function_tool(nap), function_tool(spin), function_tool(stuck)]
    agent = Agent(name="bench", model=Scripted(), tools=tools)
    return lambda: asyncio.run(Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True)))


CELLS = {"langgraph": _langgraph, "pydantic-ai": _pydantic_ai, "openai-agents": _openai_agents}


# ----------------------------------------------------------------------------- the harness

def run_cell(framework: str, variant: str, workload: str, cap: float = CAP) -> dict[str, Any]:
    """One cell in a fresh process, in its own session so a cap kills whatever it started."""
    cmd = [sys.executable, "-m", "toolfork.bench.adapters", "--cell", framework, variant, workload]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    limit = cap + 60  # imports are not timed, and a loaded machine imports slowly
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"seconds": None, "capped": True}
    for line in out.splitlines():
        if line.startswith("{"):
            return dict(json.loads(line))
    return {"seconds": None, "error": (err or out).strip().splitlines()[-1:] or ["no output"]}


def _cell_main(framework: str, variant: str, workload: str) -> None:
    """In the cell's process: build the agent (not timed), then time its run (best of ``REPS``). A
    hung run is cut at CAP (from the run's start) and the process exits at once: the stuck thread
    cannot be joined."""
    import threading

    CELLS[framework](variant, "warmup")()  # what the first run would import lazily is not timed either

    def report(payload: dict[str, Any]) -> None:
        print(json.dumps(payload), flush=True)
        os._exit(0)

    if workload == "hung":
        run = CELLS[framework](variant, workload)
        threading.Timer(CAP, report, args=({"seconds": CAP, "capped": True},)).start()
        start = time.perf_counter()
        run()
        report({"seconds": time.perf_counter() - start, "capped": False})
    times = []
    for _ in range(REPS):  # best of REPS: the machine is shared, and a slow rep says more about it than us
        run = CELLS[framework](variant, workload)
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    report({"seconds": min(times), "capped": False, "reps": [round(t, 4) for t in times]})


def markdown(rows: dict[str, dict[str, dict[str, Any]]], took: float, load: tuple[float, float] | None = None) -> str:
    when = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    lines = [
        "# toolfork benchmark: framework adapters",
        "",
        "Each framework's own tool execution (`default`: LangGraph's `ToolNode`, pydantic-ai's function tools, "
        "the Agents SDK's `function_tool`) against the toolfork adapter (`ToolforkToolNode`, `ToolforkToolset`, "
        "`function_tools`; 3 workers), in the framework's own loop driven by a scripted model. Wall time of the "
        "agent run (one model response with the calls, then a final answer); imports and the Executor's start "
        f"are not timed. One run of the suite, each cell in a fresh process; `sleep` and `cpu` are the best of {REPS} "
        "agent runs in that process. "
        "Command: `python -m toolfork.bench.adapters`.",
        "",
        f"{when}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}; "
        f"took {took:.1f} s"
        + (f"; 1-minute load average {load[0]:.1f} at the start, {load[1]:.1f} at the end." if load else "."),
        "CPU-bound calls can only go faster in parallel where a core is idle: on a machine whose cores are "
        "busy with other work the `cpu` rows tend to 1x.",
        f"Workloads: `sleep` = 3 calls of {SLEEP_S} s sleep; `cpu` = 3 calls of {CPU_N:,} pure-Python iterations; "
        f"`hung` = 1 call that never returns (adapter: tool timeout {HUNG_TIMEOUT_S:g} s; default: nothing can "
        f"stop it, the run is cut at {CAP:g} s and shown as >= {CAP:g}).",
        "Ratio = default / toolfork (above 1: the adapter is faster; for `hung` a lower bound).",
        "",
        "| framework | workload | default (s) | toolfork (s) | ratio |",
        "|---|---|---:|---:|---:|",
    ]
    for framework, by_workload in rows.items():
        for workload, cell in by_workload.items():
            d, t = cell.get("default", {}), cell.get("toolfork", {})

            def show(c: dict[str, Any]) -> str:
                if c.get("seconds") is None:
                    return "failed" if not c.get("capped") else f">= {CAP:g}"
                return f">= {c['seconds']:.2f}" if c.get("capped") else f"{c['seconds']:.3f}"

            ratio = "—"
            if d.get("seconds") and t.get("seconds") and not t.get("capped"):
                ratio = ("≥ " if d.get("capped") else "") + f"{d['seconds'] / t['seconds']:.2f}x"
            lines.append(f"| {framework} | {workload} | {show(d)} | {show(t)} | {ratio} |")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cell", nargs=3, metavar=("FRAMEWORK", "VARIANT", "WORKLOAD"), help=argparse.SUPPRESS)
    parser.add_argument("--only", default=",".join(FRAMEWORKS), help="frameworks, comma-separated")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "bench" / "results"))
    args = parser.parse_args(argv)
    if args.cell:
        _cell_main(*args.cell)
        return 0
    started = time.monotonic()
    load_start = os.getloadavg()[0]
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for framework in [f.strip() for f in args.only.split(",") if f.strip()]:
        if framework not in CELLS:
            parser.error(f"unknown framework {framework!r}; choose from {', '.join(FRAMEWORKS)}")
        for workload in WORKLOADS:
            for variant in VARIANTS:
                cell = run_cell(framework, variant, workload)
                rows.setdefault(framework, {}).setdefault(workload, {})[variant] = cell
                print(framework, workload, variant, cell, file=sys.stderr, flush=True)
    took = time.monotonic() - started
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "adapters.md").write_text(markdown(rows, took, (load_start, os.getloadavg()[0])))
    (out / "adapters.json").write_text(json.dumps({"rows": rows, "took_s": took}, indent=2) + "\n")
    print(out / "adapters.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
