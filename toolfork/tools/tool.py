"""``Tool``: a callable plus what a model needs to call it (name, description, JSON Schema) and what
the executor and agent need to run it (timeout, max runs, error policy, ...).

Three ways to define one, all identical on the wire: ``@tool`` on a function (see decorator.py), a
subclass with ``properties()`` or a typed ``__call__``, the fluent ``Tool.make(...)`` form, and
``Tool.from_json_schema(...)``.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import re
import sys
import types
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError

from toolfork.tools.errors import MissingDescriptionWarning, ToolDefinitionError, ToolOutputError
from toolfork.tools.output import ToolOutput
from toolfork.tools.params import (
    JsonSchemaParams,
    Params,
    PropertyParams,
    SignatureParams,
    accepted_names,
    doc_description,
    parse_doc,
    runtime_parameter,
)
from toolfork.tools.properties import ToolProperty
from toolfork.tools.runtime import ToolRuntime
from toolfork.tools.schema import (
    NAME_PATTERN,
    anthropic_definition,
    check_name,
    clean_schema,
    inline_refs,
    openai_definition,
    type_label,
)
from toolfork.tools.settings import (
    ON_ERROR_VALUES,
    ApprovalPolicy,
    OnError,
    SettingKeywords,
    ToolSettings,
    check_settings,
)
from toolfork.tools.validation import pydantic_errors

if TYPE_CHECKING:
    from typing_extensions import Unpack

T = TypeVar("T", bound="Tool")


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _run_coroutine(coro: Any) -> Any:
    import asyncio  # here, not at the top: only an async tool needs it, and it costs every process 15 ms

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # Called from inside a running loop (an inline tool in an async agent): asyncio.run would refuse,
    # so the coroutine gets its own loop on a helper thread.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class Tool(ToolSettings):
    """A tool a model can call. Settings (``ToolSettings``: timeout, max_runs, on_error, ...) may be
    given to the constructor or, in a subclass, as class attributes (``timeout = 5``)."""

    # Class-level defaults; a subclass may override them as class attributes.
    name: str = ""
    description: str = ""

    def __init__(
        self,
        name: str | None = None,
        description: str | None = None,
        fn: Callable[..., Any] | None = None,
        *,
        properties: Sequence[ToolProperty] | None = None,
        visible: bool = True,
        **settings: Unpack[SettingKeywords],
    ) -> None:
        cls = type(self)
        subclass_call = cls.__call__ is not Tool.__call__
        subclass_props = cls.properties is not Tool.properties
        if subclass_call and fn is not None:
            raise ToolDefinitionError(f"{cls.__name__} defines __call__; do not also pass fn=")
        doc_source: Any = fn
        if name is None:
            name = cls.name or (getattr(fn, "__name__", None) if fn is not None else None)
            if not name and cls is not Tool:
                name = _snake(cls.__name__)
        if not name:
            raise ToolDefinitionError(f"a tool needs a name; cannot derive one from {fn!r}, pass name=")
        if fn is not None and name == getattr(fn, "__name__", None) and not NAME_PATTERN.match(name):
            raise ToolDefinitionError(
                f"the function name {name!r} is not a valid tool name (^[a-zA-Z0-9_-]{{1,64}}$); pass name=")
        self.name = check_name(name)
        self._visible = bool(visible)
        self.configure(**settings)
        # Where the parameters come from: "signature" (fn or typed __call__), "properties" or "schema".
        self._source: str
        self._spec: Any
        if subclass_props or properties is not None:
            if subclass_props and properties is not None:
                raise ToolDefinitionError(
                    f"{cls.__name__} defines properties(); do not also pass properties=")
            self._source = "properties"
            self._spec = list(self.properties() if subclass_props else properties or [])
        elif subclass_call:
            self._source, self._spec = "signature", None  # None: self.__call__, rebound after unpickling
            doc_source = cls.__call__
        elif fn is not None:
            self._source, self._spec = "signature", fn
        else:
            self._source, self._spec = "properties", []
        self._fn: Callable[..., Any] | None = self.__call__ if subclass_call else fn
        self._compiled: Params | None = None
        params = self._params()
        if description is None:
            description = cls.description
        if not description:
            doc = params.doc if isinstance(params, SignatureParams) else parse_doc(doc_source) \
                if doc_source is not None else None
            description = doc_description(doc) if doc is not None else ""
            if not description and cls is not Tool and cls.__doc__:
                description = doc_description(parse_doc(cls))
        self.description = description
        _warn_if_undescribed(self.name, description)
        self._bind_callable()

    # -- settings -------------------------------------------------------------------------------
    def configure(self: T, **settings: Unpack[SettingKeywords]) -> T:
        """Change settings (``timeout``, ``max_runs``, ``on_error``...) after construction; returns self."""
        for key, value in check_settings(f"tool '{self.name}'", settings).items():
            setattr(self, key, value)
        if self.manual and self._fn_or_none() is not None:
            raise ToolDefinitionError(f"tool '{self.name}': manual=True means the tool has no callable (a person "
                                      "or program supplies its result); remove the callable or manual=True")
        if self.inline and self.fresh_process:
            raise ToolDefinitionError(f"tool '{self.name}': inline=True runs in the host, fresh_process=True in a "
                                      "new process for each call: choose one")
        return self

    def _fn_or_none(self) -> Callable[..., Any] | None:
        # configure() runs before __init__ has bound the callable.
        return self.__dict__.get("_fn")

    @property
    def function(self) -> Callable[..., Any] | None:
        """What runs a call: the decorated function, ``set_callable``'s, a subclass's bound ``__call__``,
        or None (no callable yet, or a manual tool)."""
        return self._fn_or_none()

    @property
    def defined_by(self) -> tuple[str, Any]:
        """How the parameters were declared: ``("signature", fn)`` (fn None: the subclass's ``__call__``)
        or ``("properties", [ToolProperty, ...])``; error messages use it to tell tools apart."""
        return self._source, self._spec

    @property
    def has_callable(self) -> bool:
        """Whether the tool can run: False for ``Tool.make(...)`` before ``set_callable`` and for manual tools."""
        return self._fn_or_none() is not None

    @property
    def is_visible(self) -> bool:
        """Hidden tools are not offered to the model but may still be called (e.g. by the program)."""
        return self._visible

    def visible(self: T, flag: bool = True) -> T:
        self._visible = bool(flag)
        return self

    def set_max_runs(self: T, n: int | None) -> T:
        return self.configure(max_runs=n)

    def set_timeout(self: T, seconds: float | None) -> T:
        return self.configure(timeout=seconds)

    # -- the fluent definition ------------------------------------------------------------------
    @classmethod
    def make(cls, *args: Any, **kwargs: Any) -> Any:
        """On ``Tool``: start a fluent definition, ``Tool.make("n", "d").add_property(p).set_callable(fn)``
        (settings as keywords, e.g. ``manual=True``). On a subclass: build the subclass with these
        arguments, as Neuron's ``MyTool::make($apiKey)`` does; a subclass without its own ``__init__`` is
        refused when given arguments, since ``Tool.__init__`` would take the first one as the tool's name
        (an API key sent to the provider as a tool name)."""
        if cls is Tool:
            if not args and "name" not in kwargs:
                raise ToolDefinitionError("Tool.make() needs a name: Tool.make(\"name\", \"description\")")
            kwargs.setdefault("properties", [])
            return Tool(*args, **kwargs)
        if (args or kwargs) and cls.__init__ is Tool.__init__:
            raise ToolDefinitionError(
                f"{cls.__name__}.make(...) passes its arguments to {cls.__name__}.__init__, which {cls.__name__} "
                f"does not define: Tool.__init__ would take {args[0] if args else next(iter(kwargs))!r} as the "
                f"tool's name. Define {cls.__name__}.__init__(self, ...) (calling super().__init__()) to take "
                f"them, or call {cls.__name__}() without arguments")
        return cls(*args, **kwargs)

    def properties(self) -> list[ToolProperty]:
        """The declared properties (subclasses override this to declare theirs)."""
        return list(self._spec) if self._source == "properties" else []

    def add_property(self: T, prop: ToolProperty) -> T:
        if self._source != "properties":
            raise ToolDefinitionError(
                f"tool '{self.name}' takes its parameters from its {self._source}; add_property() is for "
                "tools built with Tool.make()")
        self._spec = [*self._spec, prop]
        self._compiled = None
        self._params()
        self._check_callable_accepts()
        return self

    def set_callable(self: T, fn: Callable[..., Any]) -> T:
        if not callable(fn):
            raise ToolDefinitionError(f"tool '{self.name}': set_callable() needs a callable, got {fn!r}")
        if type(self).__call__ is not Tool.__call__:
            raise ToolDefinitionError(f"tool '{self.name}': {type(self).__name__} defines __call__ already")
        self._fn = fn
        if self._source == "signature":
            self._spec = fn
            self._compiled = None
            self.__dict__.pop("_hints", None)
            self._params()
        self._bind_callable()
        return self

    def _bind_callable(self) -> None:
        fn = self._fn
        self._runtime_param = None
        self._is_async = False
        self._is_generator = False
        if fn is None:
            return
        if self.manual:
            raise ToolDefinitionError(f"tool '{self.name}': manual=True means the tool has no callable (a person "
                                      "or program supplies its result); remove the callable or manual=True")
        params = self._params()
        self._runtime_param = params.runtime_param if isinstance(params, SignatureParams) \
            else runtime_parameter(fn)
        self._is_async = inspect.iscoroutinefunction(fn) or (
            not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__))
        # Generator tools report each yield as progress; they need a runtime wherever they run. A plain
        # function that returns a generator has a result that is not data (see ToolOutput.from_value).
        # A generator function behind functools.wraps, a partial or a __call__ is a generator tool too.
        self._is_generator = any(inspect.isgeneratorfunction(t) or inspect.isasyncgenfunction(t)
                                 for t in (fn, inspect.unwrap(fn), type(fn).__call__))
        self._check_callable_accepts()

    def _check_callable_accepts(self) -> None:
        if self._fn is None or self._source == "signature":
            return
        names = accepted_names(self._fn)
        if names is None:
            return
        missing = [n for n in self._params().argument_names if n not in names]
        if missing:
            raise ToolDefinitionError(
                f"tool '{self.name}': the callable does not accept argument(s) {', '.join(missing)} "
                "declared as properties")

    # -- raw JSON Schema ------------------------------------------------------------------------
    @classmethod
    def from_json_schema(
        cls,
        name: str,
        description: str | None,
        schema: Mapping[str, Any],
        fn: Callable[..., Any] | None = None,
        visible: bool = True,
        **settings: Unpack[SettingKeywords],
    ) -> Tool:
        """A tool described by a raw JSON Schema (as MCP servers describe theirs). Arguments are
        validated against the schema as JSON Schema: no coercion, top-level defaults filled in."""
        t = Tool.__new__(Tool)
        t.name = check_name(name)
        t._fn = None
        t._visible = bool(visible)
        t.configure(**settings)
        t._source, t._spec = "schema", schema
        t._compiled = None
        params = t._params()
        t.description = description if description is not None else str(params.schema.get("description", ""))
        _warn_if_undescribed(t.name, t.description)
        t._fn = fn
        t._bind_callable()
        return t

    # -- compiled parameters ---------------------------------------------------------------------
    def _params(self) -> Params:
        params = self._compiled
        if params is None:
            if self._source == "signature":
                spec = self._spec if self._spec is not None else self.__call__
                doc_owner = type(self).__call__ if self._spec is None else None
                params = SignatureParams(spec, self.name, doc_owner=doc_owner,
                                         hints=self.__dict__.get("_hints"))
                self._hints = params.hints
            elif self._source == "properties":
                params = PropertyParams(self._spec, self.name)
            else:
                params = JsonSchemaParams(self._spec, self.name)
            self._compiled = params
        return params

    @property
    def uses_runtime(self) -> bool:
        """Whether the executor must build a ``ToolRuntime`` for a call: the tool declares one, or it is a
        generator whose yields go out as progress."""
        return self._runtime_param is not None or self.__dict__.get("_is_generator", False)

    @property
    def argument_names(self) -> list[str]:
        return list(self._params().argument_names)

    # -- calling ----------------------------------------------------------------------------------
    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validated, coerced keyword arguments; raises ``ToolInputError`` listing every bad field.
        Unknown arguments are refused (named, with the valid ones listed)."""
        params = self._compiled or self._params()
        return params.validate(self.name, arguments)

    def invoke(self, arguments: Mapping[str, Any], runtime: ToolRuntime | None = None) -> ToolOutput:
        """Validate, call, normalise. Exceptions from the tool's own code propagate unchanged: the
        executor owns turning them into results."""
        kwargs = (self._compiled or self._params()).validate(self.name, arguments)
        if self._runtime_param is not None:
            kwargs[self._runtime_param] = runtime if runtime is not None else ToolRuntime("", self.name)
        fn = self._fn
        if fn is None:
            raise ToolDefinitionError(f"tool '{self.name}' has no callable; call set_callable(fn)")
        result = fn(**kwargs)
        kind = type(result)
        if self._is_async or kind is types.CoroutineType:
            result = _run_coroutine(result)
        elif kind is types.GeneratorType and self._is_generator:
            result = _drain(result, runtime)
        elif kind is types.AsyncGeneratorType and self._is_generator:
            result = _run_coroutine(_adrain(result, runtime))
        if self.output_model is not None:
            return self.checked_output(result)
        return ToolOutput.from_value(result)

    def checked_output(self, result: Any) -> ToolOutput:
        """``result`` as this tool's output, checked against its ``output_model`` (a value that did not
        come from running the tool, a submitted result say, gets the same check as a returned one)."""
        model = self.output_model
        assert model is not None
        if isinstance(result, ToolOutput):
            if result.is_error:
                return result
            value = result.data
            if value is None:
                raise ToolOutputError(self.name, [{"loc": "", "type": "no_data",
                                                   "msg": f"the tool returned no structured data to check "
                                                          f"against {model.__name__}"}])
        else:
            value = result
        if isinstance(value, BaseModel) and not isinstance(value, model):
            value = value.model_dump()
        try:
            checked = model.model_validate(value)
        except ValidationError as exc:
            raise ToolOutputError(self.name, pydantic_errors(exc, value)) from None
        if isinstance(result, ToolOutput):
            return ToolOutput(content=result.content, is_error=False, data=checked.model_dump(mode="json"))
        return ToolOutput.from_value(checked)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (no validation): a decorated function stays usable."""
        if self._fn is None:
            raise ToolDefinitionError(f"tool '{self.name}' has no callable; call set_callable(fn)")
        return self._fn(*args, **kwargs)

    # -- schema export --------------------------------------------------------------------------
    def to_json_schema(self, inline: bool = False) -> dict[str, Any]:
        """The JSON Schema of the arguments (an object schema; ``$defs`` kept unless ``inline``)."""
        schema = self._params().schema
        return inline_refs(schema) if inline else clean_schema(schema)

    def to_anthropic(self) -> dict[str, Any]:
        return anthropic_definition(self.name, self.description, self.to_json_schema())

    def to_openai(self, strict: bool = False, api: Literal["chat", "responses"] = "chat") -> dict[str, Any]:
        """A function tool for Chat Completions (``api="chat"``) or the Responses API. ``strict``
        rewrites the schema for OpenAI strict mode (see ``schema.to_strict``)."""
        try:
            return openai_definition(self.name, self.description, self.to_json_schema(), strict, api)
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(f"tool '{self.name}': {exc}") from None

    def to_string(self) -> str:
        """One line for prompt-based tool use: ``add(a: integer, b: integer = 0) -> integer: Add...``."""
        schema = self._params().schema
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        args = []
        notes = []
        for key, sub in props.items():
            label = f"{key}: {type_label(sub, schema)}"
            if key not in required:
                label += f" = {_json(sub['default'])}" if isinstance(sub, dict) and "default" in sub else "?"
            args.append(label)
            if isinstance(sub, dict) and sub.get("description"):
                notes.append(f"{key}: {sub['description']}")
        line = f"{self.name}({', '.join(args)}) -> {self._output_label()}"
        description = " ".join(self.description.split())
        if description:
            line += f": {description}"
        if notes:
            line += " (" + "; ".join(" ".join(n.split()) for n in notes) + ")"
        return line

    def _output_label(self) -> str:
        if self.output_model is not None:
            return self.output_model.__name__
        params = self._params()
        # An annotation of any shape (a class, a union, a generic alias): a type form, so Any.
        returns: Any = params.returns if isinstance(params, SignatureParams) else inspect.Parameter.empty
        if returns is inspect.Parameter.empty or returns is ToolOutput:
            return "any"
        if returns is None or returns is type(None):
            return "null"
        if get_origin(returns) in (Union, types.UnionType):
            # ToolOutput in a union means "or an error/media result": not a data type worth showing.
            members = [a for a in get_args(returns) if a is not ToolOutput]
            returns = Union[tuple(members)] if members else ToolOutput  # noqa: UP007
            if returns is ToolOutput:
                return "any"
        try:
            return type_label(TypeAdapter(returns).json_schema())
        except Exception:
            return getattr(returns, "__name__", str(returns))

    # -- pickling -----------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        # Compiled validators hold dynamically created pydantic classes: rebuilt on first use instead.
        state = self.__dict__.copy()
        state["_compiled"] = None
        if type(self).__call__ is not Tool.__call__:
            state["_fn"] = None  # the bound __call__; re-bound in __setstate__
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if type(self).__call__ is not Tool.__call__:
            self._fn = self.__call__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _warn_if_undescribed(name: str, description: str | None) -> None:
    if description and description.strip():
        return
    # Point the warning at the user's line: skip the frames of the tool model itself (Tool.make, @tool...).
    here = __file__.rsplit("/", 1)[0]
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(here):
        frame, level = frame.f_back, level + 1
    warnings.warn(f"tool '{name}' has no description: the model is sent an empty one and must guess from the "
                  "name what it does (add a docstring, description=..., or a class docstring)",
                  MissingDescriptionWarning, stacklevel=level + 1)


def _drain(gen: Any, runtime: ToolRuntime | None) -> Any:
    """A sync generator tool: every yield is progress, the ``return`` value is the result."""
    try:
        while True:
            value = next(gen)
            if runtime is not None:
                runtime.emit_progress(value)
    except StopIteration as stop:
        return stop.value
    finally:
        gen.close()


async def _adrain(agen: Any, runtime: ToolRuntime | None) -> Any:
    """An async generator tool: every yield is progress, and (an async generator cannot ``return`` a
    value) the last value yielded is the result too; one that yields nothing returns None."""
    last: Any = None
    try:
        async for value in agen:
            last = value
            if runtime is not None:
                runtime.emit_progress(value)
    finally:
        await agen.aclose()
    return last


def _json(value: Any) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


__all__ = ["ON_ERROR_VALUES", "ApprovalPolicy", "OnError", "Tool"]
