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

from collections.abc import Iterable
from typing import Any, Literal

from toolfork._extras import import_optional
from toolfork.adapters._common import attach, call_id, failure_text, is_input_error, result_value
from toolfork.executor import Executor, ToolCall, ToolResult
from toolfork.tools.tool import Tool

import_optional("pydantic_ai", "toolfork.adapters.pydantic_ai")

from pydantic_ai import ModelRetry, RunContext  # noqa: E402
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


__all__ = ["PERMISSIVE", "ToolCallError", "ToolforkToolset"]
