"""Max-runs accounting: how many times each run key may be called within one ``chat()``.

Slots are reserved in the host, in call order, before any call of the batch is dispatched: the
verdict for call N never depends on how fast calls 1..N-1 finish, so a parallel batch and a
sequential one hit the limit on the same call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

DEFAULT_MAX_RUNS = 10


def canonical_json(value: Any) -> str:
    """Key-sorted, whitespace-free JSON: two dicts with the same content give the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def run_key(tool: Any, arguments: Mapping[str, Any]) -> str:
    """The tool name, or name plus a hash of the canonical inputs when the tool tracks by inputs."""
    name = str(tool.name)
    if getattr(tool, "track_by_inputs", False):
        digest = hashlib.sha256(canonical_json(dict(arguments)).encode()).hexdigest()[:16]
        return f"{name}#{digest}"
    return name


class RunCounter:
    """Counts reserved runs per run key for one ``chat()``; serialisable for paused runs."""

    def __init__(self, default_limit: int = DEFAULT_MAX_RUNS, counts: Mapping[str, int] | None = None) -> None:
        self.default_limit = default_limit
        self.counts: dict[str, int] = dict(counts or {})

    def limit_for(self, tool: Any) -> int:
        own = getattr(tool, "max_runs", None)
        return int(own) if own is not None else self.default_limit

    def reserve(self, tool: Any, arguments: Mapping[str, Any]) -> tuple[bool, str, int]:
        """Take a slot if one is left. Returns (granted, run key, limit)."""
        key = run_key(tool, arguments)
        limit = self.limit_for(tool)
        used = self.counts.get(key, 0)
        if used >= limit:
            return False, key, limit
        self.counts[key] = used + 1
        return True, key, limit

    def release(self, key: str) -> None:
        """Give a slot back (a call the user rejected never ran)."""
        if self.counts.get(key, 0) > 0:
            self.counts[key] -= 1


__all__ = ["DEFAULT_MAX_RUNS", "RunCounter", "canonical_json", "run_key"]
