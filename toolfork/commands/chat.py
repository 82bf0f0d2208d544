"""`toolfork chat`: an interactive agent in the terminal, showing each tool call and its duration.

Reads one message per line from stdin (``/exit`` or end of input stops), streams the answer, and
prints a line when a tool call starts and when it finishes. Without an API key for the chosen
provider it stops at once with a message naming the environment variable (exit status 2); ``--provider
test`` needs no key (``toolfork.testing.TestModel``, scripted with ``--script``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from toolfork._extras import import_optional
from toolfork.commands._options import add_tools_arguments, interrupted_once
from toolfork.commands._terminal import escape

PROVIDERS = ("anthropic", "openai", "openai-compatible", "test")
# provider -> (the SDK module it needs, how the missing-extra message names the provider)
SDKS = {"anthropic": ("anthropic", "the Anthropic provider"), "openai": ("openai", "the OpenAI provider"),
        "openai-compatible": ("openai", "the OpenAI-compatible provider")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--provider", choices=PROVIDERS, default="anthropic",
                        help="model API (default: anthropic); keys from ANTHROPIC_API_KEY / OPENAI_API_KEY; "
                             "'test' needs no key: it calls every tool once, then answers with the results")
    parser.add_argument("--script", metavar="PATH",
                        help="with --provider test: a JSON list of turns the model plays in order, each the "
                             'answer text or a list of calls [{"name": ..., "arguments": {...}}]')
    parser.add_argument("--model", help="model name (default: the provider's default)")
    parser.add_argument("--base-url", help="API base URL (default: the provider's, or ANTHROPIC_BASE_URL / "
                                           "OPENAI_BASE_URL; Ollama's for openai-compatible)")
    parser.add_argument("--api", choices=("chat", "responses"), default="chat",
                        help="OpenAI API flavour: Chat Completions (default) or Responses")
    add_tools_arguments(parser)
    parser.add_argument("--parallel", action="store_true",
                        help="run the calls of a turn in parallel in forked workers")
    parser.add_argument("--instructions", default="", help="system prompt")
    parser.add_argument("--history", metavar="PATH", help="keep the conversation in this SQLite file")
    parser.add_argument("--thread", default="default", help="thread id inside --history (default: default)")
    parser.add_argument("--max-steps", type=int, default=20, help="model calls per message (default: 20)")
    parser.add_argument("--tool-timeout", type=float, help="seconds before a tool call is killed")


def build_provider(args: argparse.Namespace) -> Any:
    from toolfork.agent.providers import Anthropic, OpenAI, OpenAICompatible

    if args.provider == "test":
        return _test_model(args.script)
    if args.script:
        raise ValueError("--script goes with --provider test")
    options: dict[str, Any] = {"base_url": args.base_url}
    if args.model:
        options["model"] = args.model
    if args.provider == "anthropic":
        return Anthropic(**options)
    if args.provider == "openai":
        return OpenAI(api=args.api, **options)
    if not args.model:
        raise ValueError("--provider openai-compatible needs --model (the name the server knows the model by)")
    return OpenAICompatible(api=args.api, **options)


def _test_model(script: str | None) -> Any:
    """``TestModel()``, or one playing the turns of a JSON script file."""
    from toolfork.testing import TestModel, call

    if script is None:
        return TestModel()
    try:
        with open(script, encoding="utf-8") as f:
            turns = json.load(f)
    except (OSError, ValueError) as exc:
        raise ValueError(f"--script {script!r}: {exc}") from None
    if not isinstance(turns, list):
        raise ValueError(f"--script {script!r}: expected a JSON list of turns, got {type(turns).__name__}")
    played: list[Any] = []
    for n, turn in enumerate(turns, 1):
        if isinstance(turn, str):
            played.append(turn)
        elif isinstance(turn, list) and all(
                isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("arguments", {}), dict)
                for c in turn):
            played.append([call(c["name"], **c.get("arguments", {})) for c in turn])
        else:
            raise ValueError(f"--script {script!r}: turn {n} must be the answer text or a list of "
                             f'{{"name": ..., "arguments": {{...}}}} calls, got {json.dumps(turn)[:80]}')
    return TestModel(turns=played)


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Printer:
    """Turns agent events into terminal lines. Text deltas are written as they come."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.mid_line = False

    def _line(self, text: str) -> None:
        if self.mid_line:
            self.out.write("\n")
            self.mid_line = False
        self.out.write(escape(text) + "\n")  # it quotes the model, tools and ids: shown, never obeyed
        self.out.flush()

    def __call__(self, event: Any) -> None:
        from toolfork.agent import TextDelta, ToolCallFinished, ToolCallStarted

        if isinstance(event, TextDelta):
            self.out.write(escape(event.text))
            self.out.flush()
            self.mid_line = not event.text.endswith("\n")
        elif isinstance(event, ToolCallStarted):
            self._line(f"  -> {event.name}({_short(event.arguments)}) [{event.call_id}]")
        elif isinstance(event, ToolCallFinished):
            detail = "" if event.status == "ok" else f": {event.error or ''}".rstrip(": ")
            self._line(f"  <- {event.name} {event.status} in {event.duration_s:.2f}s [{event.call_id}]{detail}")

    def end_answer(self) -> None:
        if self.mid_line:
            self.out.write("\n")
            self.mid_line = False
        self.out.flush()


def _ask_approval(request: Any, stdin: TextIO, out: TextIO) -> dict[str, Any] | None:
    decisions: dict[str, Any] = {}
    for call in request.calls:
        reason = f" ({call.reason})" if call.reason else ""
        out.write(escape(f"approve {call.name}({_short(call.arguments)}){reason}? [y/N] "))
        out.flush()
        answer = stdin.readline()
        if not answer:
            return None
        decisions[call.id] = "approve" if answer.strip().lower() in ("y", "yes") else ("reject", "declined in the CLI")
    return decisions


def run_turn(agent: Any, message: str, printer: Printer, stdin: TextIO, out: TextIO) -> None:
    from toolfork.agent import AgentError, ApprovalRequest, RunFinished, ToolResultsRequest

    try:
        for event in agent.stream(message):
            if isinstance(event, RunFinished):
                printer.end_answer()
        return
    except ApprovalRequest as request:
        pending: Any = request
    except ToolResultsRequest as request:
        printer._line(f"error: the model called frontend tool(s) the CLI cannot answer: {request}")
        return
    except AgentError as exc:
        printer._line(f"error: {exc}")
        return
    while pending is not None:
        decisions = _ask_approval(pending, stdin, out)
        if decisions is None:
            return
        try:
            agent.resume(decisions)
            printer.end_answer()
            pending = None
        except ApprovalRequest as again:
            pending = again
        except AgentError as exc:
            printer._line(f"error: {exc}")
            pending = None


def main(args: argparse.Namespace) -> int:
    from toolfork.agent import Agent, MissingAPIKeyError, SQLiteChatHistory
    from toolfork.commands._loading import UsageError, load_all_tools

    err = sys.stderr
    # Before anything else: without the SDK nothing below can work, and the providers import it only
    # at the first model call. Missing, this raises MissingExtraError; the CLI prints it, exit 2.
    if args.provider in SDKS:
        import_optional(*SDKS[args.provider])
    try:
        provider = build_provider(args)
    except MissingAPIKeyError as exc:
        names = " or ".join(exc.env_vars)
        err.write(f"toolfork chat: no API key for {args.provider}: set {names} in the environment\n")
        return 2
    except ValueError as exc:
        err.write(f"toolfork chat: {exc}\n")
        return 2
    try:
        tools = load_all_tools(args.tools, args.toolkit)
    except UsageError as exc:
        err.write(f"toolfork chat: {exc}\n")
        return 2
    if args.max_steps < 1:
        err.write("toolfork chat: --max-steps must be at least 1\n")
        return 2
    history = SQLiteChatHistory(args.history, args.thread) if args.history else None
    out = sys.stdout
    printer = Printer(out)
    interactive = sys.stdin.isatty()
    agent = Agent(provider=provider, instructions=args.instructions, tools=tools, history=history,
                  max_steps=args.max_steps, tool_timeout=args.tool_timeout, callbacks=[printer])
    if args.parallel:
        agent.parallel_tool_calls(True)
    with interrupted_once() as stop, agent:
        try:
            while True:
                if interactive:
                    out.write("> ")
                    out.flush()
                line = sys.stdin.readline()
                if not line:
                    return 0
                message = line.strip()
                if not message:
                    continue
                if message in ("/exit", "/quit"):
                    return 0
                run_turn(agent, message, printer, sys.stdin, out)
        except KeyboardInterrupt:
            out.write("\n")
            return stop.exit_code


__all__ = ["add_arguments", "main"]
