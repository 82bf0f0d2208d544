"""``collect_tools``: flatten tools, toolkits and functions into one name -> Tool mapping."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from toolfork.tools.errors import DuplicateToolError, ToolDefinitionError
from toolfork.tools.tool import Tool
from toolfork.tools.toolkit import Toolkit


def describe(t: Tool, toolkit: Toolkit | None = None) -> str:
    """Where a tool came from, for error messages that must tell two same-named tools apart."""
    source, spec = t.defined_by
    fn = t.__dict__.get("__wrapped__") or (spec if callable(spec) else None)
    if type(t) is not Tool:
        origin = f"class {type(t).__module__}.{type(t).__qualname__}"
    elif fn is not None:
        origin = f"function {getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    else:
        origin = f"a {source}-defined Tool"
    where = f" from toolkit {toolkit.toolkit_name}" if toolkit is not None else ""
    return f"tool '{t.name}' ({origin}){where}"


def collect_tools(items: Iterable[Tool | Toolkit | Callable[..., Any]]) -> dict[str, Tool]:
    """Plain functions are wrapped with ``@tool``, toolkits (instances, or classes constructible
    without arguments) expanded, nested lists flattened. Two tools with one name raise
    ``DuplicateToolError`` naming both: a model could not tell them apart."""
    from toolfork.tools.decorator import tool as make_tool

    found: dict[str, tuple[Tool, str]] = {}

    def put(t: Tool, toolkit: Toolkit | None) -> None:
        origin = describe(t, toolkit)
        if t.name in found:
            first_tool, first = found[t.name]
            if first_tool is t:
                return  # the same object listed twice is harmless
            raise DuplicateToolError(t.name, first, origin)
        found[t.name] = (t, origin)

    def visit(item: Any) -> None:
        if isinstance(item, type) and issubclass(item, (Tool, Toolkit)):
            try:
                item = item()
            except TypeError as exc:
                raise ToolDefinitionError(
                    f"{item.__name__} needs constructor arguments ({exc}); pass an instance") from None
        if isinstance(item, Tool):
            put(item, None)
        elif isinstance(item, Toolkit):
            for t in item.tools():
                put(t, item)
        elif isinstance(item, (list, tuple)):
            for sub in item:
                visit(sub)
        elif callable(item):
            put(make_tool(item), None)
        else:
            raise ToolDefinitionError(
                f"cannot use {item!r} as a tool: expected a Tool, a Toolkit, a function or a list of them")

    if isinstance(items, (Tool, Toolkit)):
        items = [items]
    for item in items:
        visit(item)
    return {name: t for name, (t, _) in found.items()}


__all__ = ["collect_tools", "describe"]
