"""Your own tools and calls as a benchmark workload (``toolfork bench --tools T --calls C``).

    command: read_user_work(tools, calls) ──specs + calls (JSON)──▶ runner (env TOOLFORK_BENCH_TOOLS)
             (``commands/bench.py``: it reads the user's files as ``toolfork run`` does)
    runner:  the "user" workload submits Task("user_call", {"tool", "arguments"}) per call line
    worker:  user_call(tool, arguments) ──loads the specs once (fork: inherited; spawn: from the env)──▶
             Tool.invoke(arguments): validation, the call and its output, as toolfork's worker does

The tools and the call lines are read exactly as ``toolfork run`` reads them, by the command (the
same loader and line parser); a call line that is not a usable call, or names a tool that does not
exist, is left out and said. The workers load the specs with the same rules (``toolfork.tools.specs``).
Every executor runs the same calls; toolfork runs the tools themselves (``ToolforkPeer``). A call's
timeout is its effective one (the line's, else its tool's), so that every executor is asked the same;
what the calls ask beyond running (a timeout, limits, a fresh process) is ``UserWork.asks``, and an
executor that cannot honour it is shown as such (``toolfork.bench.honour``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
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
        from toolfork.tools.registry import collect_tools
        from toolfork.tools.specs import load_tools_spec

        _LOADED = collect_tools([item for spec in specs for item in load_tools_spec(spec)])
    return _LOADED


def user_call(tool: str, arguments: dict[str, Any]) -> Any:
    """Run one of the user's tools the way toolfork's worker does: validate, call, normalise the output.

    Args:
        tool: the tool's name
        arguments: the call's arguments
    """
    return user_tools()[tool].invoke(arguments)
