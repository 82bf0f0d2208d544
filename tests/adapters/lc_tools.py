"""LangChain tools for the LangGraph/LangChain adapter tests (module-level: workers import nothing,
they inherit these by fork, but the host must find them by name too)."""

from __future__ import annotations

import os
from typing import Annotated, Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState
from langgraph.types import Command


@tool
def lc_where(tag: str) -> str:
    """Say which process ran the call.

    Args:
        tag: echoed back
    """
    return f"{tag}:{os.getpid()}"


@tool
def lc_count_messages(label: str, state: Annotated[dict, InjectedState]) -> str:
    """Count the messages of the graph state (the state is injected by the host).

    Args:
        label: echoed back
    """
    return f"{label}:{len(state['messages'])}:{os.getpid()}"


@tool
def lc_goto(note: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Update the graph with a Command.

    Args:
        note: stored in the state's messages
    """
    return Command(update={"messages": [ToolMessage(f"noted {note} in {os.getpid()}", tool_call_id=tool_call_id)]})


@tool
def lc_command_in_disguise(note: str) -> Any:
    """Return a Command without saying so in the signature.

    Args:
        note: ignored
    """
    return Command(update={"messages": []})


@tool
def lc_shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: what to shout
    """
    return text.upper()
