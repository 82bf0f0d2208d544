"""`toolfork` command line: one subcommand per module in ``toolfork.commands``.

Subcommand modules are imported only when chosen, so `toolfork run` does not pay for the agent's
SDK imports and `toolfork tools` does not start a worker pool.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from toolfork import __version__
from toolfork._extras import missing_extra_message

EXIT_USAGE = 2
# What `toolfork --help` says the program is (the module docstring speaks to whoever edits this file).
DESCRIPTION = ("Run the tool calls of LLM agents in parallel in forked worker processes: timeouts that kill, "
               "crash isolation, results in call order. `toolfork COMMAND --help` for a command's options.")

# name -> (module, one-line help). Each module defines add_arguments(parser) and main(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("toolfork.commands.run", "run a JSONL batch of tool calls in parallel"),
    "tools": ("toolfork.commands.tools", "print tool definitions (anthropic, openai or json)"),
    "bench": ("toolfork.commands.bench", "benchmark toolfork against the other executors"),
    "chat": ("toolfork.commands.chat", "chat with an agent that uses tools"),
    "worker": ("toolfork.commands.worker", "serve tool calls on stdin/stdout as a co-process"),
    "mcp": ("toolfork.commands.mcp", "serve tools over MCP (toolfork mcp serve)"),
    "sandbox": ("toolfork.commands.sandbox", "say which sandbox a tool call gets here (toolfork sandbox check)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolfork", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"toolfork {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module_name, help_text) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.set_defaults(_module=module_name)
        # Arguments are added lazily below, only for the chosen command.
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a missing optional package (whichever command needs it, wherever it is
    imported) is one line naming the extra to install and exit status 2, not a traceback."""
    try:
        return _main(argv)
    except ImportError as exc:
        message = missing_extra_message(exc)
        if message is None:
            raise
        print(f"toolfork: {message}", file=sys.stderr)
        return EXIT_USAGE


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # Find the chosen command first so only its module is imported.
    chosen = next((a for a in argv if not a.startswith("-")), None)
    if chosen in COMMANDS:
        module = importlib.import_module(COMMANDS[chosen][0])
        subparsers = next(
            a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
        )
        module.add_arguments(subparsers.choices[chosen])
    args = parser.parse_args(argv)
    module = importlib.import_module(args._module)
    return int(module.main(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
