"""Scripted model server for the agent's tests; usage in README.md next to this file."""

from .common import ImageView, ToolCallView, ToolResultView
from .recorded import RecordedRequest
from .script import ErrorTurn, ToolCallSpec, Turn
from .server import ScriptedModelServer

__all__ = [
    "ErrorTurn",
    "ImageView",
    "RecordedRequest",
    "ScriptedModelServer",
    "ToolCallSpec",
    "ToolCallView",
    "ToolResultView",
    "Turn",
]
