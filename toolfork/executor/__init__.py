"""Run batches of tool calls: fork pool, sequential, or Ray; results in call order."""

from toolfork.executor.backends.base import WAIT, Wait
from toolfork.executor.executor import Executor, default_workers
from toolfork.executor.journal import OUTCOME_UNKNOWN, Journal, JournalError
from toolfork.executor.session import Session, SessionLost, SessionUnavailable, TooManySessions
from toolfork.executor.stats import ExecutorStats
from toolfork.executor.types import (
    CallFinished,
    CallProgress,
    CallStarted,
    ErrorInfo,
    Event,
    ToolCall,
    ToolResult,
)
from toolfork.tools.runtime import ToolRuntime

__all__ = [
    "OUTCOME_UNKNOWN",
    "WAIT",
    "CallFinished",
    "CallProgress",
    "CallStarted",
    "ErrorInfo",
    "Event",
    "Executor",
    "ExecutorStats",
    "Journal",
    "JournalError",
    "Session",
    "SessionLost",
    "SessionUnavailable",
    "TooManySessions",
    "ToolCall",
    "ToolResult",
    "ToolRuntime",
    "Wait",
    "default_workers",
]
