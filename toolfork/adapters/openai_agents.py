"""The OpenAI Agents SDK's function tools, run in the fork pool: ``function_tool`` (the SDK's decorator,
same options and rules) and ``function_tools(tools, executor, **options)`` (toolfork tools).

``function_tool`` is the SDK's own ``agents.function_tool`` with one step moved: the SDK still builds the
tool (schema, docstring parsing, name and callable checks, guardrails, approval, timeouts, failure
messages) and still validates each call's arguments; only the call of the decorated function, with its
validated arguments, goes to a worker (``toolfork.adapters.callables``). The SDK exposes no hook for
that step, so the decorator replaces the function the SDK's invoker calls, in that invoker's closure; a
release of the SDK without that closure is refused at definition, naming the version. The run context
(``RunContextWrapper`` / ``ToolContext`` as first parameter) goes to the worker as a copy without its
``agent`` and ``run_config`` (the host's live objects); a function or context that cannot be
serialized runs in the host, as the stock decorator runs it.

The SDK runs the function calls of one model response concurrently (a task each); each awaits
``Executor.acall``, so they run side by side in worker processes. A call the SDK's ``timeout`` cancels
is killed in its worker, not abandoned in a thread.

``function_tools`` builds a ``FunctionTool`` per toolfork tool from its own schema (strict where the
schema has a strict form); toolfork validates its arguments in the worker, and a failed call (invalid
arguments, an exception, a timeout, a crash) raises in the host, so the SDK's failure policy
(``failure_error_function``, its default included) decides what the model reads. Plain functions given
to ``function_tools`` go through ``function_tool``.
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
from collections.abc import Iterable
from importlib.metadata import version
from typing import Any

from toolfork._extras import import_optional
from toolfork.adapters._common import attach, call_id, failure_reason, is_input_error, result_value
from toolfork.adapters.callables import PoolCallFailed, stand_in
from toolfork.executor import Executor, ToolCall
from toolfork.tools.errors import ToolDefinitionError
from toolfork.tools.schema import to_strict
from toolfork.tools.tool import Tool
from toolfork.tools.toolkit import Toolkit

import_optional("agents", "toolfork.adapters.openai_agents")

import agents  # noqa: E402
from agents import FunctionTool, ModelBehaviorError, RunContextWrapper  # noqa: E402
from agents.tool import set_function_tool_failure_error_function, with_function_tool_failure_error_handler  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402

log = logging.getLogger("toolfork.adapters.openai_agents")

# The options of the SDK's FunctionTool that function_tools passes through unchanged.
TOOL_FIELDS = ("is_enabled", "needs_approval", "tool_input_guardrails", "tool_output_guardrails",
               "timeout_behavior", "timeout_error_function", "defer_loading", "custom_data_extractor")


def function_tool(func: Any = None, /, *, executor: Executor | None = None, inline: bool = False,
                  **options: Any) -> Any:
    """``agents.function_tool`` whose function runs in the fork pool: use it as the SDK's (bare
    ``@function_tool``, ``@function_tool(...)`` or ``function_tool(fn, ...)``), with the same options and
    the same refusals. ``executor``: the Executor the calls run on (default: the process's shared one,
    ``toolfork.adapters.callables.default_executor()``, started on the first call). ``inline=True``:
    the function runs in the host, exactly as the SDK runs it (for a tool that must change host state:
    a worker changes only its own copy of what the function closes over)."""

    def build(fn: Any) -> FunctionTool:
        sdk_tool = agents.function_tool(fn, **options)
        if not inline:
            _run_in_pool(sdk_tool, executor)
        return sdk_tool

    if func is None:
        return build
    return build(func)


def _signature() -> inspect.Signature:
    """The SDK's signature plus ours: introspection (and IDEs) see every option of the SDK's decorator."""
    sdk = inspect.signature(agents.function_tool)
    ours = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a)
            for n, d, a in (("executor", None, "Executor | None"), ("inline", False, "bool"))]
    return sdk.replace(parameters=[*sdk.parameters.values(), *ours])


function_tool.__signature__ = _signature()  # type: ignore[attr-defined]


def _run_in_pool(sdk_tool: FunctionTool, executor: Executor | None) -> None:
    impl = getattr(sdk_tool.on_invoke_tool, "_invoke_tool_impl", None)
    code = getattr(impl, "__code__", None)
    names = code.co_freevars if code is not None else ()
    if "the_func" not in names or "is_sync_function_tool" not in names or impl is None:
        raise ToolDefinitionError(
            f"openai-agents {version('openai-agents')}: its function_tool no longer has the shape toolfork "
            "runs in the pool (tested: 0.24); use toolfork.adapters.openai_agents.function_tools with "
            "toolfork tools, or agents.function_tool to run this tool in the host")
    cells = dict(zip(names, impl.__closure__ or (), strict=True))
    fn = cells["the_func"].cell_contents
    sync = bool(cells["is_sync_function_tool"].cell_contents)
    cells["the_func"].cell_contents = stand_in(fn, not sync, executor, _for_worker, _hint, log)


def _for_worker(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The arguments as a worker gets them: a run context as a copy without the host's live objects."""
    if args and isinstance(args[0], RunContextWrapper):
        ctx = copy.copy(args[0])
        for live in ("agent", "run_config"):
            if hasattr(ctx, live):
                object.__setattr__(ctx, live, None)
        return (ctx, *args[1:])
    return args


def _hint(args: tuple[Any, ...]) -> str | None:
    return getattr(args[0], "tool_call_id", None) if args and isinstance(args[0], ToolContext) else None


def function_tools(tools: Iterable[Any] | Tool, executor: Executor, **options: Any) -> list[FunctionTool]:
    """One ``FunctionTool`` per tool (toolfork tools, toolkits, plain functions), in order, running on
    ``executor``; tools it lacks are added to it. ``options`` are ``function_tool``'s (``strict_mode``,
    ``failure_error_function``, ``is_enabled``, ``timeout``, guardrails, ...), for every tool;
    ``name_override`` / ``description_override`` only with one tool. A plain function goes through
    ``function_tool`` (the SDK's schema and validation); a toolfork tool keeps its own. The Executor is
    not owned: close it yourself (it may serve several agents and adapters at once)."""
    if executor is None:
        raise TypeError("function_tools needs the Executor the calls run on: function_tools(tools, executor)")
    items = [tools] if isinstance(tools, (Tool, Toolkit)) else list(tools)
    if ("name_override" in options or "description_override" in options) and len(items) != 1:
        raise TypeError("name_override / description_override name one tool; pass one tool with them")
    out: list[FunctionTool] = []
    for item in items:
        if isinstance(item, (Tool, Toolkit)) or not callable(item):
            _, _, by_name = attach([item], executor, {})
            out.extend(pooled_tool(t, executor, **options) for t in by_name.values())
        else:
            out.append(function_tool(item, executor=executor, **options))
    return out


_UNSET: Any = object()


def pooled_tool(t: Tool, executor: Executor, *, name_override: str | None = None,
                description_override: str | None = None, strict_mode: bool = True,
                failure_error_function: Any = _UNSET, timeout: float | None = None,
                docstring_style: Any = None, use_docstring_info: bool = True, **fields: Any) -> FunctionTool:
    """The ``FunctionTool`` for one toolfork tool already known to ``executor``, with
    ``function_tool``'s options. The docstring options are refused: a toolfork tool's description and
    argument docs were read when it was defined (``@tool``)."""
    if docstring_style is not None or use_docstring_info is not True:
        raise TypeError(f"tool '{t.name}': docstring_style / use_docstring_info apply to plain functions; a "
                        "toolfork tool's docs were read by @tool (pass description= there, or "
                        "description_override= here)")
    unknown = sorted(set(fields) - set(TOOL_FIELDS))
    if unknown:
        raise TypeError(f"tool '{t.name}': unknown function_tool option(s) {', '.join(unknown)}")
    schema = t.to_json_schema(inline=True)
    strict = False
    params = schema
    if strict_mode:
        try:
            params, strict = to_strict(schema), True
        except ToolDefinitionError:
            pass  # no strict form (free-form objects): the SDK takes it non-strict
    name = t.name

    async def invoke(ctx: ToolContext[Any], raw: str) -> Any:
        tool_name = getattr(ctx, "tool_name", None) or name
        try:
            arguments = json.loads(raw) if raw and raw.strip() else {}
        except ValueError as exc:
            raise ModelBehaviorError(f"Invalid JSON input for tool {tool_name}: {exc}") from None
        if not isinstance(arguments, dict):
            raise ModelBehaviorError(f"Invalid JSON input for tool {tool_name}: expected a JSON object, got "
                                     f"{type(arguments).__name__}")
        result = await executor.acall(ToolCall(call_id(getattr(ctx, "tool_call_id", None)), name, arguments))
        if result.status == "ok":
            return result_value(result)
        if is_input_error(result):
            raise ModelBehaviorError(f"Invalid JSON input for tool {tool_name}: {failure_reason(result)}")
        raise PoolCallFailed(result)

    def on_handled_error(_tool: FunctionTool, error: Exception, _raw: str) -> None:
        log.debug("tool %s failed, the model is told: %s", name, error)

    ft = FunctionTool(name=name_override or name, description=description_override or t.description or name,
                      params_json_schema=params, strict_json_schema=strict,
                      on_invoke_tool=with_function_tool_failure_error_handler(invoke, on_handled_error),
                      timeout_seconds=timeout, **fields)
    if failure_error_function is _UNSET:
        return set_function_tool_failure_error_function(ft)
    return set_function_tool_failure_error_function(ft, failure_error_function)


__all__ = ["function_tool", "function_tools", "pooled_tool"]
