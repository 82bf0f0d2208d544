"""Tools the ``--tools SPEC`` tests load in every form: ``tests.cli.spec_tools:louder`` (MODULE:ATTR),
``tests.cli.spec_tools`` (MODULE: its TOOLS list), ``tests/cli/spec_tools.py`` (FILE) and
``tests/cli/spec_tools.py:louder`` (FILE:ATTR)."""

from __future__ import annotations

from toolfork import tool


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


@tool
def shout(text: str) -> str:
    """Upper-case the text.

    Args:
        text: what to shout
    """
    return text.upper()


@tool
def louder(text: str) -> str:
    """Upper-case the text and add an exclamation mark (not in TOOLS: only reachable as :louder).

    Args:
        text: what to shout
    """
    return text.upper() + "!"


TOOLS = [ping, shout]
