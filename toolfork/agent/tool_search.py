"""ToolSearch: let an agent with hundreds of tools send only a few of them to the model.

The model sees one ``search_tools(query)`` tool; the host answers it (no worker needed, it only
reads the catalog) and the tools it finds are offered from the next model call on. The catalog's
tools are all given to the executor up front, so a discovered tool runs like any other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from toolfork.agent.special_tools import FrontendTool

_WORD = re.compile(r"[a-z0-9]+")


def _tokens(text: str) -> set[str]:
    return set(_WORD.findall(text.lower().replace("_", " ")))


def _matches(query_token: str, tokens: set[str]) -> bool:
    if query_token in tokens:
        return True
    # Cheap stemming: "emails" finds "email", "calc" finds "calculate".
    if len(query_token) >= 4:
        return any(t.startswith(query_token) or (len(t) >= 4 and query_token.startswith(t)) for t in tokens)
    return False


class ToolSearch:
    """Middleware item for ``Agent(tools=[...])``: exposes ``search_tools`` instead of ``tools``."""

    def __init__(self, tools: Iterable[Any], *, top_k: int = 5, name: str = "search_tools") -> None:
        if top_k < 1:
            raise ValueError(f"ToolSearch top_k must be at least 1, got {top_k}")
        self.items = list(tools)
        self.top_k = top_k
        self.name = name
        self._catalog: dict[str, Any] | None = None

    def catalog(self) -> dict[str, Any]:
        """The searchable tools by name (plain functions wrapped, toolkits expanded)."""
        if self._catalog is None:
            from toolfork.tools.registry import collect_tools

            self._catalog = {n: t for n, t in collect_tools(self.items).items() if t.is_visible}
        return self._catalog

    def spec(self) -> FrontendTool:
        """The schema of the search tool as the model sees it."""
        return FrontendTool(
            name=self.name,
            description=(
                f"Search a catalog of {len(self.catalog())} more tools by what they do. Tools you find "
                "can be called from your next turn. Use short keywords, e.g. 'send email' or 'sql query'."
            ),
            input_schema={
                "type": "object",
                "properties": {"query": {"type": "string", "description": "keywords describing the task"}},
                "required": ["query"],
            },
        )

    def search(self, query: str, exclude: Iterable[str] = ()) -> list[Any]:
        """Best matching catalog tools first (name hits weigh more than description hits)."""
        skip = set(exclude)
        words = _tokens(query)
        scored: list[tuple[int, str]] = []
        for name, tool in self.catalog().items():
            if name in skip:
                continue
            name_tokens = _tokens(name)
            desc_tokens = _tokens(str(getattr(tool, "description", "") or ""))
            score = sum(3 if _matches(w, name_tokens) else 1 if _matches(w, desc_tokens) else 0 for w in words)
            if query.strip().lower() == name.lower():
                score += 10
            if score > 0:
                scored.append((score, name))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [self.catalog()[name] for _, name in scored[: self.top_k]]

    def answer(self, query: str, already: Iterable[str]) -> tuple[str, list[str]]:
        """The text the model gets back and the names that become available."""
        found = self.search(query)
        if not found:
            return (f"No tool matches {query!r}. Try other keywords.", [])
        known = set(already)
        lines = [f"Found {len(found)} tool(s); call them from your next turn:"]
        for tool in found:
            suffix = " (already available)" if tool.name in known else ""
            lines.append(f"- {tool.name}: {getattr(tool, 'description', '')}{suffix}")
        return ("\n".join(lines), [t.name for t in found])


__all__ = ["ToolSearch"]
