"""Your own tools and calls as a benchmark workload (``toolfork bench --tools T --calls C``).

    command: read_user_work(tools, calls) ──specs + calls (JSON)──▶ runner (env TOOLFORK_BENCH_TOOLS)
    runner:  the "user" workload submits Task("user_call", {"tool", "arguments"}) per call line
    worker:  user_call(tool, arguments) ──loads the specs once (fork: inherited; spawn: from the env)──▶
             Tool.invoke(arguments): validation, the call and its output, as toolfork's worker does

The tools and the call lines are read exactly as ``toolfork run`` reads them (the same loader and line
parser); a call line that is not a usable call, or names a tool that does not exist, is left out and
said. Every executor runs the same calls; toolfork runs the tools themselves (``ToolforkPeer``). A
call's timeout is its effective one (the line's, else its tool's), so that every executor is asked the
same; what the calls ask beyond running (a timeout, limits, a fresh process) is ``UserWork.asks``, and
an executor that cannot honour it is shown as such (``toolfork.bench.honour``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOOLS_ENV = "TOOLFORK_BENCH_TOOLS"
_LOADED: dict[str, Any] | None = None


@dataclass
class UserWork:
    """What the harness hands every runner: tool specs (absolute paths) and the good call lines."""

    tool_specs: list[str]
    calls: list[dict[str, Any]]
    skipped: list[str] = field(default_factory=list)  # one message per call line left out
    source: str = ""
    asks: list[str] = field(default_factory=list)  # of toolfork.bench.honour.ASKS

    def to_job(self) -> dict[str, Any]:
        return {"tool_specs": self.tool_specs, "calls": self.calls}


def _absolute(spec: str) -> str:
    """A path spec made absolute, so a worker started elsewhere finds the same file."""
    from toolfork.commands._loading import is_path, split_spec

    module, attr = split_spec(spec)
    if not is_path(module):
        return spec
    path = str(Path(module).expanduser().resolve())
    return f"{path}:{attr}" if attr else path


def read_user_work(tool_specs: list[str], calls_path: str) -> UserWork:
    """Load the tools (``UsageError`` naming what is wrong) and parse the calls file like ``toolfork run``."""
    from toolfork.bench.honour import FRESH, LIMITS, TIMEOUT
    from toolfork.commands._input import open_input, read_call
    from toolfork.commands._loading import BadLine, UsageError, default_tools_file, load_all_tools
    from toolfork.tools.registry import collect_tools

    specs = list(tool_specs)
    if not specs:
        found = default_tools_file(calls_path)
        if found is None:
            raise UsageError("no tools: pass --tools MODULE:ATTR or path/to/tools.py (or put a tools.py "
                             "next to the calls file)")
        specs = [str(found)]
    tools = collect_tools(load_all_tools(specs, []))  # errors name the specs as the user typed them
    specs = [_absolute(s) for s in specs]
    if calls_path == "-":
        raise UsageError("--calls needs a file: every round runs the same calls")
    calls: list[dict[str, Any]] = []
    skipped: list[str] = []
    asks: set[str] = set()
    with open_input(calls_path) as stream:
        for lineno, raw in enumerate(stream, 1):
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            call = read_call(line, lineno)
            if isinstance(call, BadLine):
                skipped.append(call.message)
            elif call.name not in tools:
                skipped.append(f"line {lineno}: unknown tool {call.name!r} (tools: {', '.join(sorted(tools))})")
            else:
                tool = tools[call.name]
                timeout = call.timeout if call.timeout is not None else tool.timeout
                calls.append({"tool": call.name, "arguments": call.arguments, "timeout": timeout})
                asks |= {ask for ask, on in ((TIMEOUT, timeout is not None), (LIMITS, tool.limits is not None),
                                             (FRESH, tool.fresh_process)) if on}
    if not calls:
        why = f"; {skipped[0]}" if skipped else ""
        raise UsageError(f"{calls_path!r}: no usable call lines{why}")
    return UserWork(specs, calls, skipped, ", ".join(specs), sorted(asks))


def install(job: dict[str, Any] | None) -> None:
    """In a runner: make the user's tools loadable by every worker (the env reaches spawned ones too)."""
    if job:
        os.environ[TOOLS_ENV] = json.dumps(job["tool_specs"])
        user_tools()  # loaded before any pool forks, so fork workers inherit them


def user_tools() -> dict[str, Any]:
    """The user's tools by name, loaded once per process from ``TOOLFORK_BENCH_TOOLS`` (none when unset)."""
    global _LOADED
    if _LOADED is None:
        specs = json.loads(os.environ.get(TOOLS_ENV) or "[]")
        if not specs:
            return {}
        from toolfork.commands._loading import load_all_tools
        from toolfork.tools.registry import collect_tools

        _LOADED = collect_tools(load_all_tools(specs, []))
    return _LOADED


def user_call(tool: str, arguments: dict[str, Any]) -> Any:
    """Run one of the user's tools the way toolfork's worker does: validate, call, normalise the output.

    Args:
        tool: the tool's name
        arguments: the call's arguments
    """
    return user_tools()[tool].invoke(arguments)
