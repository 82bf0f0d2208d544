"""``ToolforkToolNode``: LangGraph's ``ToolNode`` with the tool calls run in toolfork's fork pool.

A drop-in: ``ToolNode(tools)`` becomes ``ToolforkToolNode(tools)``. It *is* a ``ToolNode`` (same input
and output shapes, ``tools_condition``, ``messages_key``, ``wrap_tool_call``, Command handling), whose
tools are LangChain tools (``to_langchain``) that send each call to one ``Executor``. The stock node
starts the calls of the last AIMessage together (a thread each, or a task each under ``ainvoke``), so
they run side by side in worker processes and come back as ToolMessages in call order; a failed,
timed-out or crashed call is a ToolMessage with ``status="error"`` and leaves the others alone.

Tools may be toolfork tools (``@tool``, ``Tool``, toolkits, plain functions) or LangChain tools
(converted with ``from_langchain``: the worker calls the LangChain tool it inherited by fork). LangChain
tools that need the host — arguments injected from the graph (``InjectedState``, ``InjectedStore``,
``ToolRuntime``, ``InjectedToolCallId``) or a ``Command`` return — are run by the stock machinery in
the host (``host_tools="inline"``, the default) or refused at construction (``host_tools="refuse"``).

The Executor is created when the node is built, before LangGraph starts its threads (the host forks
once, when the pool starts); ``close()`` ends it. Pass ``executor=`` to share one Executor between
nodes and other adapters: then the node does not close it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from toolfork._extras import import_optional
from toolfork.adapters._common import attach
from toolfork.executor import Executor
from toolfork.tools.errors import ToolDefinitionError
from toolfork.tools.tool import Tool

import_optional("langgraph", "toolfork.adapters.langgraph")

from langchain_core.tools import BaseTool  # noqa: E402
from langgraph.prebuilt import ToolNode  # noqa: E402

from toolfork.adapters.langchain import (  # noqa: E402
    ToolCallFailed,
    ToolforkTool,
    _wrap,
    from_langchain,
    host_only_reason,
)

TOOL_CALL_ERROR_TEMPLATE = "Error: {error}\n Please fix your mistakes."


def report_tool_errors(e: Exception) -> str:
    """The default ``handle_tool_errors`` of ``ToolforkToolNode``: every failure becomes an error
    ToolMessage for the model (a call that failed in the pool says how: error, timeout or crash)."""
    return TOOL_CALL_ERROR_TEMPLATE.format(error=str(e) if isinstance(e, ToolCallFailed) else repr(e))


class ToolforkToolNode(ToolNode):
    """``langgraph.prebuilt.ToolNode`` whose tool calls run in toolfork's fork pool. See the module
    docstring; ``executor_options`` go to the ``Executor`` the node creates (``workers=``,
    ``timeout=``, ``before_child=``...)."""

    def __init__(
        self,
        tools: Sequence[Any],
        executor: Executor | None = None,
        *,
        name: str = "tools",
        tags: list[str] | None = None,
        handle_tool_errors: Any = report_tool_errors,
        messages_key: str = "messages",
        host_tools: Literal["inline", "refuse"] = "inline",
        wrap_tool_call: Callable[..., Any] | None = None,
        awrap_tool_call: Callable[..., Any] | None = None,
        **executor_options: Any,
    ) -> None:
        if host_tools not in ("inline", "refuse"):
            raise ValueError(f"host_tools must be 'inline' or 'refuse', got {host_tools!r}")
        slots: list[tuple[str, Any]] = []  # ("pool", toolfork items) or ("lc", a BaseTool kept as it is)
        self.host_tool_reasons: dict[str, str] = {}
        """Name -> why that tool runs in the host rather than in a worker."""
        for item in tools:
            if isinstance(item, ToolforkTool):
                slots.append(("lc", item))  # already runs on its own Executor
            elif isinstance(item, BaseTool):
                reason = host_only_reason(item)
                if reason is None:
                    slots.append(("pool", from_langchain(item)))
                elif host_tools == "refuse":
                    raise ToolDefinitionError(
                        f"ToolforkToolNode: tool '{item.name}' cannot run in a worker process: {reason}. "
                        "Pass host_tools='inline' to run it in the host (never killed), or drop it.")
                else:
                    self.host_tool_reasons[item.name] = reason
                    slots.append(("lc", item))
            else:
                slots.append(("pool", item))
        pool_items = [item for kind, item in slots if kind == "pool"]
        ex, owned, by_name = attach(pool_items, executor, executor_options)
        self._executor = ex
        self._owns_executor = owned
        try:
            pool = iter(by_name.values())
            lc_tools: list[BaseTool] = []
            for kind, item in slots:
                if kind == "lc":
                    lc_tools.append(item)
                elif isinstance(item, Tool):
                    lc_tools.append(_wrap(next(pool), ex, handle_tool_error=False))
                else:  # a toolkit or list: as many tools as it expanded to
                    from toolfork.tools.registry import collect_tools

                    for _ in collect_tools([item]):
                        lc_tools.append(_wrap(next(pool), ex, handle_tool_error=False))
            extra: dict[str, Any] = {}
            if wrap_tool_call is not None:
                extra["wrap_tool_call"] = wrap_tool_call
            if awrap_tool_call is not None:
                extra["awrap_tool_call"] = awrap_tool_call
            super().__init__(lc_tools, name=name, tags=tags, handle_tool_errors=handle_tool_errors,
                             messages_key=messages_key, **extra)
        except BaseException:
            if owned:
                ex.close()
            raise

    @property
    def executor(self) -> Executor:
        """The Executor the calls run on."""
        return self._executor

    def close(self) -> None:
        """End the Executor this node created (a shared one given as ``executor=`` is left open)."""
        if self._owns_executor:
            self._executor.close()

    def __enter__(self) -> ToolforkToolNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["TOOL_CALL_ERROR_TEMPLATE", "ToolforkToolNode", "report_tool_errors"]
