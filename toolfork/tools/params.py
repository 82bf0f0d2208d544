"""Where a tool's parameters come from: a signature, a list of properties, or a raw JSON Schema.

Each source compiles, once, into the same two things: a canonical JSON Schema (what the model sees)
and a validator (what ``Tool.validate`` runs on every call). Compiling at definition time keeps the
per-call cost to one pydantic (Rust) validation; the compiled objects are rebuilt after unpickling
rather than pickled, because dynamically created pydantic models do not pickle.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
import types
import typing
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Union, get_args, get_origin

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import PydanticJsonSchemaWarning

from toolfork.tools.errors import ToolDefinitionError, ToolInputError
from toolfork.tools.properties import ToolProperty, check_unique, object_schema, typed_dict
from toolfork.tools.runtime import ToolRuntime
from toolfork.tools.schema import canonical_schema, clean_schema, resolve_ref
from toolfork.tools.schema_engine import JsonSchemaValidator
from toolfork.tools.schema_validator import ClosedObjects
from toolfork.tools.validation import has_none, pydantic_errors, short_repr, strip_optional_nulls


class _Invalid(Exception):
    """Refused arguments. The messages may be given as a function, worked out only when read:
    ``validate`` tries a call's candidates first and reports only the last one's."""

    def __init__(self, errors: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]]) -> None:
        self._errors = errors

    @property
    def errors(self) -> list[dict[str, Any]]:
        if callable(self._errors):
            self._errors = self._errors()
        return self._errors


class Params(ABC):
    """The compiled parameters of one tool. ``fast`` is the hot path; ``validate`` adds the recovery
    and error reporting that only failing calls pay for."""

    schema: dict[str, Any]
    argument_names: list[str]
    # Unknown keys inside closed nested objects (pydantic-backed sources only; see ClosedObjects).
    closed: ClosedObjects | None = None

    @abstractmethod
    def fast(self, arguments: Any) -> dict[str, Any]:
        ...

    def validate(self, tool_name: str, arguments: Any) -> dict[str, Any]:
        try:
            return self.fast(arguments)
        except (ValidationError, _Invalid):
            pass
        return self._slow(tool_name, arguments)

    def _check_closed(self, arguments: Any) -> None:
        """Called by ``fast`` after pydantic accepted ``arguments``."""
        closed = self.closed
        if closed is not None and isinstance(arguments, Mapping):
            errors = closed.errors(arguments)
            if errors:
                raise _Invalid(errors)

    def _slow(self, tool_name: str, arguments: Any) -> dict[str, Any]:
        if isinstance(arguments, (str, bytes, bytearray)):
            # OpenAI sends arguments as JSON text; accept it rather than make every caller parse it.
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                raise ToolInputError(tool_name, [{
                    "loc": "", "type": "json_invalid",
                    "msg": f"arguments must be a JSON object (got text that is not JSON: "
                           f"{short_repr(arguments)})",
                }]) from None
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise ToolInputError(tool_name, [{
                "loc": "", "type": "not_object",
                "msg": f"arguments must be a JSON object mapping argument names to values "
                       f"(got {short_repr(arguments)})",
            }])
        arguments = dict(arguments)
        candidates = [arguments]
        if has_none(arguments):
            candidates.append(strip_optional_nulls(arguments, self.schema, self.schema))
        errors: list[dict[str, Any]] | _Invalid = []  # an _Invalid: its messages are read only if reported
        for candidate in candidates:
            try:
                return self.fast(candidate)
            except ValidationError as exc:
                errors = pydantic_errors(exc, candidate, self.argument_names,
                                         nested_extra=self.closed is None)
                if self.closed is not None:
                    errors += self.closed.errors(candidate)
            except _Invalid as exc:
                errors = exc  # its messages are worked out only if this is the candidate reported
        raise ToolInputError(tool_name, errors.errors if isinstance(errors, _Invalid) else errors)


# -- type-hint helpers -----------------------------------------------------------------------------------

def is_runtime_annotation(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.replace(" ", "") in ("ToolRuntime", "ToolRuntime|None", "Optional[ToolRuntime]")
    if isinstance(annotation, type):
        return issubclass(annotation, ToolRuntime)
    if get_origin(annotation) is Annotated:
        return is_runtime_annotation(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return len(args) == 1 and is_runtime_annotation(args[0])
    return False


def _hint_target(fn: Callable[..., Any]) -> Any:
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target) or inspect.isclass(target)) \
            and callable(target):
        target = target.__call__
    return target


def type_hints(fn: Callable[..., Any], where: str) -> dict[str, Any]:
    target = _hint_target(fn)
    try:
        return typing.get_type_hints(target, include_extras=True)
    except NameError:
        pass
    except TypeError:
        return {}
    # String annotations (``from __future__ import annotations``) naming classes local to the function
    # that defines the tool: look them up in the calling frames, as pydantic does for models.
    frame: types.FrameType | None = sys._getframe(1)
    local_ns: dict[str, Any] = {}
    for _ in range(30):
        if frame is None:
            break
        local_ns = {**frame.f_locals, **local_ns}
        frame = frame.f_back
    try:
        return typing.get_type_hints(target, localns=local_ns, include_extras=True)
    except NameError as exc:
        raise ToolDefinitionError(
            f"{where}: cannot resolve a type hint ({exc}); define or import the type where the "
            "function is defined"
        ) from None


def runtime_parameter(fn: Callable[..., Any]) -> str | None:
    """The name of ``fn``'s ``ToolRuntime`` parameter, if it declares one."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        hints = typing.get_type_hints(_hint_target(fn))
    except Exception:
        hints = {}
    for name, p in sig.parameters.items():
        if is_runtime_annotation(hints.get(name, p.annotation)):
            return name
    return None


def accepted_names(fn: Callable[..., Any]) -> set[str] | None:
    """The keyword names ``fn`` accepts, or None when it takes ``**kwargs`` (or cannot be inspected)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    names = set()
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            names.add(p.name)
    return names


_SECTION_HEADERS = ("args:", "arguments:", "parameters:", "params:", "keyword args:")


def parse_doc(obj: Any) -> docstring_parser.Docstring:
    raw = getattr(obj, "__doc__", None)
    if isinstance(raw, str) and raw.lstrip().split("\n", 1)[0].strip().lower() in _SECTION_HEADERS:
        # '"""Args:' on the opening line: cleandoc would dedent the entries to the header's level and
        # the parser would miss them; a leading newline keeps their relative indentation.
        # The parser also takes the first line for the summary, so it gets an empty one.
        doc = docstring_parser.parse("-\n\n" + inspect.cleandoc("\n" + raw.lstrip()))
        doc.short_description = None
        return doc
    return docstring_parser.parse(inspect.getdoc(obj) or "")


def doc_description(doc: docstring_parser.Docstring) -> str:
    """Everything above the Args/Returns sections: the part written for the reader of the tool."""
    parts = [p.strip() for p in (doc.short_description, doc.long_description) if p and p.strip()]
    return "\n\n".join(parts)


def _annotated_description(annotation: Any) -> str | None:
    if get_origin(annotation) is Annotated:
        for meta in get_args(annotation)[1:]:
            if isinstance(meta, str):
                return meta
    return None


def _needs_alias(name: str) -> bool:
    return (
        not name.isidentifier()
        or name.startswith("_")
        or name.startswith("model_")
        or hasattr(BaseModel, name)
    )


def _json_schema(build: Callable[[], dict[str, Any]], where: str) -> dict[str, Any]:
    with warnings.catch_warnings():
        # Non-JSON defaults are simply left out of the schema; that is not worth a warning per tool.
        warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
        try:
            return canonical_schema(clean_schema(build()))
        except Exception as exc:
            raise ToolDefinitionError(
                f"{where}: cannot describe the parameters as JSON Schema: {exc}") from None


def _closed_objects(schema: dict[str, Any]) -> ClosedObjects | None:
    checker = ClosedObjects(schema)
    return checker if checker.needed else None


# -- source 1: a signature -----------------------------------------------------------------------------

class SignatureParams(Params):
    """Parameters from a function's type hints and docstring, validated by a generated pydantic model."""

    def __init__(self, fn: Callable[..., Any], tool_name: str, doc_owner: Any = None,
                 hints: dict[str, Any] | None = None) -> None:
        where = f"tool '{tool_name}'"
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError) as exc:
            raise ToolDefinitionError(f"{where}: cannot read the signature of {fn!r}: {exc}") from None
        if hints is None:
            hints = type_hints(fn, where)
        # Kept so a rebuild after unpickling needs no name lookups (local classes are gone by then).
        self.hints = hints
        self.doc = parse_doc(doc_owner if doc_owner is not None else _hint_target(fn))
        param_docs = {p.arg_name: (p.description or "").strip() for p in self.doc.params}
        self.returns = hints.get("return", sig.return_annotation)
        self.runtime_param: str | None = None
        fields: dict[str, Any] = {}
        aliases: list[tuple[str, str]] = []
        any_alias = False
        names: list[str] = []
        for i, p in enumerate(sig.parameters.values()):
            if p.kind is inspect.Parameter.VAR_POSITIONAL:
                raise ToolDefinitionError(
                    f"{where}: *{p.name} cannot be described to a model; declare each argument by name")
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                raise ToolDefinitionError(
                    f"{where}: **{p.name} cannot be described to a model; declare each argument by name")
            if p.kind is inspect.Parameter.POSITIONAL_ONLY:
                raise ToolDefinitionError(
                    f"{where}: parameter '{p.name}' is positional-only; tools are called with keyword "
                    "arguments, remove the '/'")
            annotation = hints.get(p.name, p.annotation)
            if annotation is inspect.Parameter.empty:
                hint = " (decorate the bound method, tool(obj.method), instead)" if p.name == "self" else ""
                raise ToolDefinitionError(
                    f"{where}: parameter '{p.name}' has no type hint; add one (e.g. {p.name}: str){hint}")
            if is_runtime_annotation(annotation):
                self.runtime_param = p.name
                continue
            names.append(p.name)
            description = param_docs.pop(p.name, None) or _annotated_description(annotation)
            internal = p.name
            if _needs_alias(p.name):
                internal, any_alias = f"field{i}_", True
            field_kwargs: dict[str, Any] = {}
            if description:
                field_kwargs["description"] = description
            if internal != p.name:
                field_kwargs["alias"] = p.name
            default = p.default
            if isinstance(default, FieldInfo):
                if default.description:
                    field_kwargs.pop("description", None)
                fields[internal] = (Annotated[annotation, default], Field(**field_kwargs))
            elif default is inspect.Parameter.empty:
                fields[internal] = (annotation, Field(**field_kwargs))
            else:
                fields[internal] = (annotation, Field(default, **field_kwargs))
            aliases.append((internal, p.name))
        param_docs.pop(self.runtime_param or "", None)
        if param_docs:
            unknown = ", ".join(sorted(param_docs))
            raise ToolDefinitionError(
                f"{where}: the docstring documents {unknown}, which the signature does not have")
        try:
            self.model = create_model(  # type: ignore[call-overload]
                f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        except Exception as exc:
            culprit = ""
            for internal, external in aliases:
                try:
                    TypeAdapter(fields[internal][0])
                except Exception:
                    culprit = f" for parameter '{external}' ({fields[internal][0]!r})"
                    break
            raise ToolDefinitionError(f"{where}: unsupported parameter type{culprit}: {exc}") from None
        self.argument_names = names
        self._aliases = aliases if any_alias else None
        self._validate_python = self.model.__pydantic_validator__.validate_python
        self.schema = _json_schema(self.model.model_json_schema, where)
        self.closed = _closed_objects(self.schema)

    def fast(self, arguments: Any) -> dict[str, Any]:
        values = self._validate_python(arguments).__dict__
        if self.closed is not None:
            self._check_closed(arguments)
        if self._aliases is None:
            return values.copy()  # type: ignore[no-any-return]
        return {external: values[internal] for internal, external in self._aliases}


# -- source 2: explicit properties ----------------------------------------------------------------------

class PropertyParams(Params):
    """Parameters from ``ToolProperty`` objects; the tool receives only the arguments given, so absent
    optional ones fall back to the callable's own defaults."""

    def __init__(self, properties: Sequence[ToolProperty], tool_name: str) -> None:
        where = f"tool '{tool_name}'"
        check_unique(properties, where)
        self.properties = list(properties)
        self.argument_names = [p.name for p in self.properties]
        schema = object_schema(self.properties)
        defs: dict[str, Any] = {}
        for p in self.properties:
            defs.update(p.defs())
        if defs:
            schema["$defs"] = defs
        self.schema = schema
        try:
            arguments_type = typed_dict(f"{tool_name}_arguments", self.properties)
            self._adapter: TypeAdapter[Any] = TypeAdapter(arguments_type)
        except Exception as exc:
            raise ToolDefinitionError(f"{where}: unsupported property: {exc}") from None
        self._validate_python = self._adapter.validate_python
        self.closed = _closed_objects(self.schema)

    def fast(self, arguments: Any) -> dict[str, Any]:
        values: dict[str, Any] = self._validate_python(arguments)
        if self.closed is not None:
            self._check_closed(arguments)
        return values


# -- source 3: a raw JSON Schema ------------------------------------------------------------------------

class JsonSchemaParams(Params):
    """Parameters described by a raw JSON Schema object, validated as JSON Schema (no coercion; the
    dialect and the keywords are the specification's, see ``schema_engine``)."""

    def __init__(self, schema: Mapping[str, Any], tool_name: str) -> None:
        where = f"tool '{tool_name}'"
        if not isinstance(schema, Mapping):
            raise ToolDefinitionError(
                f"{where}: the schema must be a JSON object, got {type(schema).__name__}")
        schema_copy: dict[str, Any] = json.loads(json.dumps(schema))  # private deep copy; proves it is JSON
        schema = schema_copy
        if schema_copy.get("type", "object") != "object":
            raise ToolDefinitionError(f"{where}: tool arguments must be described by an object schema, "
                                      f"got type {schema_copy['type']!r}")
        schema_copy["type"] = "object"
        schema_copy.setdefault("properties", {})
        if not isinstance(schema_copy["properties"], dict):
            raise ToolDefinitionError(f"{where}: 'properties' must be an object")
        self.schema = schema_copy
        self.argument_names = list(schema_copy["properties"])
        try:
            self._validator = JsonSchemaValidator(schema_copy)
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(f"{where}: {exc}") from None
        properties = schema_copy["properties"]
        if not properties and isinstance(schema_copy.get("$ref"), str):
            # {"$ref": "#/definitions/Args", ...}, as zod-to-json-schema writes MCP tools: the names are there.
            try:
                target = resolve_ref(schema_copy, schema_copy["$ref"])
            except ToolDefinitionError:
                target = {}  # resolved by the engine only (a nested base URI): the names stay unknown
            if isinstance(target.get("properties"), dict):
                properties = target["properties"]
                self.argument_names = list(properties)
        self._defaults = {
            k: s["default"] for k, s in properties.items()
            if isinstance(s, dict) and "default" in s
        }

    def fast(self, arguments: Any) -> dict[str, Any]:
        if not self._validator.is_valid(arguments):
            raise _Invalid(lambda: self._validator.errors(arguments, self.argument_names))
        values = dict(arguments)
        for key, default in self._defaults.items():
            if key not in values:
                values[key] = json.loads(json.dumps(default))  # a fresh copy per call
        return values


__all__ = [
    "JsonSchemaParams",
    "Params",
    "PropertyParams",
    "SignatureParams",
    "accepted_names",
    "doc_description",
    "is_runtime_annotation",
    "parse_doc",
    "runtime_parameter",
]
