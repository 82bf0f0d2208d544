"""Tool signatures covering the type-hint vocabulary; their schemas are pinned by golden files.

Kept out of the test module so the hypothesis tests can reuse the same tools.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, Field
from typing_extensions import NotRequired, TypedDict

from toolfork import ToolRuntime, tool


class Color(str, enum.Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str
    zip_code: str | None = None


class Person(BaseModel):
    """Someone to contact."""

    name: str = Field(description="full name")
    age: int = Field(ge=0, le=150)
    addresses: list[Address] = []


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


@dataclasses.dataclass
class Size:
    width: int
    height: int
    unit: Literal["px", "cm"] = "px"


class Filters(TypedDict):
    query: str
    limit: NotRequired[int]


class Circle(BaseModel):
    kind: Literal["circle"]
    radius: float


class Square(BaseModel):
    kind: Literal["square"]
    side: float


@tool
def scalars(text: str, count: int, ratio: float, flag: bool) -> str:
    """Echo four scalar values.

    Args:
        text: any text
        count: a whole number
        ratio: a real number
        flag: a yes/no switch
    """
    return f"{text} {count} {ratio} {flag}"


@tool
def defaults(city: str, days: int = 3, unit: Optional[str] = None, verbose: bool = False) -> dict:  # noqa: UP045
    """Forecast the weather.

    A longer paragraph that explains when to use the tool.

    Args:
        city: the city name
        days: how many days ahead
        unit: "c" or "f"; the local unit when omitted
        verbose: include hourly detail
    """
    return {"city": city, "days": days, "unit": unit, "verbose": verbose}


@tool
def collections_(
    tags: list[str],
    scores: dict[str, float],
    pair: tuple[int, str],
    matrix: list[list[int]] | None = None,
) -> int:
    """Count things in collections.

    Args:
        tags: labels
        scores: a score per label
        pair: an (id, name) pair
        matrix: rows of integers
    """
    return len(tags) + len(scores) + len(pair) + len(matrix or [])


@tool
def choices(color: Color, priority: Priority, mode: Literal["fast", "slow"] = "fast") -> str:
    """Pick options.

    Args:
        color: a color
        priority: 1 (low) or 2 (high)
        mode: how hard to try
    """
    return f"{color.value} {int(priority)} {mode}"


@tool
def nested(person: Person, tree: Optional[Tree] = None) -> str:  # noqa: UP045
    """Register a person and an optional tree.

    Args:
        person: who
        tree: a tree of integers
    """
    return person.name


@tool
def structures(size: Size, filters: Filters) -> str:
    """Use a dataclass and a TypedDict.

    Args:
        size: the size of the box
        filters: search filters
    """
    return f"{size.width}x{size.height} {filters['query']}"


# typing.Optional / typing.Union on purpose: the old spellings must work as well as X | Y.
@tool
def unions(value: Union[int, str], shape: Union[Circle, Square] = Field(discriminator="kind")) -> str:  # noqa: UP007
    """Accept unions.

    Args:
        value: a number or a word
        shape: a circle or a square
    """
    return f"{value} {shape.kind}"


@tool
def numpy_doc(alpha: float, beta: int) -> float:
    """Combine two numbers (NumPy docstring).

    Parameters
    ----------
    alpha : float
        the weight
    beta : int
        the offset
    """
    return alpha * beta


@tool
def constrained(
    name: Annotated[str, Field(min_length=1, max_length=20)],
    n: Annotated[int, Field(ge=1, le=10)] = 1,
    note: Annotated[str, "a free-form note"] = "",
) -> str:
    """Constrained values.

    Args:
        name: 1 to 20 characters
    """
    return name * n + note


@tool
def with_runtime(query: str, runtime: ToolRuntime) -> str:
    """A tool that reports progress.

    Args:
        query: what to look up
    """
    runtime.emit_progress(0.5)
    return query


@tool
def no_arguments() -> str:
    """Return the time of day."""
    return "noon"


@tool
def awkward_names(schema: str, model_name: str, json: int = 0) -> str:
    """Parameter names that clash with pydantic's BaseModel attributes.

    Args:
        schema: a schema name
        model_name: a model name
        json: a number
    """
    return f"{schema} {model_name} {json}"


ALL = [scalars, defaults, collections_, choices, nested, structures, unions, numpy_doc, constrained,
       with_runtime, no_arguments, awkward_names]
