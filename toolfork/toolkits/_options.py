"""Per-instance options for the web toolkits: what the developer decides, next to what the model decides.

A toolkit's options are keyed by tool name (``{"tavily_search": {"search_depth": "advanced"}}``),
validated when the toolkit is built and frozen there, so:

- a typo or a bad value fails at construction with an error naming the toolkit, tool, option and
  what is allowed, not at the first call in a worker minutes later;
- two instances of one toolkit never share option state (each holds its own frozen copy, taken
  from the caller's dicts and lists, which may change afterwards without effect), and
  ``with_options`` returns a new toolkit rather than changing this one, so the tools handed out
  earlier (to an agent, an executor) keep the options they were built with.

An option that names one of the tool's own parameters (Tavily ``max_results``) fixes it, as
Neuron's ``withOptions`` does: the parameter leaves the schema the model sees and the option's value
is always used. Wrapped in ``Default(...)`` it only becomes the parameter's default, shown in the
schema, and the model may still choose another value. Every other option is sent as is on each
request.
"""

from __future__ import annotations

import difflib
import inspect
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

from toolfork.tools import Tool, Toolkit
from toolfork.tools import tool as make_tool

__all__ = [
    "Check",
    "Default",
    "OptionError",
    "WebOptions",
    "address",
    "boolean",
    "date",
    "integer",
    "number",
    "one_of",
    "pattern",
    "regexes",
    "string",
    "string_map",
    "strings",
]

# A check returns the value to keep (normalized, immutable) or raises ValueError saying what is allowed.
Check = Callable[[Any], Any]
W = TypeVar("W", bound="WebOptions")


class OptionError(ValueError):
    """A toolkit option that does not exist or has a value the service would refuse."""


@dataclass(frozen=True)
class Default:
    """Wraps the value of an option that names a tool parameter: make it the parameter's default
    (the model may choose another value) instead of fixing it."""

    value: Any


# -- checks ------------------------------------------------------------------------------------------


def one_of(*allowed: Any) -> Check:
    def check(value: Any) -> Any:
        # bool is an int: keep True from matching 1 (and 1 from matching True).
        if not any(value == a and type(value) is type(a) for a in allowed):
            raise ValueError(f"must be one of {', '.join(map(repr, allowed))}")
        return value

    return check


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("must be True or False")
    return value


def integer(low: int | None = None, high: int | None = None) -> Check:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"must be an integer{_range(low, high)}")
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(f"must be an integer{_range(low, high)}")
        return value

    return check


def number(low: float | None = None, high: float | None = None) -> Check:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise ValueError(f"must be a number{_range(low, high)}")
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(f"must be a number{_range(low, high)}")
        return value

    return check


def string(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a non-empty string")
    if "\r" in value or "\n" in value:
        raise ValueError("must be a single line")  # many options travel in HTTP headers
    return value


def pattern(regex: str, what: str) -> Check:
    compiled = re.compile(regex)

    def check(value: Any) -> str:
        if not isinstance(value, str) or not compiled.fullmatch(value):
            raise ValueError(f"must be {what}")
        return value

    return check


def date(value: Any) -> str:
    return pattern(r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])", "a date as YYYY-MM-DD")(value)


_ADDRESS = re.compile(r"[^@\s<>,;\"']+@[^@\s<>,;\"']+\.[^@\s<>,;\"'.]+")


def address(value: Any) -> str:
    if not isinstance(value, str) or not _ADDRESS.fullmatch(value):
        raise ValueError("must be a plain email address (name@domain)")
    return value


def strings(item: Check = string, *, max_items: int | None = None, what: str = "strings") -> Check:
    """A list (or tuple) of values each passing ``item``; kept as a tuple so nobody can change it."""

    def check(value: Any) -> tuple[Any, ...]:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value:
            raise ValueError(f"must be a non-empty list of {what}")
        if max_items is not None and len(value) > max_items:
            raise ValueError(f"must hold at most {max_items} {what}, got {len(value)}")
        out = []
        for i, v in enumerate(value):
            try:
                out.append(item(v))
            except ValueError as exc:
                raise ValueError(f"item {i} ({v!r}) {exc}") from None
        return tuple(out)

    return check


def _regex(value: Any) -> str:
    value = string(value)
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"is not a valid regular expression ({exc})") from None
    return value


def regexes(max_items: int | None = None) -> Check:
    return strings(_regex, max_items=max_items, what="regular expressions")


def string_map(key: Check = string, val: Check = string) -> Check:
    def check(value: Any) -> Mapping[str, str]:
        if not isinstance(value, Mapping) or not value:
            raise ValueError("must be a non-empty mapping of names to values")
        out = {}
        for k, v in value.items():
            try:
                out[key(k)] = val(v)
            except ValueError as exc:
                raise ValueError(f"entry {k!r}: {v!r} {exc}") from None
        return out  # a private copy; ``options`` shows it read-only

    return check


def _range(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f" from {low} to {high}"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""


# -- the base class ------------------------------------------------------------------------------------


class WebOptions(Toolkit):
    """A toolkit whose tools take options. A subclass declares ``OPTIONS`` (tool name -> option -> check)
    and may override ``check_options`` for rules that tie options together."""

    OPTIONS: ClassVar[Mapping[str, Mapping[str, Check]]] = {}
    # The options that name a parameter of the tool: fixed by a plain value, defaulted by Default().
    PARAMETERS: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    # Plain dicts (picklable, unlike mappingproxy), never changed after validation: a new set of
    # options is a new dict. Values are immutable (tuples for lists) or private dict copies.
    _options: dict[str, dict[str, Any]]

    def _init_options(self, options: Mapping[str, Mapping[str, Any]] | None) -> None:
        self._options = self._validated({}, options or {})

    @property
    def options(self) -> Mapping[str, Mapping[str, Any]]:
        """The options of every tool that has some, read-only (lists are tuples)."""
        return MappingProxyType({tool: self.tool_options(tool) for tool in self._options})

    def tool_options(self, tool: str) -> Mapping[str, Any]:
        """One tool's options, read-only (empty when it has none)."""
        return MappingProxyType(
            {k: MappingProxyType(v) if isinstance(v, dict) else v for k, v in self._options.get(tool, {}).items()}
        )

    def with_options(self: W, tool: str, /, **options: Any) -> W:
        """A new toolkit like this one (same settings, filters and other options) whose ``tool`` has
        these options on top of its current ones. This toolkit, and the tools it already handed out,
        are unchanged."""
        merged = self._validated(self._options, {tool: options})
        clone = self.clone()  # filters carry over; built tools do not (they hold the old options)
        clone._options = merged
        return clone

    def request_options(self, tool_name: str) -> dict[str, Any]:
        """The options of ``tool_name`` sent as they are (not its parameters), lists as lists."""
        params = self.PARAMETERS.get(tool_name, ())
        return {
            k: list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, Mapping) else v
            for k, v in self.tool_options(tool_name).items()
            if k not in params
        }

    def option_tool(self, name: str) -> Callable[[Callable[..., Any]], Tool]:
        """Like ``@tool(name)``, applying this toolkit's options on the function's parameters: a
        fixed one leaves the signature (schema, docstring) and is always passed; a ``Default`` one
        changes the default."""
        opts = self.tool_options(name)
        params = self.PARAMETERS.get(name, ())
        fixed = {k: v for k, v in opts.items() if k in params and not isinstance(v, Default)}
        defaults = {k: v.value for k, v in opts.items() if k in params and isinstance(v, Default)}

        def wrap(fn: Callable[..., Any]) -> Tool:
            if not fixed and not defaults:
                return make_tool(name)(fn)
            return make_tool(name)(_adapted(fn, fixed, defaults))

        return wrap

    def check_options(self, options: Mapping[str, Mapping[str, Any]]) -> None:
        """Rules between options of one tool; raise ``OptionError`` (see ``option_error``)."""

    def option_error(self, tool: str, option: str, value: Any, reason: str) -> OptionError:
        return OptionError(f"{type(self).__name__}: option {option!r} of {tool} {reason}, got {value!r}")

    def _validated(
        self, current: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, dict[str, Any]]:
        owner = type(self).__name__
        if not isinstance(new, Mapping):
            raise OptionError(
                f"{owner}: options must map tool names to option dicts, e.g. "
                f"{{{next(iter(self.OPTIONS), 'tool')!r}: {{...}}}}, got {new!r}")
        out = {tool: dict(values) for tool, values in current.items()}
        for tool, values in new.items():
            specs = self.OPTIONS.get(tool)
            if specs is None:
                raise OptionError(
                    f"{owner}: options for unknown tool {tool!r}"
                    f"{_suggest(tool, self.OPTIONS)} (tools with options: {', '.join(self.OPTIONS) or 'none'})")
            if not isinstance(values, Mapping):
                raise OptionError(f"{owner}: the options of {tool} must be a dict of option names to values, "
                                  f"got {values!r}")
            target = out.setdefault(tool, {})
            for name, value in values.items():
                check = specs.get(name)
                if check is None:
                    raise OptionError(
                        f"{owner}: unknown option {name!r} for {tool}{_suggest(name, specs)} "
                        f"(options: {', '.join(sorted(specs))})")
                wrapped = isinstance(value, Default)
                if wrapped and name not in self.PARAMETERS.get(tool, ()):
                    raise OptionError(
                        f"{owner}: option {name!r} of {tool} is not a parameter of the tool, so it cannot be a "
                        f"Default (parameters: {', '.join(self.PARAMETERS.get(tool, ())) or 'none'})")
                try:
                    checked = check(value.value if wrapped else value)
                except ValueError as exc:
                    raise self.option_error(tool, name, value.value if wrapped else value, str(exc)) from None
                target[name] = Default(checked) if wrapped else checked
        out = {t: v for t, v in out.items() if v}
        self.check_options(MappingProxyType(out))
        return out


def _adapted(fn: Callable[..., Any], fixed: Mapping[str, Any], defaults: Mapping[str, Any]) -> Callable[..., Any]:
    """``fn`` with the ``fixed`` parameters gone from its signature, type hints and docstring (the
    model neither sees nor sets them) and always passed, and new ``defaults`` for others."""
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn, include_extras=True)  # resolved in fn's own module
    kept = [
        p.replace(default=defaults[p.name]) if p.name in defaults else p
        for p in sig.parameters.values()
        if p.name not in fixed
    ]

    def adapted(**arguments: Any) -> Any:
        return fn(**{**defaults, **arguments, **fixed})

    adapted.__signature__ = sig.replace(parameters=kept)  # type: ignore[attr-defined]
    adapted.__annotations__ = {k: v for k, v in hints.items() if k not in fixed}
    adapted.__doc__ = _without_args(fn.__doc__ or "", set(fixed))
    for attr in ("__name__", "__qualname__", "__module__"):
        setattr(adapted, attr, getattr(fn, attr))
    return adapted


def _without_args(doc: str, names: set[str]) -> str:
    """A Google-style docstring without the ``Args:`` entries (and their continuation lines) of ``names``."""
    lines = inspect.cleandoc(doc).splitlines()
    out: list[str] = []
    skip_deeper_than: int | None = None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if skip_deeper_than is not None:
            if line.strip() and indent > skip_deeper_than:
                continue
            skip_deeper_than = None
        entry = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?:", line)
        if entry and entry.group(1) in names:
            skip_deeper_than = indent
            continue
        out.append(line)
    return "\n".join(out)


def _suggest(name: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
