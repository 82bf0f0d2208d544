"""`toolfork mcp serve`: serve toolfork tools over MCP (stdio, or streamable HTTP with ``--http``).

Tools come from the same loaders as `toolfork run` and `toolfork tools` (``--toolkit``, ``--tools``);
every call runs in the fork pool (see ``toolfork/mcp/server.py``). Nothing but MCP goes to stdout.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from toolfork.commands._governance import add_governance_arguments, check_app, default_limits, govern
from toolfork.commands._loading import UsageError, load_all_tools, load_hook
from toolfork.commands._metrics import MetricsEndpoint, add_metrics_arguments
from toolfork.commands._options import EXIT_USAGE, add_tools_arguments, positive_float, positive_int
from toolfork.commands._otel import configure as configure_otel


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="mcp_command", metavar="ACTION")
    sub.required = True
    serve = sub.add_parser("serve", help="serve tools over MCP, every call in the fork pool",
                           description="Serve tools over MCP: stdio by default, streamable HTTP at "
                                       "http://HOST:PORT/mcp with --http.")
    add_tools_arguments(serve)
    serve.add_argument("--app", default=None, metavar="FILE.py:ATTR",
                       help="serve an SDK server app (MCPServer / FastMCP) with its tools in the fork pool; "
                            "resources, prompts and the rest are served by the SDK (also MODULE:ATTR)")
    serve.add_argument("--workers", type=positive_int, default=None, metavar="N",
                       help="worker processes (default: 4 x CPUs, between 4 and 32)")
    serve.add_argument("--timeout", type=_timeout, default=DEFAULT_TIMEOUT_S, metavar="S",
                       help=f"per-call timeout in seconds for tools that set none (default {DEFAULT_TIMEOUT_S:g}; "
                            "'none': unbounded)")
    serve.add_argument("--before-child", default=None, metavar="MODULE:FN",
                       help="called in the worker right before each call")
    serve.add_argument("--after-child", default=None, metavar="MODULE:FN",
                       help="called in the worker right after each call")
    serve.add_argument("--http", default=None, metavar="HOST:PORT",
                       help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: any free "
                            "port; the URL is printed on stderr)")
    add_governance_arguments(serve)
    add_metrics_arguments(serve)


# A served call's client is usually a model's agent loop, which has no way to kill a stuck worker: an
# unbounded hang would hold that worker until the server stops. Five minutes is past any tool call an
# agent waits for, and a tool that needs longer says so with its own timeout (or --timeout none).
DEFAULT_TIMEOUT_S = 300.0


def _timeout(text: str) -> float | None:
    if text.strip().lower() == "none":
        return None
    return positive_float(text)


def _http_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--http takes HOST:PORT (e.g. 127.0.0.1:8000), got {text!r}")
    return host.strip("[]"), int(port)


def main(args: argparse.Namespace) -> int:
    from toolfork.mcp.server import exit_on_signals, run

    exit_on_signals([])  # a signal while the tools load: nothing to close yet (run() takes over)
    return _serve(args, run)


def _serve(args: argparse.Namespace, run: Any) -> int:
    from toolfork._extras import import_optional

    import_optional("mcp", "toolfork mcp serve")  # before any tool loads or worker starts
    endpoint: MetricsEndpoint | None = None
    try:
        endpoint = MetricsEndpoint.from_args(args)
        if endpoint is not None:
            endpoint.prepare()  # the MeterProvider, before the Executor makes its instruments
        configure_otel("mcp serve", metrics_taken=endpoint is not None)  # before the tools load and the pool forks
        if not args.toolkit and not args.tools and not args.app:
            raise UsageError("no tools: pass --toolkit NAME or --tools MODULE:ATTR (repeatable), or --app FILE.py:ATTR")
        if args.app and (args.toolkit or args.tools):
            raise UsageError("--app serves the app's own tools: it does not take --toolkit or --tools")
        http = _http_address(args.http) if args.http else None
        before = load_hook(args.before_child, "--before-child") if args.before_child else None
        after = load_hook(args.after_child, "--after-child") if args.after_child else None
        from toolfork.executor import Executor
        from toolfork.mcp.server import Wire

        options: dict[str, Any] = {"workers": args.workers, "timeout": args.timeout, "before_child": before,
                                   "after_child": after}
        app = None
        if args.app:
            from toolfork.mcp.app import load_app, pool_app

            check_app(args)
            options.update(limits=default_limits(args), max_calls_per_worker=args.max_calls_per_worker,
                           max_worker_memory_mb=args.max_worker_memory_mb)
            app = load_app(args.app)
            wire = Wire() if http is None else None  # before the pool forks: workers must not see the wire
            executor, callbacks = pool_app(app, **options)
        else:
            from toolfork.mcp.callback import CallbackServer, client_link
            from toolfork.tools.runtime import set_client_link

            tools, governance = govern(args, load_all_tools(args.tools, args.toolkit))
            options.update(governance)
            wire = Wire() if http is None else None
            callbacks = CallbackServer()  # before the pool forks: workers reach their client through it
            set_client_link(client_link(callbacks.address))
            try:
                executor = Executor(tools, **options)  # refuses limits this host cannot enforce
            except BaseException:
                callbacks.remove()  # its private directory: nothing will serve on it
                raise
        if endpoint is not None:
            try:
                endpoint.start("mcp serve")  # after the pool forked: no worker holds its socket
            except UsageError:
                executor.close()
                callbacks.remove()
                raise
    except (UsageError, ValueError, RuntimeError) as exc:
        print(f"toolfork mcp serve: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        run(executor, http, wire, app, callbacks)
    finally:
        if endpoint is not None:
            endpoint.close()
    return 0


__all__ = ["add_arguments", "main"]
