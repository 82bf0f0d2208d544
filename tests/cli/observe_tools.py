"""Tools for the tests of what ``toolfork run`` shows (log lines, summary, record fields): the CLI
test tools plus one that logs from its worker while the progress bar is up."""

from __future__ import annotations

import logging
import time
import warnings

from tests.cli.cli_tools import boom, die, echo, echo_here, nap
from toolfork import tool


@tool
def grumble(seconds: float, text: str = "grumbling from a worker") -> str:
    """Sleep, log a warning (in the worker), sleep again: the line lands while the bar is shown.

    Args:
        seconds: how long to sleep before and after the warning
        text: the warning's message
    """
    time.sleep(seconds)
    logging.getLogger("observe_tools").warning(text)
    time.sleep(seconds)
    return text


@tool(inline=True)
def shout_here(text: str = "inline says hi") -> str:
    """Log a warning and warn (``warnings.warn``) in the host, as an inline tool runs there.

    Args:
        text: the log line's message
    """
    logging.getLogger("observe_tools").warning(text)
    warnings.warn("careful with inline tools", UserWarning, stacklevel=1)
    return text


TOOLS = [echo, boom, nap, die, grumble]
INLINE_TOOLS = [echo_here, shout_here]
