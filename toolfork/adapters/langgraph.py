"""``ToolforkToolNode``: LangGraph's ``ToolNode`` with the tool calls run in toolfork's fork pool.

A drop-in: ``ToolNode(tools)`` becomes ``ToolforkToolNode(tools)``, same arguments, same behaviour by
default. It *is* a ``ToolNode``, and all of the stock node's own work stays the stock node's: parsing
the input, finding the tool, injecting ``InjectedState`` / ``InjectedStore`` / ``InjectedToolCallId``
/ ``ToolRuntime`` arguments, ``wrap_tool_call``, turning a bad argument into ``ToolInvocationError``,
``handle_tool_errors`` (by default: re-raise, as stock), ``Command`` checks, combining outputs. Only
the one step that runs the tool, ``tool.invoke(call, config)``, happens in a worker process: the
worker calls the same tool (inherited by fork) with the same call and a config carried across
(``langgraph_call.py``), and its result (``ToolMessage``, content blocks, ``Command``...) or the
exception it raised (rebuilt in the host: its own type) comes back. During the call, the worker reaches
the host's store, stream writer, interrupt bookkeeping and checkpointer through a relay served by the
waiting host thread (``relay.py``): ``interrupt()`` in a tool pauses the graph as in the host, and on
resume returns the resume value; ``get_stream_writer()`` events arrive in order.

The stock node starts the calls of the last AIMessage together (a thread each, or a task each under
``ainvoke``), so they run side by side in worker processes. A call that times out or crashes raises
``ToolCallTimedOut`` / ``ToolCallCrashed`` (``ToolException``\\ s: ``handle_tool_errors`` decides,
as for any exception). Tools may also be toolfork tools (``@tool``, ``Tool``, toolkits).

How the one step is replaced: the node overrides ``ToolNode._execute_tool_sync`` /
``_execute_tool_async`` (the stock node's own step, private to it) to hand them a stand-in for the
tool whose ``invoke`` goes to the pool; everything else is inherited. A tool a ``wrap_tool_call``
swaps in that the node was not built with runs in the host, as stock.

The Executor is created when the node is built, before LangGraph starts its threads (the host forks
once, when the pool starts); ``close()`` ends it. Pass ``executor=`` to share one Executor between
nodes and other adapters: then the node does not close it (and its tools are shipped to the running
workers, which needs them to pickle by value).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

from toolfork._extras import import_optional
from toolfork.adapters._common import SandboxRefused, attach, call_id, sandboxed
from toolfork.executor import Executor, ToolCall, ToolResult
from toolfork.tools.tool import Tool
from toolfork.tools.toolkit import Toolkit

import_optional("langgraph", "toolfork.adapters.langgraph")

from langchain_core.tools import BaseTool  # noqa: E402
from langchain_core.tools import tool as create_tool  # noqa: E402
from langgraph.prebuilt import ToolNode  # noqa: E402

from toolfork.adapters.langchain import ToolCallFailed, ToolforkTool, failure, wrap_tool  # noqa: E402
from toolfork.adapters.langgraph_call import GraphToolCall, outcome, pack  # noqa: E402
from toolfork.adapters.relay import CallObjects  # noqa: E402

TOOL_CALL_ERROR_TEMPLATE = "Error: {error}\n Please fix your mistakes."
_PAYLOAD_SCHEMA = {"type": "object", "properties": {"payload": {"type": "string"}}, "required": ["payload"]}
_SEQ = itertools.count()
_UNSET: Any = object()


def report_tool_errors(e: Exception) -> str:
    """A ``handle_tool_errors`` that turns every failure into an error ToolMessage for the model (a
    call that failed in the pool says how: error, timeout or crash). Not the default: the stock
    default re-raises what is not a bad argument, and so does ``ToolforkToolNode``'s."""
    return TOOL_CALL_ERROR_TEMPLATE.format(error=str(e) if isinstance(e, ToolCallFailed) else repr(e))


def _pool_name(name: str) -> str:
    """The pool's name for a LangGraph tool: unique per node (nodes sharing an Executor may each have a
    tool of one name), within the pool's name rules."""
    return f"lg{next(_SEQ)}_{re.sub(r'[^A-Za-z0-9_-]', '_', name)}"[:64]


class _InPool:
    """What the stock step sees as the tool: ``invoke`` / ``ainvoke`` run the real tool in a worker;
    every other attribute is the real tool's."""

    def __init__(self, node: ToolforkToolNode, tool: BaseTool, pool_name: str) -> None:
        self._node, self._tool, self._pool_name = node, tool, pool_name

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tool, name)

    def _refuse_a_sandbox(self) -> None:
        if sandboxed(self._node.executor, self._pool_name):
            raise SandboxRefused(f"tool {self._tool.name!r} was not run: its calls are sandboxed (the Executor's "
                                 "limits), and the LangGraph node carries values, exceptions and host objects "
                                 "pickled, which a sandboxed call must not send the host; use the tool with "
                                 "toolfork's Executor directly, or without sandboxed limits")

    def invoke(self, call_args: Any, config: Any = None, **_: Any) -> Any:
        self._refuse_a_sandbox()
        session = CallObjects()
        call = ToolCall(call_id(self._tool.name), self._pool_name,
                        {"payload": pack(call_args, config, session, is_async=False, lc_tool=self._tool)})
        result = session.serve_until(lambda: self._node.executor.submit(call))
        return _value(result)

    async def ainvoke(self, call_args: Any, config: Any = None, **_: Any) -> Any:
        self._refuse_a_sandbox()
        session = CallObjects()
        call = ToolCall(call_id(self._tool.name), self._pool_name,
                        {"payload": pack(call_args, config, session, is_async=True, lc_tool=self._tool)})
        result = await session.aserve_until(lambda: self._node.executor.acall(call))
        return _value(result)


def _value(result: ToolResult) -> Any:
    if result.status != "ok":
        raise failure(result)
    return outcome(result.output)


class ToolforkToolNode(ToolNode):
    """``langgraph.prebuilt.ToolNode`` whose tool calls run in toolfork's fork pool. See the module
    docstring. ``executor_options`` go to the ``Executor`` the node creates (``workers=``,
    ``timeout=``, ``before_child=``...)."""

    def __init__(
        self,
        tools: Sequence[Any],
        executor: Executor | None = None,
        *,
        name: str = "tools",
        tags: list[str] | None = None,
        handle_tool_errors: Any = _UNSET,
        messages_key: str = "messages",
        wrap_tool_call: Callable[..., Any] | None = None,
        awrap_tool_call: Callable[..., Any] | None = None,
        **executor_options: Any,
    ) -> None:
        lc_tools: list[BaseTool | Tool] = []  # LangChain tools, and toolfork tools to wrap once pooled
        for item in tools:
            if isinstance(item, (Tool, Toolkit)):
                from toolfork.tools.registry import collect_tools

                lc_tools.extend(collect_tools([item]).values())
            elif isinstance(item, BaseTool):
                lc_tools.append(item)
            else:  # a plain function: a LangChain tool, as the stock node makes it
                lc_tools.append(create_tool(item))
        node_tools = {t.name: t for t in lc_tools if isinstance(t, BaseTool)}
        self._in_pool: dict[int, tuple[BaseTool, str]] = {}
        pool_items: list[Tool] = [t for t in lc_tools if isinstance(t, Tool)]
        for t in lc_tools:
            if isinstance(t, BaseTool) and not isinstance(t, ToolforkTool):
                pool_name = _pool_name(t.name)
                self._in_pool[id(t)] = (t, pool_name)
                pool_items.append(Tool.from_json_schema(pool_name, t.description or t.name, _PAYLOAD_SCHEMA,
                                                        fn=GraphToolCall(t, node_tools)))
        ex, owned, by_name = attach(pool_items, executor, executor_options)
        self._executor = ex
        self._owns_executor = owned
        try:
            final = [wrap_tool(by_name[t.name], ex, handle_tool_error=False) if isinstance(t, Tool) else t
                     for t in lc_tools]
            extra: dict[str, Any] = {}
            if handle_tool_errors is not _UNSET:
                extra["handle_tool_errors"] = handle_tool_errors
            if wrap_tool_call is not None:
                extra["wrap_tool_call"] = wrap_tool_call
            if awrap_tool_call is not None:
                extra["awrap_tool_call"] = awrap_tool_call
            super().__init__(final, name=name, tags=tags, messages_key=messages_key, **extra)
        except BaseException:
            if owned:
                ex.close()
            raise

    def _pooled(self, request: Any) -> Any:
        entry = self._in_pool.get(id(request.tool))
        if entry is None or entry[0] is not request.tool:
            return request  # not one of ours (a wrapper swapped it in, or a toolfork tool): as stock
        return request.override(tool=_InPool(self, entry[0], entry[1]))

    def _execute_tool_sync(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        return super()._execute_tool_sync(self._pooled(request), *args, **kwargs)

    async def _execute_tool_async(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        return await super()._execute_tool_async(self._pooled(request), *args, **kwargs)

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
