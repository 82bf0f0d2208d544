"""The tool model: typed tools, toolkits, validation, output normalisation and schema export."""

from toolfork.tools.decorator import tool
from toolfork.tools.errors import (
    DuplicateToolError,
    MissingDescriptionWarning,
    ToolDefinitionError,
    ToolError,
    ToolInputError,
    ToolOutputError,
)
from toolfork.tools.output import ContentBlock, ToolOutput
from toolfork.tools.properties import ArrayProperty, ObjectProperty, PropertyType, ToolProperty
from toolfork.tools.registry import collect_tools
from toolfork.tools.runtime import HostToolError, ToolRuntime
from toolfork.tools.schema import to_strict
from toolfork.tools.tool import Tool
from toolfork.tools.toolkit import Toolkit

__all__ = [
    "ArrayProperty",
    "ContentBlock",
    "DuplicateToolError",
    "HostToolError",
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
    "collect_tools",
    "to_strict",
    "tool",
]
