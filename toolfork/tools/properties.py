"""Explicit parameter declarations, for tools built without type hints (subclass and fluent styles).

Each property knows two things: its JSON Schema (what the model sees) and the Python annotation that
validates it (what pydantic checks). Keeping both on the property keeps the two from drifting apart.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from annotated_types import Len
from pydantic import BaseModel, ConfigDict
from typing_extensions import NotRequired, Required, TypedDict

from toolfork.tools.errors import ToolDefinitionError


class PropertyType(str, enum.Enum):
    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    ARRAY = "array"
    OBJECT = "object"


_SCALARS: dict[PropertyType, Any] = {
    PropertyType.STRING: str,
    PropertyType.INTEGER: int,
    PropertyType.NUMBER: float,
    PropertyType.BOOLEAN: bool,
}


class ToolProperty:
    """One named parameter: ``ToolProperty("city", PropertyType.STRING, "City name", required=True)``."""

    def __init__(
        self,
        name: str,
        type: PropertyType | str,
        description: str = "",
        required: bool = False,
        enum: Sequence[Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ToolDefinitionError(f"a property needs a non-empty string name, got {name!r}")
        try:
            self.type = PropertyType(type)
        except ValueError:
            valid = ", ".join(t.value for t in PropertyType)
            raise ToolDefinitionError(f"property '{name}': unknown type {type!r} (valid: {valid})") from None
        self.name = name
        self.description = description
        self.required = required
        self.enum = list(enum) if enum is not None else None
        if self.enum is not None and not self.enum:
            raise ToolDefinitionError(f"property '{name}': enum must list at least one value")

    def to_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": self.type.value}
        if self.description:
            schema["description"] = self.description
        if self.enum is not None:
            schema["enum"] = list(self.enum)
        return schema

    def annotation(self) -> Any:
        """The Python type pydantic validates this property's value against."""
        if self.enum is not None:
            return Literal[tuple(self.enum)]
        if self.type in _SCALARS:
            return _SCALARS[self.type]
        if self.type is PropertyType.ARRAY:
            return list[Any]
        return dict[str, Any]

    def defs(self) -> dict[str, Any]:
        """``$defs`` this property's schema refers to (pydantic models inside ObjectProperty)."""
        return {}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, type={self.type.value!r}, "
            f"required={self.required!r})"
        )

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    __hash__ = None  # type: ignore[assignment]


class ArrayProperty(ToolProperty):
    """A list parameter; ``items`` (a property whose name is ignored) types the elements."""

    def __init__(
        self,
        name: str,
        description: str = "",
        required: bool = False,
        items: ToolProperty | None = None,
        min_items: int | None = None,
        max_items: int | None = None,
    ) -> None:
        super().__init__(name, PropertyType.ARRAY, description, required)
        self.items = items
        self.min_items = min_items
        self.max_items = max_items
        if min_items is not None and max_items is not None and min_items > max_items:
            raise ToolDefinitionError(f"property '{name}': min_items {min_items} > max_items {max_items}")

    def to_schema(self) -> dict[str, Any]:
        schema = super().to_schema()
        if self.items is not None:
            schema["items"] = self.items.to_schema()
        if self.min_items is not None:
            schema["minItems"] = self.min_items
        if self.max_items is not None:
            schema["maxItems"] = self.max_items
        return schema

    def annotation(self) -> Any:
        item = self.items.annotation() if self.items is not None else Any
        if self.min_items is None and self.max_items is None:
            return list[item]  # type: ignore[valid-type]
        return Annotated[list[item], Len(self.min_items or 0, self.max_items)]  # type: ignore[valid-type]

    def defs(self) -> dict[str, Any]:
        return self.items.defs() if self.items is not None else {}


class ObjectProperty(ToolProperty):
    """A nested object: either from sub-properties (the tool gets a dict) or from a pydantic model
    (the tool gets an instance of the model: structured input)."""

    def __init__(
        self,
        name: str,
        description: str = "",
        required: bool = False,
        properties: Sequence[ToolProperty] | None = None,
        model: type[BaseModel] | None = None,
    ) -> None:
        super().__init__(name, PropertyType.OBJECT, description, required)
        if properties is not None and model is not None:
            raise ToolDefinitionError(f"property '{name}': give properties= or model=, not both")
        if model is not None and not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ToolDefinitionError(f"property '{name}': model= must be a pydantic BaseModel subclass")
        self.properties = list(properties) if properties is not None else None
        self.model = model
        if self.properties is not None:
            check_unique(self.properties, f"object property '{name}'")

    def _model_schema(self) -> dict[str, Any]:
        assert self.model is not None
        from toolfork.tools.schema import canonical_schema, clean_schema

        return canonical_schema(clean_schema(self.model.model_json_schema(ref_template="#/$defs/{model}")))

    def to_schema(self) -> dict[str, Any]:
        if self.model is not None:
            schema = self._model_schema()
            schema.pop("$defs", None)
            if self.description:
                schema["description"] = self.description
            return schema
        schema = super().to_schema()
        if self.properties is not None:
            schema.update(object_schema(self.properties))
        return schema

    def defs(self) -> dict[str, Any]:
        if self.model is not None:
            return dict(self._model_schema().get("$defs", {}))
        out: dict[str, Any] = {}
        for p in self.properties or []:
            out.update(p.defs())
        return out

    def annotation(self) -> Any:
        if self.model is not None:
            return self.model
        if self.properties is None:
            return dict[str, Any]
        return typed_dict(f"{self.name}_object", self.properties)


def check_unique(properties: Sequence[ToolProperty], where: str) -> None:
    seen: set[str] = set()
    for p in properties:
        if not isinstance(p, ToolProperty):
            raise ToolDefinitionError(f"{where}: expected ToolProperty objects, got {type(p).__name__}")
        if p.name in seen:
            raise ToolDefinitionError(f"{where}: two properties are named '{p.name}'")
        seen.add(p.name)


def object_schema(properties: Sequence[ToolProperty]) -> dict[str, Any]:
    """The ``properties``/``required`` part of an object schema, closed to unknown keys."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {p.name: p.to_schema() for p in properties},
    }
    required = [p.name for p in properties if p.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def typed_dict(name: str, properties: Sequence[ToolProperty]) -> Any:
    """A TypedDict validating ``properties``: pydantic returns a plain dict holding only the keys given,
    so an absent optional argument stays absent and the callable's own default applies."""
    fields = {
        p.name: (Required[p.annotation()] if p.required else NotRequired[p.annotation()])  # type: ignore[misc]
        for p in properties
    }
    make_typed_dict: Any = TypedDict  # called with a runtime field map: not a class statement mypy can check
    td = make_typed_dict(name, fields)
    # What pydantic.with_config does (it only exists from pydantic 2.7 on; we support 2.6).
    td.__pydantic_config__ = ConfigDict(extra="forbid")
    return td


__all__ = ["ArrayProperty", "ObjectProperty", "PropertyType", "ToolProperty"]
