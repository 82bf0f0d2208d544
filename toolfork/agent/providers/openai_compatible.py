"""Any server that speaks the OpenAI Chat Completions API (Ollama, vLLM, LM Studio, llama.cpp).

Local servers usually need no key, so a missing key is not an error here; the base URL defaults to
Ollama's. Usage in streams is not requested by default: several servers reject ``stream_options``.
"""

from __future__ import annotations

import os
from typing import Any

from toolfork.agent.providers.openai import Api, OpenAI

OLLAMA_BASE_URL = "http://localhost:11434/v1"


class OpenAICompatible(OpenAI):
    """An OpenAI-compatible server by base URL: ``base_url`` or ``OPENAI_BASE_URL``, else Ollama's."""

    name = "openai-compatible"

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 api: Api = "chat", stream_usage: bool = False, **kwargs: Any) -> None:
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or OLLAMA_BASE_URL
        super().__init__(model, api_key=api_key, base_url=base_url, api=api, stream_usage=stream_usage, **kwargs)

    def _resolve_key(self, api_key: str | None) -> str:
        return api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"


__all__ = ["OLLAMA_BASE_URL", "OpenAICompatible"]
