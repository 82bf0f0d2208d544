"""The exceptions the agent raises, in one place so callers can catch them without importing the loop.

The run-failure errors carry every result of the batch they ended: the caller of a failed run
usually wants to know what *did* happen (which calls succeeded, which timed out) before deciding
whether to retry, and the history already holds the same results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolfork.executor.types import ToolResult


class AgentError(Exception):
    """Base class of the agent's errors (misuse, provider failures, failed runs)."""


class AgentConfigError(AgentError):
    """The agent was set up wrongly: no provider, two tools with one name, a bad setting."""


class MissingAPIKeyError(AgentConfigError):
    """A provider was built without an API key and none is in the environment."""

    def __init__(self, provider: str, env_vars: tuple[str, ...]) -> None:
        self.provider = provider
        self.env_vars = env_vars
        names = " or ".join(env_vars)
        super().__init__(f"{provider}: no API key. Pass api_key=... or set {names}.")


class UnsupportedProviderToolError(AgentConfigError):
    """A ProviderTool was given to a provider (or API) that cannot host it."""


class ProviderError(AgentError):
    """The model API failed (HTTP error, malformed response). The SDK's exception is the cause."""

    def __init__(self, provider: str, message: str) -> None:
        self.provider = provider
        super().__init__(f"{provider}: {message}")


class MaxStepsExceeded(AgentError):
    """The loop called the model ``max_steps`` times without getting a final answer."""

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        super().__init__(
            f"the agent called the model {max_steps} times without a final answer (max_steps={max_steps});"
            " raise max_steps or look at why the model keeps calling tools"
        )


class ToolExecutionError(AgentError):
    """What the error handler receives when a call came back with status error / timeout / crashed.

    The tool's own exception lives in another process (or was already turned into text by the
    executor), so this wraps the executor's result: ``status``, ``error`` (ErrorInfo), ``result``.
    """

    def __init__(self, result: ToolResult) -> None:
        self.result = result
        self.status = result.status
        self.error = result.error
        self.tool_name = result.name
        detail = str(result.error) if result.error is not None else "no error information"
        verb = {"timeout": "timed out", "crashed": "crashed", "cancelled": "was cancelled"}.get(
            result.status, "failed"
        )
        super().__init__(f"tool '{result.name}' (call {result.call_id}) {verb}: {detail}")


class ToolRunFailed(AgentError):
    """A tool call failed under the fail-run policy. Raised after the whole batch finished.

    ``results`` holds one ToolResult per call of the batch, in call order (calls the gate answered
    or that never ran get a synthesised result); ``failures`` maps call id -> the exception.
    """

    def __init__(self, message: str, results: list[ToolResult] | None = None,
                 failures: dict[str, BaseException] | None = None) -> None:
        super().__init__(message)
        self.results: list[ToolResult] = list(results or [])
        self.failures: dict[str, BaseException] = dict(failures or {})


class ToolRunsExceeded(ToolRunFailed):
    """A call went over its run key's max-runs budget and no error handler supplied a result."""

    def __init__(self, tool_name: str, run_key: str, limit: int, call_id: str = "") -> None:
        self.tool_name = tool_name
        self.run_key = run_key
        self.limit = limit
        self.call_id = call_id
        what = f"tool '{tool_name}'" if run_key == tool_name else f"tool '{tool_name}' with these inputs"
        super().__init__(
            f"{what} reached its limit of {limit} run(s) in this chat() (call {call_id or '?'}); "
            "raise it with agent.tool_max_runs(n) or the tool's max_runs"
        )


class ResumeError(AgentError):
    """resume() / submit_tool_results() / resume_from() got something it cannot apply."""


def describe(value: Any) -> str:
    """A short repr for error messages: long values are cut so a message stays one readable line."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = [
    "AgentConfigError",
    "AgentError",
    "MaxStepsExceeded",
    "MissingAPIKeyError",
    "ProviderError",
    "ResumeError",
    "ToolExecutionError",
    "ToolRunFailed",
    "ToolRunsExceeded",
    "UnsupportedProviderToolError",
]
