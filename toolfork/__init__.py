"""toolfork: run the tool calls of LLM agents in parallel in forked worker processes.

``import toolfork`` is cheap: the names below are imported on first use (``toolfork.tool`` loads the
tool model and pydantic then), so a program or a command that needs none of them does not pay for them.
"""

from __future__ import annotations

import importlib
import logging

# The library convention: toolfork's records go nowhere unless the program configures logging (the
# commands configure their own, ``commands/_logs.py``); without this, logging's last-resort handler
# would print every WARNING on stderr.
logging.getLogger("toolfork").addHandler(logging.NullHandler())

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers know the name)
if TYPE_CHECKING:
    from typing import Any

    from toolfork.executor import Session as Session
    from toolfork.executor import SessionLost as SessionLost
    from toolfork.governance import Limits, LimitsNotEnforceable
    from toolfork.tools import (
        ArrayProperty,
        ContentBlock,
        DuplicateToolError,
        MissingDescriptionWarning,
        ObjectProperty,
        PropertyType,
        Tool,
        ToolDefinitionError,
        ToolError,
        ToolInputError,
        Toolkit,
        ToolOutput,
        ToolOutputError,
        ToolProperty,
        ToolRuntime,
        collect_tools,
        tool,
    )

__version__ = "0.1.0"  # the one place the version lives: pyproject.toml reads it ([tool.hatch.version])

# public name -> the package that defines it
_EXPORTS = {
    "Limits": "toolfork.governance",
    "LimitsNotEnforceable": "toolfork.governance",
    "Session": "toolfork.executor",
    "SessionLost": "toolfork.executor",
    **dict.fromkeys(
        ["ArrayProperty", "ContentBlock", "DuplicateToolError", "MissingDescriptionWarning", "ObjectProperty",
         "PropertyType", "Tool", "ToolDefinitionError", "ToolError", "ToolInputError", "Toolkit", "ToolOutput",
         "ToolOutputError", "ToolProperty", "ToolRuntime", "collect_tools", "tool"],
        "toolfork.tools"),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolfork' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "ArrayProperty",
    "ContentBlock",
    "DuplicateToolError",
    "Limits",
    "LimitsNotEnforceable",
    "MissingDescriptionWarning",
    "ObjectProperty",
    "PropertyType",
    "Tool",
    "ToolDefinitionError",
    "ToolError",
    "ToolInputError",
    "ToolOutput",
    "ToolOutputError",
    "ToolProperty",
    "ToolRuntime",
    "Toolkit",
    "__version__",
    "collect_tools",
    "tool",
]
