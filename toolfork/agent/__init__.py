"""The agent loop: a model asks for tools, the gate vets the calls, the executor runs them (in
parallel in forked workers when enabled), results go back in call order until the model answers.
"""

from toolfork.agent.agent import Agent
from toolfork.agent.errors import (
    AgentConfigError,
    AgentError,
    MaxStepsExceeded,
    MissingAPIKeyError,
    ProviderError,
    ResumeError,
    ToolExecutionError,
    ToolRunFailed,
    ToolRunsExceeded,
    UnsupportedProviderToolError,
)
from toolfork.agent.events import (
    AgentEvent,
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
)
from toolfork.agent.history import ChatHistory, InMemoryChatHistory, SQLiteChatHistory
from toolfork.agent.messages import (
    AssistantMessage,
    Message,
    ToolCallRequest,
    ToolResultItem,
    ToolResultMessage,
    UserMessage,
)
from toolfork.agent.special_tools import FrontendTool, ProviderTool
from toolfork.agent.state import ApprovalRequest, PendingCall, RunPaused, ToolResultsRequest
from toolfork.agent.tool_search import ToolSearch

__all__ = [
    "Agent",
    "AgentConfigError",
    "AgentError",
    "AgentEvent",
    "ApprovalRequest",
    "AssistantMessage",
    "ChatHistory",
    "FrontendTool",
    "InMemoryChatHistory",
    "MaxStepsExceeded",
    "Message",
    "MissingAPIKeyError",
    "ModelCallFailed",
    "ModelCallFinished",
    "ModelCallStarted",
    "PendingCall",
    "ProviderError",
    "ProviderTool",
    "ResumeError",
    "RunFinished",
    "RunPaused",
    "SQLiteChatHistory",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallRequest",
    "ToolCallStarted",
    "ToolExecutionError",
    "ToolResultItem",
    "ToolResultMessage",
    "ToolResultsRequest",
    "ToolRunFailed",
    "ToolRunsExceeded",
    "ToolSearch",
    "UnsupportedProviderToolError",
    "UserMessage",
]
