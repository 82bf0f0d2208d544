"""Tools for ``test_terminal``: each puts terminal control sequences where ``toolfork run`` prints."""

from __future__ import annotations

import logging
import os

from toolfork import Limits, tool

OSC52 = "\x1b]52;c;cHduZWQ=\x07"  # writes "pwned" to the terminal's clipboard
TITLE = "\x1b]0;owned\x07"  # sets the window title
CSI8 = "\x9b2J"  # 8-bit CSI: clears the screen


@tool
def crash() -> str:
    """Die mid-call: the pool logs a WARNING naming the call's id."""
    os._exit(3)


@tool(limits=Limits(network=False))
def raise_named(name: str) -> str:
    """Raise, in the sandbox, an exception whose class name and message carry control sequences."""
    raise type(name, (Exception,), {})(f"message {TITLE}")


@tool
def log_line(text: str) -> str:
    """Write a log line of the tool's own."""
    logging.getLogger("a.tool").warning("tool says %s", text)
    return "logged"


TOOLS = [crash, raise_named, log_line]
