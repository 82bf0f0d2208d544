"""`toolfork tools`: print tool definitions as a provider would receive them.

Useful to check what a model will see before running anything: the schema derived from type hints,
the descriptions taken from docstrings, and whether the tools survive OpenAI strict mode.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from toolfork.tools import Tool, ToolError, collect_tools

FORMATS = ("json", "anthropic", "openai", "openai-responses", "text")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--toolkit", action="append", default=[], metavar="NAME",
                        help="a built-in toolkit by name (repeatable); see --list")
    parser.add_argument("--tools", action="append", default=[], metavar="MODULE:ATTR",
                        help="a Tool, Toolkit, function or list of them, e.g. mypkg.tools:add or "
                             "./tools.py:TOOLS (repeatable)")
    parser.add_argument("--format", choices=FORMATS, default="json",
                        help="json: name, description and parameters; anthropic / openai (Chat Completions) "
                             "/ openai-responses: the provider's tool format; text: one line per tool")
    parser.add_argument("--strict", action="store_true", help="OpenAI strict mode (openai formats only)")
    parser.add_argument("--all", action="store_true", help="include tools marked invisible")
    parser.add_argument("--list", action="store_true", help="list the built-in toolkit names and exit")


def _toolkits() -> dict[str, Any]:
    from toolfork.toolkits import TOOLKITS

    return dict(TOOLKITS)


def load_attr(spec: str) -> Any:
    """``module:attr`` or ``path/to/file.py:attr`` (attr may be dotted)."""
    if ":" not in spec:
        raise ValueError(f"--tools {spec!r}: expected MODULE:ATTR (e.g. mypkg.tools:add)")
    module_part, attr = spec.rsplit(":", 1)
    if module_part.endswith(".py") or os.sep in module_part:
        path = Path(module_part)
        if not path.is_file():
            raise ValueError(f"--tools {spec!r}: no such file {module_part}")
        mod_spec = importlib.util.spec_from_file_location(path.stem, path)
        if mod_spec is None or mod_spec.loader is None:
            raise ValueError(f"--tools {spec!r}: cannot import {module_part}")
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules.setdefault(path.stem, module)
        mod_spec.loader.exec_module(module)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # the console script does not put the cwd on sys.path
        try:
            module = importlib.import_module(module_part)
        except ImportError as exc:
            raise ValueError(f"--tools {spec!r}: cannot import module {module_part!r}: {exc}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"--tools {spec!r}: {module_part} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


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
    items: list[Any] = []
    try:
        for name in args.toolkit:
            cls = toolkits.get(name)
            if cls is None:
                print(f"toolfork tools: unknown toolkit {name!r} (toolkits: {', '.join(toolkits)})",
                      file=sys.stderr)
                return 2
            try:
                items.append(cls())
            except TypeError as exc:
                print(f"toolfork tools: toolkit {name!r} needs constructor arguments ({exc}); build it in "
                      "a module and pass it with --tools MODULE:ATTR", file=sys.stderr)
                return 2
        for spec in args.tools:
            items.append(load_attr(spec))
        tools = [t for t in collect_tools(items).values() if args.all or t.is_visible]
        rendered = [render(t, args.format, args.strict) for t in tools]
    except (ValueError, ToolError) as exc:
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


__all__ = ["add_arguments", "load_attr", "main", "render"]
