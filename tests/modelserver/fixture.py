"""`model_server` pytest fixture: import it into a conftest.py to use it.

from tests.modelserver.fixture import model_server  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .server import ScriptedModelServer


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    """A running server per test, closed (threads joined) at teardown.

    Unused turns are not checked at teardown, because some tests stop the agent on purpose; call
    `model_server.assert_exhausted()` where the whole script must have been played.
    """
    with ScriptedModelServer() as server:
        yield server
