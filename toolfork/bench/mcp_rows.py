"""MCP benchmark rows: the round trip of a ``tools/call`` through ``toolfork mcp serve``
against the same tools served by the SDK's ``MCPServer``, and the client side (``MCPConnector``).

    python -m toolfork.bench.mcp_rows [--out bench/results/mcp.md] [--workers 4]

Both servers run over stdio and are driven by the SDK's own client, one session each, opened once.
Rows: a trivial call one at a time and 4 at once (per call), four 0.1 s sleeps and four 0.2 s-of-CPU
calls one after the other and all at once (wall). Client rows: one trivial call on an open SDK
session, through an ``MCPConnector`` and an ``Executor`` (fork pool), and with a session opened for the
call. Ratios are toolfork's time over the SDK's (below 1: toolfork faster).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

SERVE = [sys.executable, "-m", "toolfork", "mcp", "serve", "--tools", "toolfork.bench.mcp_tools"]
SDK = [sys.executable, "-m", "toolfork.bench.mcp_tools"]


async def _timed(fn: Callable[[], Awaitable[Any]], reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        await fn()
    return (time.perf_counter() - start) / reps


async def server_rows(command: list[str], reps: int) -> dict[str, float]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    rows: dict[str, float] = {}
    async with Client(params) as client:
        call = client.session.call_tool

        async def one(name: str, args: dict[str, Any]) -> None:
            result = await call(name, args)
            assert not result.is_error, result

        async def four(name: str, args: dict[str, Any]) -> None:
            await asyncio.gather(*[one(name, args) for _ in range(4)])

        async def seq4(name: str, args: dict[str, Any]) -> None:
            for _ in range(4):
                await one(name, args)

        await four("noop", {})  # warm: every worker has run once
        rows["trivial call, one at a time, per call (ms)"] = 1e3 * await _timed(lambda: one("noop", {}), reps)
        rows["trivial call, 4 at once, per call (ms)"] = 1e3 * await _timed(lambda: four("noop", {}), reps // 4) / 4
        rows["4 x 0.1 s sleep, one after the other, wall (s)"] = await _timed(lambda: seq4("nap", {"seconds": 0.1}), 2)
        rows["4 x 0.1 s sleep, all at once, wall (s)"] = await _timed(lambda: four("nap", {"seconds": 0.1}), 3)
        rows["4 x 0.2 s CPU, one after the other, wall (s)"] = await _timed(lambda: seq4("burn", {"seconds": 0.2}), 2)
        rows["4 x 0.2 s CPU, all at once, wall (s)"] = await _timed(lambda: four("burn", {"seconds": 0.2}), 3)
    return rows


def client_rows(reps: int) -> dict[str, float]:
    from mcp import Client, StdioServerParameters

    from toolfork.executor import Executor
    from toolfork.executor.types import ToolCall
    from toolfork.mcp import MCPConnector

    params = StdioServerParameters(command=SDK[0], args=SDK[1:], env=dict(os.environ))

    async def on_open_session() -> float:
        async with Client(params) as client:
            await client.session.call_tool("noop", {})
            return await _timed(lambda: client.session.call_tool("noop", {}), reps)

    async def session_per_call() -> float:
        async def once() -> None:
            async with Client(params) as client:
                await client.session.call_tool("noop", {})
        return await _timed(once, 3)

    rows = {"SDK client, open session, per call (ms)": 1e3 * asyncio.run(on_open_session())}
    connector = MCPConnector(SDK[0], SDK[1:], env=dict(os.environ))
    try:
        with Executor([connector], workers=4) as executor:
            executor.run([ToolCall("w", "noop", {})])
            start = time.perf_counter()
            for i in range(reps):
                assert executor.run([ToolCall(str(i), "noop", {})])[0].ok
            rows["MCPConnector + Executor (fork pool), per call (ms)"] = 1e3 * (time.perf_counter() - start) / reps
            start = time.perf_counter()
            for r in range(reps // 4):
                assert all(x.ok for x in executor.run([ToolCall(f"{r}-{i}", "noop", {}) for i in range(4)]))
            rows["MCPConnector + Executor, batches of 4, per call (ms)"] = 1e3 * (time.perf_counter() - start) / reps
            start = time.perf_counter()
            assert all(x.ok for x in executor.run([ToolCall(str(i), "nap", {"seconds": 1.0}) for i in range(4)]))
            rows["MCPConnector + Executor, 4 x 1 s sleep in one batch, wall (s)"] = time.perf_counter() - start
    finally:
        connector.close()
    rows["SDK client, a session opened per call (ms)"] = 1e3 * asyncio.run(session_per_call())
    return rows


def machine_rows() -> dict[str, float]:
    """What parallelism the machine gives right now, without MCP: the same CPU-bound work on a plain
    ``ProcessPoolExecutor``. On a shared machine, the CPU rows above mean little without it."""
    from concurrent.futures import ProcessPoolExecutor

    from toolfork.bench.mcp_tools import burn

    with ProcessPoolExecutor(4) as pool:
        list(pool.map(burn, [0.01] * 4))
        start = time.perf_counter()
        list(pool.map(burn, [0.2] * 4))
        together = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(4):
        burn(0.2)
    return {"4 x 0.2 s CPU, one after the other, wall (s)": time.perf_counter() - start,
            "4 x 0.2 s CPU, all at once (ProcessPoolExecutor), wall (s)": together}


def render(toolfork: dict[str, float], sdk: dict[str, float], client: dict[str, float],
           machine: dict[str, float], workers: int, took: float) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "# MCP benchmark",
        "",
        f"`python -m toolfork.bench.mcp_rows` on {datetime.now(timezone.utc).isoformat(timespec='seconds')}, "
        f"{os.cpu_count()} cores, load average {load:.1f} at the end, Python {platform.python_version()}; "
        f"took {took:.0f} s. One run; the machine was shared.",
        "",
        f"## Server: `toolfork mcp serve --workers {workers}` against the SDK's `MCPServer`",
        "",
        "Same three tools (toolfork/bench/mcp_tools.py), both over stdio, each driven by one SDK client session.",
        "Ratio: toolfork's time / the SDK server's (below 1 = toolfork faster).",
        "",
        "| row | toolfork mcp serve | SDK MCPServer | ratio |",
        "|---|---:|---:|---:|",
    ]
    for key, ours in toolfork.items():
        theirs = sdk[key]
        lines.append(f"| {key} | {ours:.4g} | {theirs:.4g} | {ours / theirs:.2f}x |")
    lines += ["", "## The machine's parallelism at the time, without MCP", "",
              "The CPU-bound work of the last two rows above, in this process and on a plain ProcessPoolExecutor(4).",
              "", "| row | value |", "|---|---:|"]
    lines += [f"| {key} | {value:.4g} |" for key, value in machine.items()]
    lines += ["", "## Client: where the session lives", "",
              "The SDK server above; one trivial call (`noop`) unless the row says otherwise.", "",
              "| row | value |", "|---|---:|"]
    lines += [f"| {key} | {value:.4g} |" for key, value in client.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default=None, help="write the markdown table here (default: stdout)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    ours = asyncio.run(server_rows([*SERVE, "--workers", str(args.workers)], args.reps))
    theirs = asyncio.run(server_rows(SDK, args.reps))
    client = client_rows(args.reps)
    machine = machine_rows()
    text = render(ours, theirs, client, machine, args.workers, time.perf_counter() - start)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
