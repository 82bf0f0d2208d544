"""Tools for ``test_sandbox_flag``: one that says where it ran, one whose own limits say sandbox=False,
one that returns an object whose unpickling would run code in the host."""

from __future__ import annotations

import os

from tests.planted import Planted
from toolfork import Limits, ToolOutput, tool
from toolfork.tools.output import ContentBlock


@tool
def where() -> str:
    """The pid of the process the call ran in."""
    return str(os.getpid())


@tool(limits=Limits(sandbox=False))
def where_unsandboxed() -> str:
    """The pid of the process the call ran in (its own limits say sandbox=False)."""
    return str(os.getpid())


@tool
def planted(marker: str) -> ToolOutput:
    """An output whose data would plant ``marker`` where it is unpickled."""
    return ToolOutput([ContentBlock("text", "x")], False, Planted(marker))
