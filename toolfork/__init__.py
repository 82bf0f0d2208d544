"""toolfork: run the tool calls of LLM agents in parallel in forked worker processes."""

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
