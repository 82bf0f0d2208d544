"""The one rule that turns what a tool hands back (a result, a progress value, a context value) into data.

Tools return what their libraries give them: numpy scalars and arrays, mpmath numbers, fractions,
``Ellipsis``. LangChain, the OpenAI Agents SDK and smolagents render such values as text; a call
that failed on them would fail where the framework's own loop succeeds. So every value a call hands back
becomes JSON data here, in every mode (the sandbox's data-only wire carries the converted value)::

    value ── pydantic_core.to_jsonable_python ──> JSON data (dicts, lists, str, int, float, bool, None)
                 │ a type it knows: its JSON form (datetime, Decimal and UUID as text, tuples and sets
                 │ as lists, bytes as base64, NaN and infinity as null)
                 └ any other leaf: ``leaf`` below
                     array-like (numpy, anything with ``__array__`` and ``tolist``) -> ``.tolist()``
                       (a numpy scalar's is its ``.item()``)
                     an integral number -> int; Decimal and Fraction -> their exact text ("1.50",
                       "1/3"); another number (mpmath) -> a float where that is exact, else ``str``
                     anything else -> ``str(value)`` (``Ellipsis`` -> "Ellipsis"), unless that text is
                       only the object's address (``<... object at 0x...>``: a lock, a client, a socket)
                       or the value is an iterator or awaitable: then ``NotData`` names the type

A result the tool returns as a plain value becomes JSON this way (a ``ToolOutput`` the tool builds is
sent as built). A progress or context value that is data already (``is_data``: None, bool, numbers,
str, bytes, and lists, tuples and dicts of them) is kept as it is; any other becomes JSON this way.
``NotData`` (a TypeError) is what a call that returned something which is not data fails with.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import AsyncIterator, Awaitable, Iterator
from decimal import Decimal
from fractions import Fraction
from typing import Any

RETURN_DATA = ("return data instead: a JSON-like value (dict, list, str, number, bool, None), a pydantic model, "
               "a dataclass, a ToolOutput, or a str of what the model should read")
ITERATOR = " (an iterator is read once and may never end; return list(...) of its items)"
_PLAIN = (str, int, float, bool, type(None))
EXACT_NUMBERS = (Decimal, Fraction)  # chosen for exactness: kept as their exact text (pydantic's form too)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>?\s*$")  # "<_thread.lock object at 0x7f...>": a name and an address


class NotData(TypeError):
    """A value with no form as data: an iterator, or an object whose only text is its address. ``value``
    is that value, ``why`` what the message adds about its kind."""

    def __init__(self, message: str, value: Any = None, why: str = "") -> None:
        super().__init__(message)
        self.value, self.why = value, why


def type_name(value: Any) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def not_data(value: Any, why: str = "", what: str = "the tool returned") -> NotData:
    """The error for a value that is not data: it names the type and says what to return instead."""
    return NotData(f"{what} a {type_name(value)} object, which is not data{why}; {RETURN_DATA}", value, why)


def iterator_error(value: Any) -> NotData | None:
    """The error for an iterator or awaitable (read once, may never end), else None."""
    if isinstance(value, (Iterator, AsyncIterator, Awaitable)):
        return not_data(value, ITERATOR)
    return None


def leaf(value: Any) -> Any:
    """One value that pydantic does not know as data, as data (see the module's docstring)."""
    kind = type(value)
    if hasattr(kind, "__array__") and callable(getattr(value, "tolist", None)):
        return value.tolist()  # numpy: arrays as nested lists, a scalar (or 0-d array) as its .item()
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, EXACT_NUMBERS):
        return str(value)
    if isinstance(value, numbers.Number):  # mpmath, numbers of other libraries
        try:
            as_float = float(value)  # type: ignore[arg-type]
            exact = bool(as_float == value)
        except (TypeError, ValueError, OverflowError, ArithmeticError):
            exact = False
        if exact:
            return as_float
        return str(value)
    failure = iterator_error(value)
    if failure is not None:
        raise failure
    text = str(value)
    if _ADDRESS.search(text):
        raise not_data(value)
    return text


_KEPT = (str, int, float, bool, type(None), bytes)


def is_data(value: Any) -> bool:
    """Whether ``value`` is data already, as every mode carries it: None, bool, int, float, str, bytes,
    and lists, tuples and dicts (str keys) of those. Such a value is kept as it is (tuples stay tuples)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _KEPT:
            continue
        if kind is list or kind is tuple:
            stack.extend(item)
        elif kind is dict:
            for key, inner in item.items():
                if type(key) is not str:
                    return False
                stack.append(inner)
        else:
            return False
    return True


def as_value(value: Any, what: str) -> Any:
    """A progress or context value: kept when it is data already (``is_data``), else made data by the
    rule (``as_data``)."""
    return value if is_data(value) else as_data(value, what)


def as_data(value: Any, what: str = "the tool returned") -> Any:
    """``value`` as JSON data by the one rule; raises ``NotData`` naming what is not data (``what``
    starts its message: "the tool returned", "a progress value is", ...)."""
    if type(value) in _PLAIN:
        return value
    if iterator_error(value) is not None:  # pydantic would read it (once, maybe for ever)
        raise not_data(value, ITERATOR, what)
    # Imported here: pydantic_core is loaded by the tool model anyway, but this module stays cheap alone.
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        return to_jsonable_python(value, fallback=leaf, bytes_mode="base64", inf_nan_mode="null")
    except NotData as exc:
        if exc.value is value:
            raise not_data(value, exc.why, what) from None
        inner = f"a {type_name(exc.value)} object{exc.why}"
    except PydanticSerializationError as exc:  # e.g. a dict key that has no text form
        inner = str(exc)
    raise NotData(f"{what} a {type_name(value)} holding something that is not data ({inner}); "
                  f"{RETURN_DATA}", value)


__all__ = ["ITERATOR", "RETURN_DATA", "NotData", "as_data", "as_value", "is_data", "iterator_error", "leaf", "not_data",
           "type_name"]
