"""Sorting the agent's ``tools=[...]`` list into what runs where.

The list may mix plain tools, functions, toolkits, frontend tools, provider tools and ToolSearch
middleware; the loop needs them apart: local tools go to the executor, frontend tools pause the
run, provider tools only ride along in the request, searchable tools are offered once found.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolfork.agent.errors import AgentConfigError
from toolfork.agent.special_tools import FrontendTool, ProviderTool
from toolfork.agent.tool_search import ToolSearch


def _flatten(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, (list, tuple)):
            out.extend(_flatten(item))
        elif item is not None:
            out.append(item)
    return out


class Toolset:
    """The agent's tools, sorted. Built once per agent (and again when tools are added)."""

    def __init__(self, items: Iterable[Any]) -> None:
        from toolfork.tools.registry import collect_tools
        from toolfork.tools.toolkit import Toolkit

        self._claimed: dict[str, str] = {}
        self.frontend: dict[str, FrontendTool] = {}
        self.provider_tools: list[ProviderTool] = []
        self.searches: dict[str, ToolSearch] = {}
        self.guidelines: list[tuple[str, str, list[str]]] = []
        plain: list[Any] = []
        for item in _flatten(items):
            if isinstance(item, FrontendTool):
                self._claim(item.name, "frontend tool")
                self.frontend[item.name] = item
            elif isinstance(item, ProviderTool):
                self.provider_tools.append(item)
            elif isinstance(item, ToolSearch):
                self._claim(item.name, "tool search")
                self.searches[item.name] = item
            else:
                if isinstance(item, Toolkit):
                    text = item.guidelines()
                    if text:
                        names = [t.name for t in item.tools()]
                        self.guidelines.append((str(item.name), text.strip(), names))
                plain.append(item)
        self.direct: dict[str, Any] = dict(collect_tools(plain))
        for name in self.direct:
            self._claim(name, "tool")
        # Catalog tools behind a search: executable once discovered, never offered before.
        self.catalog: dict[str, Any] = {}
        for search in self.searches.values():
            for name, tool in search.catalog().items():
                if name in self.direct and self.direct[name] is tool:
                    continue
                if name in self.direct or name in self.frontend or name in self.searches or (
                    name in self.catalog and self.catalog[name] is not tool
                ):
                    raise AgentConfigError(f"two tools are named '{name}' (one of them behind ToolSearch)")
                self.catalog[name] = tool
        #: Every tool the executor may be asked to run.
        self.local: dict[str, Any] = {**self.catalog, **self.direct}
        for name, tool in self.local.items():
            _check_runnable(name, tool)

    def _claim(self, name: str, kind: str) -> None:
        if name in self._claimed:
            raise AgentConfigError(f"two tools are named '{name}': a {self._claimed[name]} and a {kind}")
        self._claimed[name] = kind

    def offered(self, discovered: Iterable[str]) -> list[Any]:
        """Tools sent to the model this turn, in a stable order: direct, discovered, search, frontend."""
        found = set(discovered)
        tools: list[Any] = [t for t in self.direct.values() if t.is_visible]
        tools += [t for n, t in self.catalog.items() if n in found and t.is_visible]
        tools += [s.spec() for s in self.searches.values()]
        tools += [t for t in self.frontend.values() if t.is_visible]
        return tools

    def available(self, discovered: Iterable[str]) -> dict[str, Any]:
        """Name -> tool for every name the model may call this turn (the gate's allow-list)."""
        return {t.name: t for t in self.offered(discovered)}

    def system_prompt(self, instructions: str) -> str:
        parts = [instructions.strip()] if instructions and instructions.strip() else []
        for name, text, tool_names in self.guidelines:
            listing = ", ".join(tool_names) if tool_names else "(none)"
            parts.append(f"# {name}\n{text}\nTools: {listing}")
        return "\n\n".join(parts)


def _check_runnable(name: str, tool: Any) -> None:
    """A tool with nothing to run and no one to answer for it would be offered to the model and fail
    on every call: refused when the agent is built (``Tool.make(...)`` without ``set_callable``)."""
    from toolfork.tools.tool import Tool

    if not isinstance(tool, Tool) or tool.has_callable or tool.manual or tool.on_tool_called is not None:
        return
    raise AgentConfigError(
        f"tool '{name}' has no callable: give it one (set_callable(fn)), or declare who answers its calls: "
        "manual=True (a person or program supplies results through submit_tool_results), on_tool_called=..., "
        "or a FrontendTool for a client-side tool")


__all__ = ["Toolset"]
