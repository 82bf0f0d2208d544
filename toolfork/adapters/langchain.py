"""LangChain tools <-> toolfork tools.

``to_langchain(tools, executor)``: toolfork tools as LangChain ``BaseTool``s whose every call runs in the
Executor's fork pool (``invoke`` blocks its thread on the call, ``ainvoke`` awaits it), so a stock
``ToolNode``, ``create_agent`` or any LangChain code gets real timeouts, crash isolation and CPU
parallelism without knowing it. A call that fails (error, timeout, crash) raises ``ToolCallFailed``
(a ``ToolException``: with the default ``handle_tool_error=True`` LangChain turns it into a
``ToolMessage`` with ``status="error"``).

``from_langchain(lc_tool)`` (or a list of them): a LangChain tool as a toolfork ``Tool`` (its JSON
Schema, its name and description), so it can run in the pool like any other. The worker calls the
LangChain tool itself (inherited by fork), so its own validation and error handling still apply. Tools
whose arguments a LangGraph graph injects (``InjectedState``, ``InjectedStore``, ``ToolRuntime``,
``InjectedToolCallId``) or that return a ``Command`` are refused: a bare Executor has no graph to
inject from or to apply a Command to. ``ToolforkToolNode`` runs such tools in workers, with the graph's
state, store and runtime carried across.
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Iterable
from typing import Any

from toolfork._extras import import_optional
from toolfork.adapters._common import UnrebuiltError, attach, call_id, failure_reason, result_text
from toolfork.executor import Executor, ToolCall, ToolResult
from toolfork.tools.errors import ToolDefinitionError
from toolfork.tools.tool import Tool

import_optional("langchain_core", "toolfork.adapters.langchain")

from langchain_core.tools import BaseTool, ToolException  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

# Parameters BaseTool supplies itself (never the model): not "injected" in the sense that matters here.
_FRAMEWORK_PARAMS = frozenset({"run_manager", "callbacks", "config", "self"})


class ToolCallFailed(ToolException):
    """A call run in the pool did not succeed. ``result`` is its ``ToolResult`` (``status``, ``error``
    with the worker's type name, message and traceback). Subclasses say how it failed, so LangChain's
    ``handle_tool_error`` / ``handle_tool_errors`` can pick: ``ToolCallTimedOut``, ``ToolCallCrashed``."""

    def __init__(self, result: ToolResult) -> None:
        self.result = result
        self.status = result.status
        super().__init__(failure_reason(result))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.result,))


class ToolCallTimedOut(ToolCallFailed):
    """The call ran past its timeout; its worker was killed (and replaced)."""


class ToolCallCrashed(ToolCallFailed):
    """The worker died during the call (segfault, ``os._exit``, OOM kill); only this call failed."""


def failure(result: ToolResult) -> ToolCallFailed:
    """The exception for a failed result, by status."""
    if result.status == "timeout":
        return ToolCallTimedOut(result)
    if result.status == "crashed":
        return ToolCallCrashed(result)
    return ToolCallFailed(result)


class ToolforkTool(BaseTool):
    """A toolfork tool seen by LangChain: the model-facing schema is the tool's JSON Schema (validated
    by toolfork in the worker, not by a pydantic model in the host), calls go to the Executor."""

    handle_tool_error: Any = True
    _executor: Executor = PrivateAttr()
    _tool: Tool = PrivateAttr()

    def _run(self, **arguments: Any) -> str:
        result = self._executor.submit(ToolCall(call_id(self.name), self.name, arguments)).result()
        return self._output(result)

    async def _arun(self, **arguments: Any) -> str:
        result = await self._executor.acall(ToolCall(call_id(self.name), self.name, arguments))
        return self._output(result)

    def _output(self, result: ToolResult) -> str:
        if result.status != "ok":
            raise failure(result)
        return result_text(result)

    @property
    def toolfork_tool(self) -> Tool:
        """The toolfork ``Tool`` behind this LangChain tool."""
        return self._tool

    @property
    def executor(self) -> Executor:
        return self._executor


def to_langchain(tools: Iterable[Any] | Tool, executor: Executor, *,
                 handle_tool_error: Any = True) -> list[BaseTool]:
    """LangChain tools for ``tools`` (toolfork tools, toolkits, functions), in order, whose calls run on
    ``executor`` (tools it lacks are added to it). ``handle_tool_error`` is LangChain's setting for
    the ``ToolCallFailed`` a failed call raises: True (default) sends the message to the model as an
    error ToolMessage, False raises it, a string or a callable as in LangChain."""
    if executor is None:
        raise TypeError("to_langchain needs the Executor the calls run on: to_langchain(tools, executor)")
    items = [tools] if isinstance(tools, Tool) else list(tools)
    ex, _, by_name = attach(items, executor, {})
    return [wrap_tool(t, ex, handle_tool_error) for t in by_name.values()]


def wrap_tool(t: Tool, executor: Executor, handle_tool_error: Any) -> ToolforkTool:
    """One toolfork tool as a LangChain tool whose calls run on ``executor`` (``to_langchain`` for one;
    the LangGraph node wraps its own tools with it)."""
    lc = ToolforkTool(name=t.name, description=t.description or t.name,
                      args_schema=t.to_json_schema(inline=True), handle_tool_error=handle_tool_error)
    lc._executor = executor
    lc._tool = t
    return lc


# ----------------------------------------------------------------------------- LangChain -> toolfork

def host_only_reason(lc_tool: BaseTool) -> str | None:
    """Why this LangChain tool needs a LangGraph graph around it, or None: arguments a graph injects
    (state, store, runtime, tool call id) or a ``Command`` return value, which a graph applies."""
    reasons = []
    injected = injected_args(lc_tool)
    if injected:
        reasons.append(f"its argument(s) {', '.join(injected)} are injected by a graph (InjectedState, "
                       "InjectedStore, ToolRuntime or InjectedToolCallId), and a bare Executor has none")
    if returns_command(lc_tool):
        reasons.append("it returns a langgraph Command, which only a graph can apply")
    return "; and ".join(reasons) or None


def injected_args(lc_tool: BaseTool) -> list[str]:
    """Names of the arguments LangChain/LangGraph inject rather than the model giving them."""
    model_args = set(_model_args(lc_tool))
    names: list[str] = []
    if not isinstance(lc_tool.args_schema, dict):
        try:
            names = [n for n in getattr(lc_tool.get_input_schema(), "model_fields", {}) if n not in model_args]
        except Exception:
            names = []
    fn = getattr(lc_tool, "func", None) or getattr(lc_tool, "coroutine", None)
    if fn is not None:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        for n, p in params.items():
            if n in model_args or n in names or n in _FRAMEWORK_PARAMS:
                continue
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            names.append(n)
    return [n for n in names if n not in _FRAMEWORK_PARAMS]


def _model_args(lc_tool: BaseTool) -> list[str]:
    """The arguments the model gives: those of the tool-call schema (``args`` also lists injected ones
    in some langchain-core versions)."""
    schema = lc_tool.tool_call_schema
    if isinstance(schema, dict):
        return list(schema.get("properties", {}))
    return list(getattr(schema, "model_fields", {}))


def returns_command(lc_tool: BaseTool) -> bool:
    """The tool's function says it returns a ``Command`` (alone, in a union or in a list)."""
    fn = getattr(lc_tool, "func", None) or getattr(lc_tool, "coroutine", None)
    if fn is None:
        fn = type(lc_tool)._run
    try:
        ret = typing.get_type_hints(fn).get("return")
    except Exception:
        ret = getattr(fn, "__annotations__", {}).get("return")
    return _mentions_command(ret)


def _mentions_command(annotation: Any) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, str):
        return "Command" in annotation
    if getattr(annotation, "__name__", None) == "Command" and "langgraph" in getattr(annotation, "__module__", ""):
        return True
    return any(_mentions_command(a) for a in typing.get_args(annotation))


class _LangChainCall:
    """The callable of a ``from_langchain`` tool: runs in the worker, calls the LangChain tool there."""

    def __init__(self, lc_tool: BaseTool) -> None:
        self.lc_tool = lc_tool

    def __call__(self, **arguments: Any) -> Any:
        lc = self.lc_tool
        if getattr(lc, "func", "absent") is None and getattr(lc, "coroutine", None) is not None:
            result = asyncio.run(lc.ainvoke(arguments))  # an async-only tool: its own loop in the worker
        else:
            result = lc.invoke(arguments)
        if type(result).__name__ == "Command" and "langgraph" in type(result).__module__:
            raise TypeError(f"tool '{lc.name}' returned a langgraph Command, which only a graph can apply; "
                            "put the tool in a ToolforkToolNode, which applies the Commands its workers return")
        return result


@typing.overload
def from_langchain(lc_tool: BaseTool, **settings: Any) -> Tool: ...


@typing.overload
def from_langchain(lc_tool: Iterable[BaseTool], **settings: Any) -> list[Tool]: ...


def from_langchain(lc_tool: BaseTool | Iterable[BaseTool], **settings: Any) -> Tool | list[Tool]:
    """A toolfork ``Tool`` that calls ``lc_tool`` (in the worker that runs the call), or a list of them
    for a list of LangChain tools (as ``to_langchain`` takes a list). ``settings`` are toolfork tool
    settings (``timeout=``, ``retries=``...), for each tool. Raises ``ToolDefinitionError`` for tools
    that need a graph (see ``host_only_reason``)."""
    if not isinstance(lc_tool, BaseTool) and isinstance(lc_tool, Iterable) \
            and not isinstance(lc_tool, (str, bytes, dict)):
        return [from_langchain(t, **settings) for t in lc_tool]
    if not isinstance(lc_tool, BaseTool):
        raise TypeError(f"from_langchain takes a LangChain BaseTool, got {type(lc_tool).__name__}")
    reason = host_only_reason(lc_tool)
    if reason is not None:
        raise ToolDefinitionError(f"LangChain tool '{lc_tool.name}' needs a LangGraph graph: {reason}. "
                                  "Put it in a ToolforkToolNode, which runs such tools in workers with the "
                                  "graph's state, store and runtime carried across.")
    schema = convert_to_openai_tool(lc_tool)["function"].get("parameters") or {"type": "object", "properties": {}}
    return Tool.from_json_schema(lc_tool.name, lc_tool.description or "", schema, fn=_LangChainCall(lc_tool),
                                 **settings)


__all__ = [
    "ToolCallCrashed",
    "ToolCallFailed",
    "ToolCallTimedOut",
    "ToolforkTool",
    "UnrebuiltError",
    "failure",
    "from_langchain",
    "host_only_reason",
    "to_langchain",
    "wrap_tool",
]
