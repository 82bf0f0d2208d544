"""`toolfork tools`: print tool definitions as a provider would receive them.

Useful to check what a model will see before running anything: the schema derived from type hints,
the descriptions taken from docstrings, and whether the tools survive OpenAI strict mode.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from toolfork.commands._loading import UsageError, load_all_tools
from toolfork.commands._options import add_tools_arguments
from toolfork.tools import Tool, ToolError, collect_tools

FORMATS = ("json", "anthropic", "openai", "openai-responses", "text")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_tools_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default="json",
                        help="json: name, description and parameters; anthropic / openai (Chat Completions) "
                             "/ openai-responses: the provider's tool format; text: one line per tool")
    parser.add_argument("--strict", action="store_true", help="OpenAI strict mode (openai formats only)")
    parser.add_argument("--all", action="store_true", help="include tools marked invisible")
    parser.add_argument("--list", action="store_true", help="list the built-in toolkit names and exit")


def _toolkits() -> dict[str, Any]:
    from toolfork.toolkits import TOOLKITS

    return dict(TOOLKITS)


def render(t: Tool, fmt: str, strict: bool) -> Any:
    if fmt == "anthropic":
        return t.to_anthropic()
    if fmt == "openai":
        return t.to_openai(strict=strict)
    if fmt == "openai-responses":
        return t.to_openai(strict=strict, api="responses")
    if fmt == "text":
        return t.to_string()
    return {"name": t.name, "description": t.description, "parameters": t.to_json_schema()}


def main(args: argparse.Namespace) -> int:
    toolkits = _toolkits()
    if args.list:
        for name, cls in toolkits.items():
            print(f"{name}\t{cls.__name__}")
        return 0
    if not args.toolkit and not args.tools:
        print("toolfork tools: give --toolkit NAME or --tools MODULE:ATTR "
              f"(toolkits: {', '.join(toolkits) or 'none'})", file=sys.stderr)
        return 2
    if args.strict and args.format not in ("openai", "openai-responses"):
        print("toolfork tools: --strict applies to --format openai / openai-responses", file=sys.stderr)
        return 2
    try:
        items = load_all_tools(args.tools, args.toolkit)  # the loader run, worker and chat use
        tools = [t for t in collect_tools(items).values() if args.all or t.is_visible]
        rendered = [render(t, args.format, args.strict) for t in tools]
    except (UsageError, ValueError, ToolError) as exc:
        print(f"toolfork tools: {exc}", file=sys.stderr)
        return 2
    if args.format == "text":
        text = "\n".join(rendered)
    else:
        text = json.dumps(rendered, indent=2, ensure_ascii=False)
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # `toolfork tools ... | head`: the reader left; that is not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


__all__ = ["add_arguments", "main", "render"]
