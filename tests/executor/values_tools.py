"""Tools that hand back values which are not JSON (numpy, mpmath, Decimal, Fraction, Ellipsis) as a
result, as progress and as a context value, and what each must become by the values rule."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from toolfork.tools import ToolOutput, ToolRuntime

# kind -> (what the tool hands back, the data it must become)
VALUES: dict[str, tuple[Any, Any]] = {
    "numpy_int64": (np.int64(3), 3),
    "numpy_in_dict": ({"result": np.int64(3)}, {"result": 3}),
    "numpy_array": (np.array([[1, 2], [3, 4]]), [[1, 2], [3, 4]]),
    "numpy_float32": (np.float32(0.5), 0.5),
    "numpy_float64": (np.float64(0.25), 0.25),
    "numpy_bool": (np.bool_(True), True),
    "mpmath_exact": (mpmath.mpf(0.25), 0.25),
    "mpmath_third": (mpmath.mpf(1) / 3, 1 / 3),
    "fraction": (Fraction(1, 3), "1/3"),
    "decimal": (Decimal("1.50"), "1.50"),
    "ellipsis": (..., "Ellipsis"),
    "list_with_ellipsis": ([1, ...], [1, "Ellipsis"]),
    "mixed": ({"m": mpmath.mpf(0.5), "f": Fraction(3, 4), "d": Decimal("0.1"), "a": np.arange(3)},
              {"m": 0.5, "f": "3/4", "d": "0.1", "a": [0, 1, 2]}),
}
KINDS = sorted(VALUES)


def returns(kind: str) -> Any:
    """Return a value that is not JSON."""
    return VALUES[kind][0]


def progresses(kind: str, runtime: ToolRuntime) -> str:
    """Report a value that is not JSON as progress."""
    runtime.emit_progress(VALUES[kind][0])
    return "done"


def sets(kind: str, runtime: ToolRuntime) -> str:
    """Merge a value that is not JSON into the host's context."""
    runtime.set_context({kind: VALUES[kind][0]})
    return "done"


def builds(kind: str) -> ToolOutput:
    """Build the output itself, with a value that is not JSON as its data."""
    return ToolOutput.text("built") + ToolOutput(data=VALUES[kind][0])


FUNCTIONS = [returns, progresses, sets, builds]


class Colour(str, __import__("enum").Enum):
    RED = "red"


class Text(str):
    """A framework's own text type (smolagents' AgentText is one)."""


STR_SUBCLASSES: dict[str, Any] = {"str_enum": Colour.RED, "numpy_str": np.str_("abc"), "text_type": Text("plain")}


def returns_str(kind: str) -> Any:
    """Hand back a str subclass.

    Args:
        kind: which one
    """
    return STR_SUBCLASSES[kind]
