"""``@tool``: a function becomes a ``Tool`` whose schema comes from its type hints and docstring."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from toolfork.tools.errors import ToolDefinitionError
from toolfork.tools.settings import SettingKeywords
from toolfork.tools.tool import Tool

P = ParamSpec("P")
R = TypeVar("R")

if TYPE_CHECKING:
    from typing_extensions import Unpack

    class FunctionTool(Tool, Generic[P, R]):
        """What type checkers see ``@tool`` return: a ``Tool`` that is also callable with the function's
        own signature (``add(1, 2)`` is an ``int``). At run time it is a plain ``Tool``."""

        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...  # type: ignore[override]


@overload
def tool(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    fn_or_name: str | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    visible: bool = True,
    **settings: Unpack[SettingKeywords],
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(fn_or_name: Any = None, /, *, name: str | None = None, **settings: Any) -> Any:
    """Turn a function into a ``Tool``: bare (``@tool``), with settings (``@tool(timeout=5)``, any of
    ``ToolSettings``) or with a name (``@tool("lookup")``). The result is still callable like the function."""
    if isinstance(fn_or_name, str):
        if name is not None:
            raise ToolDefinitionError("give the tool name once: @tool('x') or @tool(name='x')")
        name, fn_or_name = fn_or_name, None

    def wrap(fn: Callable[..., Any]) -> Tool:
        if isinstance(fn, Tool):
            raise ToolDefinitionError(f"{fn!r} is already a tool")
        if not callable(fn):
            raise ToolDefinitionError(f"@tool needs a function, got {fn!r}")
        t = Tool(name, fn=fn, **settings)  # settings stay intact: one @tool(...) may wrap several functions
        # Keep the function's identity visible on the tool (help(), introspection, functools.wraps users).
        for attr in ("__module__", "__qualname__", "__doc__"):
            if hasattr(fn, attr):
                t.__dict__[attr] = getattr(fn, attr)
        t.__dict__["__wrapped__"] = fn
        return t

    if fn_or_name is None:
        return wrap
    return wrap(fn_or_name)


__all__ = ["tool"]
