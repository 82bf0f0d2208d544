"""The resource-governance options ``run``, ``worker`` and ``mcp serve`` share: what a call may use (``--limits``),
how many calls of a tool or group run at once (``--max-concurrency``, ``--concurrency``), how often a
tool's calls start (``--rate-limit``), whether every call is sandboxed (``--sandbox``) and when a warm
worker is replaced (``--max-calls-per-worker``, ``--max-worker-memory-mb``), and what a call's result may
rebuild into here (``--max-result-mb``, the tools' ``max_result_mb`` default). The rules themselves are
the Executor's (``toolfork.governance``); this module only reads the command line into them.

What can be checked without the tools (a bad limit, a rate that is not one, a count below 1, a value
past what the OS or the scheduler can take: see ``Limits`` and ``RateLimit``) is an argparse error;
what needs the tools (a tool name that is not one of them, a group no tool is in) is a ``UsageError``
from ``govern``, raised before any worker starts. Both exit with status 2.

Per-tool settings go on copies of the tools: a tool loaded from a module is a module-level object that
others may share, and ``Tool.configure`` would change it in place.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable
from typing import Any

from toolfork.commands._loading import UsageError


def add_governance_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "resource limits", "what one call may use, and how many calls run at once or how often (see "
                           "docs/executor.md, Limits); a limit this host cannot enforce stops the command "
                           "before it starts, unless the limits say enforce=best-effort")
    group.add_argument("--limits", type=limits_spec, default=None, metavar="SPEC",
                       help="default limits of every call, NAME=VALUE[,NAME=VALUE...] from memory_mb, cpu_s, "
                            "file_size_mb, open_files, processes, network=on|off, read_paths=DIR[:DIR...], "
                            "write_paths=DIR[:DIR...], enforce=strict|best-effort; a tool's own limits win, "
                            "field by field (e.g. memory_mb=256,cpu_s=2,network=off)")
    group.add_argument("--sandbox", action="store_true",
                       help="run every call in the sandbox tier (Limits(sandbox=True) for every tool, whatever "
                            "its own limits say): a process of its own per call, whose results come back as data "
                            "(see docs/security.md)")
    group.add_argument("--max-concurrency", action="append", default=[], type=_tool_count, metavar="TOOL=N",
                       help="at most N calls of TOOL run at once (repeatable)")
    group.add_argument("--rate-limit", action="append", default=[], type=_tool_rate, metavar="TOOL=RATE",
                       help="calls of TOOL start at most this often, evenly spaced: N/s, N/min or N/h, "
                            "e.g. search=10/s (repeatable)")
    group.add_argument("--concurrency", action="append", default=[], type=_group_count, metavar="GROUP=N",
                       help="at most N calls of the tools in concurrency group GROUP (their concurrency_group "
                            "setting) run at once (repeatable)")
    group.add_argument("--max-calls-per-worker", type=_count, default=None, metavar="N",
                       help="replace a worker after it has run N calls")
    group.add_argument("--max-worker-memory-mb", type=_count, default=None, metavar="M",
                       help="replace a worker whose resident memory is above M MiB after a call")
    group.add_argument("--max-result-mb", type=_count, default=None, metavar="M",
                       help="the most a call's result, or one progress value, may rebuild into in this process, "
                            "for the tools that set no max_result_mb of their own (default 256)")


# ------------------------------------------------------------------ argparse types


def limits_spec(text: str) -> Any:
    """``--limits`` as a ``Limits``; a bad setting is an argparse error naming it."""
    from toolfork.governance.limits import Limits, LimitsError

    try:
        return Limits.parse(text, setting="--limits")
    except LimitsError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--limits: ").removeprefix("Limits: ")) from None


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _pair(text: str, what: str, example: str) -> tuple[str, str]:
    name, sep, value = (part.strip() for part in text.partition("="))
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected {what}=VALUE (e.g. {example}), got {text!r}")
    return name, value


def _named_count(what: str, example: str, meaning: str) -> Callable[[str], tuple[str, int]]:
    """The argparse type of ``WHAT=N`` (``--max-concurrency TOOL=N``, ``--concurrency GROUP=N``)."""

    def read(text: str) -> tuple[str, int]:
        name, value = _pair(text, what, example)
        try:
            return name, _count(value)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"{name}={value}: {meaning} must be a whole number of at least 1") \
                from None

    return read


_tool_count = _named_count("TOOL", "search=4", "the number of calls")
_group_count = _named_count("GROUP", "db=5", "the group's cap")


def _tool_rate(text: str) -> tuple[str, str]:
    from toolfork.governance.ratelimit import RateLimit, RateLimitError

    name, value = _pair(text, "TOOL", "search=10/s")
    try:
        RateLimit.parse(value, setting=name)
    except RateLimitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return name, value


# ------------------------------------------------------------------ applying them


def _by_name(pairs: list[tuple[str, Any]], option: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, value in pairs:
        if name in found:
            raise UsageError(f"{option}: {name!r} is given twice")
        found[name] = value
    return found


def default_limits(args: argparse.Namespace) -> Any:
    """The Executor's default limits: ``--limits``, with ``sandbox=True`` when ``--sandbox`` is given."""
    if not getattr(args, "sandbox", False):
        return args.limits
    from toolfork.governance.limits import Limits

    return Limits(**{**(args.limits.set_fields() if args.limits is not None else {}), "sandbox": True})


def _sandboxed_copies(by_name: dict[str, Any]) -> dict[str, Any]:
    """``--sandbox``: the tools whose own limits say sandbox=False (which would win over the default),
    as copies that say sandbox=True."""
    from toolfork.governance.limits import Limits

    return {name: copy.copy(t).configure(limits=Limits(**{**t.limits.set_fields(), "sandbox": True}))
            for name, t in by_name.items() if t.limits is not None and t.limits.sandbox is False}


def govern(args: argparse.Namespace, tools: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """(the tools with ``--max-concurrency`` / ``--rate-limit`` applied, the Executor's keywords for the
    rest). ``tools`` is what goes to the Executor (Tools, Toolkits, functions, MCP connectors); it comes
    back unchanged unless a tool gets a setting, and then as one flat list of tools, those with a setting
    replaced by configured copies. A name that is not a tool, or a group no tool is in, is a UsageError."""
    from toolfork.tools.errors import ToolError
    from toolfork.tools.registry import collect_tools

    caps = _by_name(args.max_concurrency, "--max-concurrency")
    rates = _by_name(args.rate_limit, "--rate-limit")
    groups = _by_name(args.concurrency, "--concurrency")
    options: dict[str, Any] = {"limits": default_limits(args), "concurrency": groups or None,
                               "max_calls_per_worker": args.max_calls_per_worker,
                               "max_worker_memory_mb": args.max_worker_memory_mb}
    try:
        by_name = collect_tools(tools)
    except ToolError as exc:
        raise UsageError(str(exc)) from exc
    known = ", ".join(sorted(by_name)) or "none"
    for option, given in (("--max-concurrency", caps), ("--rate-limit", rates)):
        for name, value in given.items():
            if name not in by_name:
                raise UsageError(f"{option} {name}={value}: no tool is named {name!r} (the tools: {known})")
    tool_groups = {t.concurrency_group: t.name for t in by_name.values() if t.concurrency_group is not None}
    for group, cap in groups.items():
        if group not in tool_groups:
            in_use = ", ".join(sorted(tool_groups)) or "none"
            raise UsageError(f"--concurrency {group}={cap}: no tool is in concurrency group {group!r} "
                             f"(the tools' groups: {in_use})")
    for group, name in sorted(tool_groups.items()):
        if group not in groups:
            raise UsageError(f"tool {name!r} is in concurrency group {group!r}, which needs a cap: "
                             f"pass --concurrency {group}=N")
    unsandboxed = _sandboxed_copies(by_name) if getattr(args, "sandbox", False) else {}
    result_mb = getattr(args, "max_result_mb", None)
    ceilings = set() if result_mb is None else {name for name, t in by_name.items() if t.max_result_mb is None}
    if not caps and not rates and not unsandboxed and not ceilings:
        return tools, options
    configured = {**by_name, **unsandboxed}
    for name in {*caps, *rates, *ceilings}:
        settings: dict[str, Any] = {}
        if name in caps:
            settings["max_concurrency"] = caps[name]
        if name in rates:
            settings["rate_limit"] = rates[name]
        if name in ceilings:
            settings["max_result_mb"] = result_mb
        try:
            configured[name] = copy.copy(configured[name]).configure(**settings)
        except ToolError as exc:
            raise UsageError(str(exc)) from exc
    return list(configured.values()), options


def check_app(args: argparse.Namespace) -> None:
    """``mcp serve --app``: the app's tools all run through one pool tool, so the settings of a tool or
    group have nothing to go on; the Executor-wide ones (--limits, worker recycling) apply."""
    for option, given in (("--max-concurrency", args.max_concurrency), ("--rate-limit", args.rate_limit),
                          ("--concurrency", args.concurrency)):
        if given:
            raise UsageError(f"{option} sets tools of --tools/--toolkit; with --app the app's tools share one "
                             "pool (use --workers to bound how many run at once)")


__all__ = ["add_governance_arguments", "check_app", "default_limits", "govern", "limits_spec"]
