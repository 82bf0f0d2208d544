"""smolagents' own integration tests for remote executors, run against ``ToolforkExecutor``.

``test_remote_executors.py`` here holds ``CommonDockerExecutorIntegration``, the test class smolagents'
Docker and Modal executors share, copied unchanged from the smolagents 1.26.0 sdist (Apache License 2.0,
see LICENSE), and one subclass of it whose executor is ours. Vendored rather than fetched at test time:
the suite runs offline, at a pinned version, and a reviewer sees exactly what runs. Nothing here is
skipped.

The fixture below is the only thing that differs from upstream's Docker run: it builds the executor the
way their fixture builds ``DockerExecutor`` (``additional_imports=["pillow", "numpy"]``, a logger writing
to a buffer) and deletes it after the test. The executor is as a user gets it: a sandboxed session.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from rich.console import Console
from smolagents.monitoring import AgentLogger, LogLevel  # the [smolagents] extra: missing, these tests fail

from toolfork.adapters.smolagents import ToolforkExecutor


@pytest.fixture
def custom_executor() -> Iterator[ToolforkExecutor]:
    executor = ToolforkExecutor(
        additional_imports=["pillow", "numpy"],
        logger=AgentLogger(LogLevel.INFO, Console(force_terminal=False, file=io.StringIO())),
        timeout=60,
    )
    yield executor
    executor.delete()
