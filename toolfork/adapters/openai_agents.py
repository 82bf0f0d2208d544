"""``function_tools(tools, executor)``: toolfork tools as OpenAI Agents SDK ``FunctionTool``s whose
invocations run in the fork pool.

The SDK runs the function calls of one model response concurrently (a task each); each awaits
``Executor.acall``, and concurrent single calls share the pool's workers, so they run side by side in
worker processes with real timeouts and crash isolation.

Schemas are strict, as the SDK expects by default: toolfork's ``to_strict`` closes every object and
makes every property required, optional ones nullable (a null then means "use the default": toolfork's
validation drops it). A tool whose arguments have no strict form (a free-form ``dict``) gets its plain
schema with ``strict_json_schema=False`` rather than being refused. Arguments are validated by toolfork
in the worker; a call that fails (invalid arguments, an exception, a timeout, a crash) returns a
string starting with ``Error:`` to the model, as the SDK's own ``function_tool`` does by default, so
one bad call does not end the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from toolfork._extras import import_optional
from toolfork.adapters._common import attach, call_id, failure_text, result_text
from toolfork.executor import Executor, ToolCall
from toolfork.tools.errors import ToolDefinitionError
from toolfork.tools.schema import to_strict
from toolfork.tools.tool import Tool

import_optional("agents", "toolfork.adapters.openai_agents")

from agents import FunctionTool  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402


def function_tools(tools: Iterable[Any] | Tool, executor: Executor) -> list[FunctionTool]:
    """One ``FunctionTool`` per tool (toolfork tools, toolkits, functions), in order, running on
    ``executor``; tools it lacks are added to it. The Executor is not owned: close it yourself (it may
    serve several agents and adapters at once)."""
    if executor is None:
        raise TypeError("function_tools needs the Executor the calls run on: function_tools(tools, executor)")
    items = [tools] if isinstance(tools, Tool) else list(tools)
    ex, _, by_name = attach(items, executor, {})
    return [function_tool(t, ex) for t in by_name.values()]


def function_tool(t: Tool, executor: Executor) -> FunctionTool:
    """The ``FunctionTool`` for one toolfork tool already known to ``executor``."""
    schema = t.to_json_schema(inline=True)
    try:
        params, strict = to_strict(schema), True
    except ToolDefinitionError:
        params, strict = schema, False  # no strict form (free-form objects): the SDK takes it non-strict
    name = t.name

    async def on_invoke_tool(ctx: ToolContext[Any], raw: str) -> str:
        try:
            arguments = json.loads(raw) if raw and raw.strip() else {}
        except ValueError as exc:
            return f"Error: the arguments are not valid JSON ({exc}); send a JSON object"
        if not isinstance(arguments, dict):
            return f"Error: the arguments must be a JSON object, got {type(arguments).__name__}"
        result = await executor.acall(ToolCall(call_id(getattr(ctx, "tool_call_id", None)), name, arguments))
        return result_text(result) if result.status == "ok" else failure_text(result)

    return FunctionTool(name=name, description=t.description or name, params_json_schema=params,
                        on_invoke_tool=on_invoke_tool, strict_json_schema=strict)


__all__ = ["function_tool", "function_tools"]
