"""Shared pieces of the agent tests: the scripted model server and providers pointed at it.

Every provider here is the real one (real SDK, real HTTP to 127.0.0.1); only the model's answers
are scripted. ``max_retries=0`` so a scripted API error surfaces at once instead of being retried.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.modelserver import ScriptedModelServer
from tests.modelserver.fixture import model_server  # noqa: F401 - re-exported fixture
from toolfork.agent.providers import Anthropic, OpenAI, OpenAICompatible
from toolfork.agent.providers.base import Provider

FLAVOURS = ("anthropic", "openai-chat", "openai-responses")


def make_provider(server: ScriptedModelServer, flavour: str, **kwargs: Any) -> Provider:
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 30.0)
    if flavour == "anthropic":
        return Anthropic(model="claude-test", api_key="test-key", base_url=server.base_url, **kwargs)
    if flavour == "openai-chat":
        return OpenAI(model="gpt-test", api_key="test-key", base_url=server.openai_base_url, **kwargs)
    if flavour == "openai-responses":
        return OpenAI(model="gpt-test", api_key="test-key", base_url=server.openai_base_url, api="responses",
                      **kwargs)
    if flavour == "openai-compatible":
        return OpenAICompatible(model="llama-test", base_url=server.openai_base_url, **kwargs)
    raise ValueError(flavour)


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def provider(model_server: ScriptedModelServer, flavour: str) -> Provider:  # noqa: F811
    return make_provider(model_server, flavour)
