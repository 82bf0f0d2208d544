"""``Toolkit``: a named group of related tools with shared guidelines, filterable by the user."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from toolfork.tools.errors import ToolDefinitionError
from toolfork.tools.tool import Tool

K = TypeVar("K", bound="Toolkit")
ToolRef = str | type[Tool]


def _matches(t: Tool, ref: ToolRef) -> bool:
    if isinstance(ref, str):
        return t.name == ref
    return isinstance(t, ref)


def _label(ref: ToolRef) -> str:
    return repr(ref) if isinstance(ref, str) else ref.__name__


@dataclass(frozen=True)
class Selection:
    """What a user did to a toolkit's tools: immutable, so a derived toolkit shares nothing it could
    change behind the original's back, and deriving one is ``dataclasses.replace``."""

    exclude: tuple[ToolRef, ...] = ()
    only: tuple[ToolRef, ...] | None = None  # None: every tool
    adjust: tuple[tuple[ToolRef, Callable[[Tool], Tool | None]], ...] = ()  # ``with_`` in order
    added: tuple[Tool, ...] = ()


class Toolkit:
    """Subclasses override ``provide()`` (and optionally ``guidelines()``); users narrow or adjust the
    result with ``exclude``/``only``/``with_`` and extend it with ``add``. Filters apply to added tools
    too, and ``tools()`` is computed once per configuration (``provide()`` may be costly).

    ``exclude``, ``only``, ``with_`` and ``add`` return a new toolkit and leave the one they were called
    on as it was, so a toolkit shared between agents (or a module-level one) is never narrowed behind
    another user's back; ``with_`` hands its function a copy of the tool, never the shared tool object."""

    # The toolkit's name (in messages, `toolfork tools`); a subclass that sets none gets its class name.
    name: ClassVar[str] = "Toolkit"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__

    def __init__(self) -> None:
        self._selection()

    def _selection(self) -> Selection:
        # Created lazily too, so a subclass that forgets super().__init__() still works.
        selection: Selection | None = self.__dict__.get("_toolkit_selection")
        if selection is None:
            selection = self.__dict__["_toolkit_selection"] = Selection()
        return selection

    @property
    def toolkit_name(self) -> str:
        return type(self).name or type(self).__name__

    def guidelines(self) -> str | None:
        """Instructions for the model on using these tools together; the agent puts them in the system
        prompt."""
        return None

    def provide(self) -> list[Tool]:
        return []

    # -- configuration (each returns a new toolkit) ----------------------------------------------
    def clone(self: K) -> K:
        """A new toolkit like this one: a shallow copy (its own settings, e.g. an API key, shared), the
        same selection, none of the tools already built. For subclasses whose own ``with_...`` methods
        return a changed toolkit."""
        return self._derive()

    def _derive(self: K, **changes: Any) -> K:
        new = copy.copy(self)
        new.__dict__["_toolkit_selection"] = dataclasses.replace(self._selection(), **changes)
        new.__dict__.pop("_toolkit_tools", None)
        return new

    def exclude(self: K, refs: Iterable[ToolRef]) -> K:
        """Drop tools by name or class. Excluding a tool that is not there is not an error."""
        return self._derive(exclude=(*self._selection().exclude, *_refs(refs)))

    def only(self: K, refs: Iterable[ToolRef]) -> K:
        """Keep only these tools; naming a tool that does not exist is an error (a typo would otherwise
        silently remove everything)."""
        return self._derive(only=(*(self._selection().only or ()), *_refs(refs)))

    def with_(self: K, ref: ToolRef, fn: Callable[[Tool], Tool | None]) -> K:
        """Adjust one tool: ``fn(tool)`` may change it in place (return None) or return a replacement. It
        gets a copy of the tool: the toolkit's (possibly module-level) tool objects are never changed."""
        if not callable(fn):
            raise ToolDefinitionError(f"{self.toolkit_name}.with_(): the second argument must be callable")
        return self._derive(adjust=(*self._selection().adjust, (_refs([ref])[0], fn)))

    def add(self: K, *tools: Tool | Callable[..., Any]) -> K:
        """Add tools (plain functions are wrapped with ``@tool``)."""
        from toolfork.tools.decorator import tool as make_tool

        added = tuple(t if isinstance(t, Tool) else make_tool(t) for t in tools)
        return self._derive(added=(*self._selection().added, *added))

    # -- the result -----------------------------------------------------------------------------
    def tools(self) -> list[Tool]:
        cached: list[Tool] | None = self.__dict__.get("_toolkit_tools")
        if cached is not None:
            return list(cached)
        selection = self._selection()
        provided = self.provide()
        if not isinstance(provided, (list, tuple)):
            raise ToolDefinitionError(f"{self.toolkit_name}.provide() must return a list of tools")
        result: list[Tool] = []
        for t in [*provided, *selection.added]:
            if not isinstance(t, Tool):
                raise ToolDefinitionError(
                    f"{self.toolkit_name}.provide() returned {t!r}, which is not a Tool")
            result.append(t)
        all_names = [t.name for t in result]
        only = selection.only
        if only is not None:
            for ref in only:
                if not any(_matches(t, ref) for t in result):
                    raise ToolDefinitionError(
                        f"{self.toolkit_name}.only(): no tool {_label(ref)} "
                        f"(tools: {', '.join(all_names) or 'none'})")
            result = [t for t in result if any(_matches(t, r) for r in only)]
        result = [t for t in result if not any(_matches(t, r) for r in selection.exclude)]
        for ref, fn in selection.adjust:
            hit = False
            for i, t in enumerate(result):
                if _matches(t, ref):
                    hit = True
                    t = copy.copy(t)
                    result[i] = t
                    replaced = fn(t)
                    if replaced is not None:
                        if not isinstance(replaced, Tool):
                            raise ToolDefinitionError(
                                f"{self.toolkit_name}.with_({_label(ref)}): the function returned "
                                f"{replaced!r}, not a Tool (return None to keep the adjusted tool)")
                        result[i] = replaced
            if not hit:
                raise ToolDefinitionError(
                    f"{self.toolkit_name}.with_(): no tool {_label(ref)} among the selected tools "
                    f"({', '.join(t.name for t in result) or 'none'})")
        self.__dict__["_toolkit_tools"] = result
        return list(result)

    def __iter__(self) -> Any:
        return iter(self.tools())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.toolkit_name!r}>"


def _refs(refs: Iterable[ToolRef]) -> list[ToolRef]:
    if isinstance(refs, (str, type)):
        refs = [refs]  # a single name or class is forgiven
    out: list[ToolRef] = []
    for ref in refs:
        if isinstance(ref, str) or (isinstance(ref, type) and issubclass(ref, Tool)):
            out.append(ref)
        elif isinstance(ref, Tool):
            out.append(ref.name)
        else:
            raise ToolDefinitionError(f"a tool filter takes tool names or Tool subclasses, got {ref!r}")
    return out


__all__ = ["Selection", "Toolkit"]
