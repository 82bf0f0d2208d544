"""Model providers: Anthropic (Messages API), OpenAI (Chat Completions and Responses) and any
OpenAI-compatible server. The SDKs are imported only when a provider makes its first call."""

from toolfork.agent.providers.anthropic import Anthropic
from toolfork.agent.providers.base import ModelRequest, Provider
from toolfork.agent.providers.openai import OpenAI, OpenAIResponses
from toolfork.agent.providers.openai_compatible import OpenAICompatible

__all__ = ["Anthropic", "ModelRequest", "OpenAI", "OpenAICompatible", "OpenAIResponses", "Provider"]
