"""The exceptions of the tool model.

Input and output errors carry structured ``errors`` (``{"loc", "msg"}`` dicts) as well as a message,
because their readers differ: the message goes back to a model verbatim as a tool result, while code
(the agent's error policy, tests) wants the individual field paths. Every exception here pickles with
its arguments intact, since the executor sends exceptions across a pipe.
"""

from __future__ import annotations

from typing import Any


class ToolError(Exception):
    """Base of every error the tool model raises on purpose."""


class ToolDefinitionError(ToolError):
    """A tool (or toolkit) is defined wrongly: bad name, missing type hint, ``*args``, bad schema..."""


class MissingDescriptionWarning(UserWarning):
    """A tool was defined without a description: the model gets an empty one and must guess from the
    name what the tool does. A warning rather than an error, so quick scripts and tests still work;
    ``warnings.simplefilter("error", MissingDescriptionWarning)`` makes it strict."""


def _render(errors: list[dict[str, Any]]) -> str:
    return "; ".join(f"{e['loc']}: {e['msg']}" if e.get("loc") else str(e["msg"]) for e in errors)


class ToolInputError(ToolError):
    """The arguments of a call do not fit the tool's schema.

    ``errors`` lists every failing field as ``{"loc": "a.b[0]", "msg": "..."}``; the message joins
    them so a model can fix all of them in one retry.
    """

    def __init__(self, tool_name: str, errors: list[dict[str, Any]]) -> None:
        self.tool_name = tool_name
        self.errors = errors
        super().__init__(f"Invalid arguments for tool '{tool_name}': {_render(errors)}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.tool_name, self.errors))


class ToolOutputError(ToolError):
    """What a tool returned does not fit its ``output_model``; ``errors`` as for ``ToolInputError``."""

    def __init__(self, tool_name: str, errors: list[dict[str, Any]]) -> None:
        self.tool_name = tool_name
        self.errors = errors
        super().__init__(f"Invalid output from tool '{tool_name}': {_render(errors)}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.tool_name, self.errors))


class DuplicateToolError(ToolError):
    """Two tools share a name; a model could not tell them apart, so registration refuses both."""

    def __init__(self, name: str, first: str, second: str) -> None:
        self.name = name
        self.first = first
        self.second = second
        super().__init__(
            f"Two tools are named '{name}': {first} and {second}. "
            "Rename one (e.g. @tool(name=...)) or exclude it from its toolkit."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name, self.first, self.second))


__all__ = [
    "DuplicateToolError",
    "MissingDescriptionWarning",
    "ToolDefinitionError",
    "ToolError",
    "ToolInputError",
    "ToolOutputError",
]
