"""Tools for ``test_sandbox_flag``: one that says where it ran, one whose own limits say sandbox=False,
one that returns an object whose unpickling would run code in the host."""

from __future__ import annotations

import os
import secrets

from tests.planted import Planted
from toolfork import Limits, ToolOutput, tool
from toolfork.tools.output import ContentBlock

_PROCESS: list[str] = []  # a token drawn by the first call in a process: a warm worker keeps it


def _where() -> str:
    """``pid token``: the pid the call saw (1 in a sandbox, the first of its own PID namespace) and a
    token that is new in every process the calls run in."""
    if not _PROCESS:
        _PROCESS.append(secrets.token_hex(8))
    return f"{os.getpid()} {_PROCESS[0]}"


@tool
def where() -> str:
    """Where the call ran: its pid and a token of its process."""
    return _where()


@tool(limits=Limits(sandbox=False))
def where_unsandboxed() -> str:
    """Where the call ran (its own limits say sandbox=False)."""
    return _where()


@tool
def planted(marker: str) -> ToolOutput:
    """An output whose data would plant ``marker`` where it is unpickled."""
    return ToolOutput([ContentBlock("text", "x")], False, Planted(marker))
