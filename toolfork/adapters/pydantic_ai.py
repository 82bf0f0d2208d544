"""``ToolforkToolset``: toolfork tools as a pydantic-ai toolset whose calls run in the fork pool.

pydantic-ai starts each tool call of a model response as its own asyncio task; each task here awaits
``Executor.acall``, and concurrent single calls share the pool's workers, so the calls of one response
run side by side in worker processes (CPU-bound ones too, past the GIL), each with a real timeout and
crash isolation.

Arguments are validated by toolfork, in the worker, against the tool's own schema; pydantic-ai's
validator is left permissive (any JSON object passes), so one schema decides. Invalid arguments come
back to the model as pydantic-ai's retry feedback (``ModelRetry``), counted against the tool's
``max_retries`` like any retry. Other failures (the tool raised, timed out or crashed) are, by default,
returned to the model as the tool's result text starting with ``Error:`` (``failures="return"``): one
bad call does not end the run. ``failures="retry"`` raises ``ModelRetry`` for them too; ``"raise"``
raises ``ToolCallError`` out of the run.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar

import dill

from toolfork._extras import import_optional
from toolfork.adapters._common import attach, call_id, failure_text, is_input_error, result_value
from toolfork.adapters.callables import stand_in
from toolfork.executor import Executor, ToolCall, ToolResult
from toolfork.tools.tool import Tool

import_optional("pydantic_ai", "toolfork.adapters.pydantic_ai")

from pydantic_ai import FunctionToolset, ModelRetry, RunContext  # noqa: E402
from pydantic_ai.tools import ToolDefinition  # noqa: E402
from pydantic_ai.toolsets import AbstractToolset  # noqa: E402
from pydantic_ai.toolsets.abstract import ToolsetTool  # noqa: E402
from pydantic_core import SchemaValidator, core_schema  # noqa: E402

# Any JSON object passes: toolfork validates against the tool's schema in the worker.
PERMISSIVE = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))

Failures = Literal["return", "retry", "raise"]


class ToolCallError(RuntimeError):
    """A call failed in the pool and the toolset was built with ``failures="raise"``; ``result`` is its
    ``ToolResult``."""

    def __init__(self, result: ToolResult) -> None:
        self.result = result
        super().__init__(failure_text(result))


class ToolforkToolset(AbstractToolset[Any]):
    """A pydantic-ai toolset of toolfork tools (``@tool`` functions, ``Tool``s, toolkits, plain
    functions). ``executor_options`` go to the Executor it creates when ``executor`` is None (then
    ``close()`` or ``async with`` ends it); a given Executor is shared and left open."""

    def __init__(self, tools: Iterable[Any], executor: Executor | None = None, *, id: str | None = None,
                 max_retries: int = 1, failures: Failures = "return", **executor_options: Any) -> None:
        if failures not in ("return", "retry", "raise"):
            raise ValueError(f"failures must be 'return', 'retry' or 'raise', got {failures!r}")
        self._id = id
        self.max_retries = max_retries
        self.failures = failures
        self._executor, self._owns_executor, self._tools = attach(tools, executor, executor_options)

    @property
    def id(self) -> str | None:
        return self._id

    @property
    def executor(self) -> Executor:
        return self._executor

    @property
    def tools(self) -> dict[str, Tool]:
        return dict(self._tools)

    def close(self) -> None:
        """End the Executor this toolset created (a shared one is left open). Not tied to
        ``async with``: pydantic-ai enters and leaves a toolset around every run, and the pool outlives
        runs."""
        if self._owns_executor:
            self._executor.close()

    def __enter__(self) -> ToolforkToolset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return {
            name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(name=name, description=t.description or None,
                                        parameters_json_schema=t.to_json_schema(inline=True)),
                max_retries=self.max_retries,
                args_validator=PERMISSIVE,
            )
            for name, t in self._tools.items()
        }

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        result = await self._executor.acall(ToolCall(call_id(getattr(ctx, "tool_call_id", None)), name,
                                                     dict(tool_args)))
        if result.status == "ok":
            return result_value(result)
        if is_input_error(result) or self.failures == "retry":
            assert result.error is not None
            raise ModelRetry(result.error.message if is_input_error(result) else failure_text(result))
        if self.failures == "raise":
            raise ToolCallError(result)
        return failure_text(result)


log = logging.getLogger("toolfork.adapters.pydantic_ai")

DepsT = TypeVar("DepsT")

# RunContext fields that hold the host's live objects (the model and its HTTP client, the agent, the
# tracer, the workspace, the tool manager): a worker gets None in their place, and so for any other
# field that cannot be serialized, except ``deps`` (deps that cannot go make the call run in the host).
LIVE = ("model", "agent", "tracer", "workspace", "pending_messages", "tool_manager")


class ToolforkFunctionToolset(FunctionToolset[DepsT]):
    """pydantic-ai's ``FunctionToolset`` whose functions run in the fork pool: same constructor, same
    ``add_function`` / ``@toolset.tool`` / ``Tool`` objects, same schemas, validation, retries
    (``ModelRetry``), ``prepare``, approval and deferral (``ApprovalRequired``, ``CallDeferred``), all done
    by pydantic-ai; only the call of each function, with its validated arguments, goes to a worker.
    ``executor``: the Executor the calls run on (default: the process's shared one). The ``RunContext``
    first parameter goes as a copy with its data (``deps``, ``retry``, ``tool_call_id``, messages, usage...)
    and without the host's live objects (``model``, ``agent``, ``tracer``: None); a function, arguments or
    deps that cannot be serialized run in the host, as pydantic-ai runs them."""

    def __init__(self, tools: Any = (), *args: Any, executor: Executor | None = None, **kwargs: Any) -> None:
        self.pool = executor  # before FunctionToolset.__init__: it adds the tools through add_tool
        super().__init__(list(tools), *args, **kwargs)

    def add_tool(self, tool: Any) -> None:
        tool = copy.copy(tool)  # the caller's Tool keeps calling its function in the host
        schema = copy.copy(tool.function_schema)
        schema.function = pooled_function(schema.function, schema.is_async, self.pool)
        tool.function_schema = schema
        super().add_tool(tool)


def _for_worker(args: tuple[Any, ...]) -> tuple[Any, ...]:
    if not args or not isinstance(args[0], RunContext):
        return args
    ctx = args[0]
    kept = {f.name: getattr(ctx, f.name) for f in dataclasses.fields(ctx)
            if f.init and not f.name.startswith("_") and f.name not in LIVE}
    for name, value in kept.items():  # other runtime objects of the host (a newer release may add some)
        if name != "deps" and not _sendable(value):
            kept[name] = None
    return (type(ctx)(model=None, **kept), *args[1:])  # type: ignore[arg-type]


def _sendable(value: Any) -> bool:
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    try:
        dill.dumps(value, recurse=True)
    except Exception:
        return False
    return True


def pooled_function(fn: Callable[..., Any], is_async: bool, executor: Executor | None) -> Callable[..., Any]:
    """A stand-in for ``fn`` that calls it in a worker (in the host when it cannot be serialized)."""
    return stand_in(fn, is_async, executor, _for_worker, _hint, log)


def _hint(args: tuple[Any, ...]) -> str | None:
    return getattr(args[0], "tool_call_id", None) if args and isinstance(args[0], RunContext) else None


__all__ = ["LIVE", "PERMISSIVE", "ToolCallError", "ToolforkFunctionToolset", "ToolforkToolset", "pooled_function"]
