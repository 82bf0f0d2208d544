"""What ``run`` and ``worker`` share on the command line: where the tools come from, how the Executor
is built from the options, exit codes and the usage-error message.

Everything the user can fix by changing the command line (a mode that cannot run here, Ray missing, a
bad hook spec) ends up as a ``UsageError``, so both commands answer it the same way: one line on
stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolfork.commands._loading import UsageError, default_tools_file, load_all_tools, load_hook
from toolfork.commands._logs import add_logging_arguments
from toolfork.commands._terminal import escape

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# Default window floor: quick calls travel to the workers in chunks no larger than the window, so a
# job with thousands of trivial calls needs a wide one (measured on 2 workers: window 8 ->
# 16k calls/s, 512 -> 44k calls/s). What it costs is at most this many results held in memory.
MIN_DEFAULT_WINDOW = 256


class Interruption:
    """What stopped a command: its exit status is 130 after Ctrl-C (SIGINT), 143 after SIGTERM, as a shell
    reports a process those signals ended."""

    exit_code = EXIT_INTERRUPTED


@contextmanager
def interrupted_once() -> Iterator[Interruption]:
    """Ctrl-C from a terminal reaches the whole process group, often twice in quick succession; a
    supervisor (systemd, Kubernetes, ``timeout``) sends SIGTERM. The first of either stops the job
    (``KeyboardInterrupt``: the command closes its pool and writes what it has, then exits with
    ``exit_code``); from then on both are ignored until the command exits, so a second one cannot cut
    the clean-up short (the pool half closed, a traceback instead of the exit status, lines never
    written that ``--resume`` would then run again)."""
    stop = Interruption()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    # Started with Ctrl-C ignored (a background job of a shell): keep it so.
    signals = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not signal.SIG_IGN]
    interrupted = False

    def first(signum: int, frame: Any) -> None:
        nonlocal interrupted
        interrupted = True
        stop.exit_code = 128 + signum
        for s in signals:
            signal.signal(s, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, first) for s in signals}
    try:
        yield stop
    finally:
        # After an interrupt the command is on its way out with its status: a second signal that comes
        # after a quick clean-up must not turn that exit into death by the signal, so they stay ignored.
        if not interrupted:
            for s, handler in previous.items():
                signal.signal(s, handler)


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``run`` and ``worker`` share: where tools come from, how they are executed, and how much
    is logged (``_logs``)."""
    from toolfork.executor.modes import MODES

    add_tools_arguments(parser)
    add_logging_arguments(parser)
    parser.add_argument("--workers", type=positive_int, default=None, metavar="N",
                        help="worker processes (default: 4 x CPUs, between 4 and 32)")
    parser.add_argument("--timeout", type=positive_float, default=None, metavar="S",
                        help="per-call timeout in seconds when neither the call nor the tool sets one")
    parser.add_argument("--mode", choices=MODES, default="auto", help="where calls run (default auto)")
    parser.add_argument("--address", default=None, metavar="ADDR",
                        help="Ray cluster address (implies --mode ray)")
    parser.add_argument("--before-child", default=None, metavar="MODULE:FN",
                        help="called in the worker right before each call")
    parser.add_argument("--after-child", default=None, metavar="MODULE:FN",
                        help="called in the worker right after each call")


def add_tools_arguments(parser: argparse.ArgumentParser) -> None:
    """``--tools`` and ``--toolkit``, the same in every command that loads tools (run, worker, chat,
    tools); both go through ``_loading.load_all_tools``."""
    parser.add_argument("--tools", action="append", default=[], metavar="SPEC",
                        help="tools to load (repeatable): MODULE:ATTR, MODULE, path/to/file.py or "
                             "path/to/file.py:ATTR, e.g. examples.tools:add or examples/tools.py. ATTR is a "
                             "Tool, Toolkit, function or list of them; without it, the module's TOOLS list "
                             "(else every Tool and Toolkit the module defines)")
    parser.add_argument("--toolkit", action="append", default=[], metavar="NAME",
                        help="a built-in toolkit by name, e.g. calculator (repeatable)")


def add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    """``--mcp`` / ``--mcp-url``: the tools of MCP servers (the ``[mcp]`` extra), beside or instead of
    ``--tools``; ``resolve_tools`` turns them into ``MCPConnector`` toolkits."""
    parser.add_argument("--mcp", action="append", default=[], metavar="COMMAND",
                        help="the tools of a stdio MCP server started with COMMAND (one string, split like a "
                             "shell would), e.g. --mcp \"npx -y @modelcontextprotocol/server-everything\" (repeatable)")
    parser.add_argument("--mcp-url", action="append", default=[], metavar="URL",
                        help="the tools of a streamable HTTP MCP server, e.g. http://127.0.0.1:8000/mcp (repeatable)")


def _mcp_connectors(args: argparse.Namespace) -> list[Any]:
    commands, urls = list(getattr(args, "mcp", None) or []), list(getattr(args, "mcp_url", None) or [])
    if not commands and not urls:
        return []
    import shlex

    from toolfork.mcp import MCPConnector

    connectors: list[Any] = []
    for command in commands:
        try:
            parts = shlex.split(command)
        except ValueError as exc:
            raise UsageError(f"--mcp {command!r}: {exc}") from None
        if not parts:
            raise UsageError("--mcp needs a command, e.g. --mcp \"npx -y @modelcontextprotocol/server-everything\"")
        connectors.append(MCPConnector(parts[0], parts[1:]))
    connectors.extend(MCPConnector(url=url) for url in urls)
    for connector in connectors:
        try:
            connector.tools()
        except (ConnectionError, ValueError) as exc:
            raise UsageError(str(exc)) from None
    return connectors


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def default_window(workers: int) -> int:
    return max(4 * workers, MIN_DEFAULT_WINDOW)


def build_executor(args: argparse.Namespace, tools: list[Any], **governance: Any) -> Any:
    """The Executor the options describe; any refusal (mode impossible here, Ray missing, a limit this
    host cannot enforce) is a usage error because the user can fix it on the command line. Fork workers
    encode the ok results as output lines themselves, so the host of a job only moves bytes.
    ``governance``: the Executor's limits keywords (``_governance.govern``)."""
    from toolfork.commands._output import encode_ok_result
    from toolfork.executor import Executor

    mode = args.mode
    if args.address is not None:
        if mode not in ("auto", "ray"):
            raise UsageError(f"--address is for --mode ray, not --mode {mode}")
        mode = "ray"
    before = load_hook(args.before_child, "--before-child") if args.before_child else None
    after = load_hook(args.after_child, "--after-child") if args.after_child else None
    try:
        return Executor(tools, mode=mode, workers=args.workers, timeout=args.timeout,
                        before_child=before, after_child=after, address=args.address,
                        encode_results=encode_ok_result, **governance)
    except (ValueError, RuntimeError, ImportError) as exc:
        raise UsageError(f"cannot start the executor: {exc}") from exc


def resolve_tools(args: argparse.Namespace, calls_path: str | None) -> tuple[list[Any], str]:
    """(tools, where they came from). With neither --tools nor --toolkit, a ``tools.py`` next to the
    calls file is the convention, so ``toolfork run examples/calls.jsonl`` just works."""
    specs, toolkits = list(args.tools), list(args.toolkit)
    connectors = _mcp_connectors(args)
    if connectors and not specs and not toolkits:
        origin = [*(f"--mcp {c}" for c in args.mcp), *(f"--mcp-url {u}" for u in args.mcp_url)]
        return _checked(connectors), ", ".join(origin)
    if not specs and not toolkits:
        found = default_tools_file(calls_path) if calls_path is not None else None
        if found is None:
            beside = "" if calls_path in (None, "-") else " (or put a tools.py next to the calls file)"
            raise UsageError(f"no tools: pass --tools MODULE:ATTR or --toolkit NAME{beside}")
        specs = [str(found)]
    tools = load_all_tools(specs, toolkits)
    return _checked([*tools, *connectors]), ", ".join([*specs, *(f"toolkit {n}" for n in toolkits)])


def _checked(items: list[Any]) -> list[Any]:
    """Two tools with one name (two MCP servers, or a server and --tools) are a usage error."""
    from toolfork.tools.errors import ToolError
    from toolfork.tools.registry import collect_tools

    try:
        collect_tools(items)
    except ToolError as exc:
        raise UsageError(f"{exc} (MCPConnector(prefix=...) keeps MCP servers' names apart)") from exc
    return items


def error(command: str, message: str) -> int:
    print(f"toolfork {command}: error: {escape(message)}", file=sys.stderr)
    return EXIT_USAGE


__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "MIN_DEFAULT_WINDOW",
    "add_common_arguments",
    "add_mcp_arguments",
    "add_tools_arguments",
    "build_executor",
    "default_window",
    "error",
    "positive_float",
    "positive_int",
    "resolve_tools",
]
