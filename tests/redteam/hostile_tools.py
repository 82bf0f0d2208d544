"""Tools that misbehave on purpose, for the red-team tests (importable by spec:
``tests/redteam/hostile_tools.py:TOOLS``, and by forked workers)."""

from __future__ import annotations

import sys
from typing import Any

from toolfork import ToolOutput, tool
from toolfork.tools.output import ContentBlock


@tool
def echo(text: str) -> str:
    """Return the text.

    Args:
        text: what to return
    """
    return text


@tool
def leave(code: int = 0) -> str:
    """Call sys.exit(code) in the middle of a call.

    Args:
        code: the exit code
    """
    sys.exit(code)


@tool(inline=True)
def leave_inline(code: int = 0) -> str:
    """The same, as an inline tool (runs in the host process).

    Args:
        code: the exit code
    """
    sys.exit(code)


@tool
def odd_output(kind: str) -> ToolOutput:
    """Return an output JSON has trouble with.

    Args:
        kind: surrogate | nan | bigint | deep | unprintable
    """
    def out(text: str, data: Any) -> ToolOutput:
        return ToolOutput(content=[ContentBlock(type="text", text=text)], data=data)

    if kind == "surrogate":
        return out("k\ud800 and \udfff", data={"key\ud800": "v\udc00"})
    if kind == "nan":
        return out("not a number", data=[float("nan"), float("inf"), 1.5])
    if kind == "bigint":
        return out("big", data=10 ** 5000)
    if kind == "deep":
        data: Any = []
        for _ in range(5000):
            data = [data]
        return out("deep", data=data)
    if kind == "unprintable":
        return out("odd", data=Unprintable())
    raise ValueError(kind)


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


TOOLS = [echo, leave, leave_inline, odd_output]


@tool
def size(text: str) -> int:
    """The length of the text.

    Args:
        text: any text
    """
    return len(text)


TOOLS.append(size)
