"""``CalculatorToolkit``: exact arithmetic and statistics for models, which are poor at both.

Every operation returns an error ``ToolOutput`` (never raises) on bad input such as a division by
zero or an empty list, so the model reads what went wrong and can retry. ``evaluate`` parses with
``ast`` and walks a whitelist; it never calls ``eval``.

Every argument that scales the work is bounded, so no input can tie up a worker for long; going over a
bound gives an error output that names it:

* integers (constants and every intermediate result of ``evaluate``) have at most ``MAX_INT_BITS``
  bits, and ``**`` estimates the size of an integer power before computing it (``9**9**9**9``);
* ``round(x, ndigits)``: ``|ndigits| <= MAX_ROUND_DIGITS`` (``round(7, -10**8)`` would compute
  ``10**(10**8)``);
* ``factorial(n)``: ``n <= MAX_FACTORIAL``; ``evaluate``'s expression: ``MAX_EXPRESSION_CHARS``;
* the list tools (sum, multiply, mean, median, mode, standard deviation, variance) take at most
  ``MAX_NUMBERS`` numbers (the exact statistics cost microseconds a number).

The rest is cheap whatever the input: floats overflow to an error, ``pow`` takes two arguments (no
modular exponentiation), and shifts, bitwise operators and strings are not in the whitelist.
"""

from __future__ import annotations

import ast
import math
import operator
import statistics
from collections.abc import Callable
from typing import Any

from toolfork.tools import Tool, Toolkit, ToolOutput

Number = int | float

MAX_INT_BITS = 10_000  # about 3000 decimal digits: far beyond any real answer, cheap to compute
MAX_FACTORIAL = 1000
MAX_EXPRESSION_CHARS = 1000
MAX_ROUND_DIGITS = 4000  # round(x, -4000) computes 10**4000: a millisecond
MAX_NUMBERS = 100_000


class CalculationError(Exception):
    """A calculation that has no (representable) answer; its message goes to the model."""


def _finish(value: Any) -> Number:
    """Ints stay exact; integral floats are shown as ints (a model reads ``6``, not ``6.0``)."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, complex):
        raise CalculationError("the result is not a real number")
    if isinstance(value, int):
        if value.bit_length() > MAX_INT_BITS:
            raise CalculationError(f"the result is too large (more than {MAX_INT_BITS} bits)")
        return value
    if not math.isfinite(value):
        raise CalculationError("the result is too large or undefined (not a finite number)")
    if value.is_integer() and abs(value) < 2**53:
        return int(value)
    return float(value)


def _compute(fn: Callable[[], Any]) -> Number | ToolOutput:
    try:
        return _finish(fn())
    except CalculationError as exc:
        return ToolOutput.error(str(exc))
    except ZeroDivisionError:
        return ToolOutput.error("division by zero")
    except OverflowError:
        return ToolOutput.error("the result is too large to represent")
    except statistics.StatisticsError as exc:
        return ToolOutput.error(str(exc))
    except (ValueError, TypeError) as exc:
        return ToolOutput.error(f"invalid input: {exc}")


def _nonempty(numbers: list[float], what: str) -> None:
    if not numbers:
        raise CalculationError(f"{what} needs at least one number; the list is empty")
    _not_too_many(numbers)


def _not_too_many(numbers: list[float]) -> None:
    if len(numbers) > MAX_NUMBERS:
        raise CalculationError(f"the list has {len(numbers)} numbers; the limit is {MAX_NUMBERS}")


def _bounded(fn: Callable[[list[float]], Any]) -> Callable[[list[float]], Any]:
    def run(numbers: list[float]) -> Any:
        _not_too_many(numbers)
        return fn(numbers)

    return run


def _statistic(numbers: list[float], what: str, fn: Callable[[list[float]], float]) -> Number | ToolOutput:
    def run() -> float:
        _nonempty(numbers, f"the {what}")
        return fn(numbers)

    return _compute(run)


def _dispersion(
    numbers: list[float],
    population: bool,
    what: str,
    of_population: Callable[[list[float]], float],
    of_sample: Callable[[list[float]], float],
) -> Number | ToolOutput:
    """The sample measure divides by n - 1, so it needs two numbers where the population one needs one."""

    def run() -> float:
        _nonempty(numbers, f"the {what}")
        if not population and len(numbers) < 2:
            raise CalculationError(f"the sample {what} needs at least two numbers")
        return of_population(numbers) if population else of_sample(numbers)

    return _compute(run)


# -- safe evaluation -------------------------------------------------------------------------------


def _check_int(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculationError(f"an intermediate result is too large (more than {MAX_INT_BITS} bits)")
    return value


def _power(base: Number, exponent: Number) -> Number:
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        # Estimate the size before computing: 9**387420489 would take minutes and gigabytes.
        if exponent * math.log2(abs(base)) > MAX_INT_BITS:
            raise CalculationError(f"{base} ** {exponent} is too large (more than {MAX_INT_BITS} bits)")
    if base == 0 and exponent < 0:
        raise CalculationError("0 cannot be raised to a negative power (division by zero)")
    result = base**exponent
    if isinstance(result, complex):
        raise CalculationError(f"{base} ** {exponent} is not a real number")
    return _check_int(result)


def _factorial(n: Number) -> int:
    if isinstance(n, float):
        if not n.is_integer():
            raise CalculationError(f"factorial needs an integer, got {n}")
        n = int(n)
    if n < 0:
        raise CalculationError(f"factorial needs a non-negative integer, got {n}")
    if n > MAX_FACTORIAL:
        raise CalculationError(f"factorial is limited to n <= {MAX_FACTORIAL}, got {n}")
    return math.factorial(n)


def _round(x: Number, ndigits: Any = None) -> Number:
    if ndigits is None:
        return round(x)
    if isinstance(ndigits, float):
        if not ndigits.is_integer():
            raise CalculationError(f"round() needs a whole number of digits, got {ndigits}")
        ndigits = int(ndigits)
    if abs(ndigits) > MAX_ROUND_DIGITS:
        raise CalculationError(f"round() takes at most {MAX_ROUND_DIGITS} digits either way (|ndigits| <= "
                               f"{MAX_ROUND_DIGITS}), got {_short(ndigits)}")
    return round(x, ndigits)


def _short(n: Number) -> str:
    """A number for a message: a huge int is shown by its size, not its 3000 digits."""
    if isinstance(n, int) and n.bit_length() > 64:
        return f"an integer of {n.bit_length()} bits"
    return repr(n)


def _log(x: Number, base: Number | None = None) -> float:
    if x <= 0:
        raise CalculationError(f"the logarithm needs a positive number, got {x}")
    return math.log(x) if base is None else math.log(x, base)


def _sqrt(x: Number) -> float:
    if x < 0:
        raise CalculationError(f"cannot take the square root of a negative number ({x})")
    return math.sqrt(x)


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int]] = {  # name -> (fn, min args, max args)
    "sqrt": (_sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "log": (_log, 1, 2),
    "log10": (lambda x: _log(x, 10), 1, 1),
    "log2": (lambda x: _log(x, 2), 1, 1),
    "exp": (math.exp, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "asin": (math.asin, 1, 1),
    "acos": (math.acos, 1, 1),
    "atan": (math.atan, 1, 1),
    "min": (min, 1, 100),
    "max": (max, 1, 100),
    "factorial": (_factorial, 1, 1),
    "pow": (_power, 2, 2),
}


def evaluate_expression(expression: str) -> Number:
    """Evaluate arithmetic without ``eval``: parse, then walk only whitelisted nodes."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculationError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    text = expression.strip().replace("^", "**") if "^" in expression else expression.strip()
    if not text:
        raise CalculationError("the expression is empty")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        shown = expression if len(expression) <= 60 else expression[:57] + "..."
        raise CalculationError(f"cannot parse the expression {shown!r}: {reason}") from None
    except (RecursionError, MemoryError):
        raise CalculationError("the expression is nested too deeply") from None
    try:
        return _eval(tree.body)  # type: ignore[no-any-return]
    except RecursionError:
        raise CalculationError("the expression is nested too deeply") from None


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise CalculationError(f"only numbers are allowed, not {node.value!r}")
        return _check_int(node.value)
    if isinstance(node, ast.BinOp):
        op = _BINARY.get(type(node.op))
        if op is None:
            raise CalculationError(f"the operator {_op_text(node.op)} is not allowed")
        return _check_int(op(_eval(node.left), _eval(node.right)))
    if isinstance(node, ast.UnaryOp):
        uop = _UNARY.get(type(node.op))
        if uop is None:
            raise CalculationError(f"the operator {_op_text(node.op)} is not allowed")
        return uop(_eval(node.operand))
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise CalculationError(f"unknown name {node.id!r} (constants: {', '.join(_CONSTANTS)})")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise CalculationError(f"unknown function {name!r} (functions: {', '.join(sorted(_FUNCTIONS))})")
        if node.keywords:
            raise CalculationError(f"{node.func.id}() takes positional arguments only")
        fn, lo, hi = _FUNCTIONS[node.func.id]
        if not lo <= len(node.args) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise CalculationError(f"{node.func.id}() takes {want} argument(s), got {len(node.args)}")
        return _check_int(fn(*[_eval(a) for a in node.args]))
    raise CalculationError(f"{ast.unparse(node)!r} is not allowed in an arithmetic expression")


def _op_text(op: ast.AST) -> str:
    names = {
        ast.BitAnd: "&",
        ast.BitOr: "|",
        ast.BitXor: "^",
        ast.LShift: "<<",
        ast.RShift: ">>",
        ast.MatMult: "@",
        ast.Invert: "~",
        ast.Not: "not",
    }
    return repr(names.get(type(op), type(op).__name__))


# -- the tools ---------------------------------------------------------------------------------------


class SumTool(Tool):
    name = "sum"
    description = "Add a list of numbers."

    def __call__(self, numbers: list[float]) -> Number | ToolOutput:
        """See the class description.

        Args:
            numbers: the numbers to add (an empty list sums to 0)
        """
        return _compute(lambda: _bounded(math.fsum)(numbers))


class SubtractTool(Tool):
    name = "subtract"
    description = "Subtract b from a (a - b)."

    def __call__(self, a: float, b: float) -> Number | ToolOutput:
        """See the class description.

        Args:
            a: the minuend
            b: the subtrahend
        """
        return _compute(lambda: a - b)


class MultiplyTool(Tool):
    name = "multiply"
    description = "Multiply a list of numbers together."

    def __call__(self, numbers: list[float]) -> Number | ToolOutput:
        """See the class description.

        Args:
            numbers: the factors (an empty list gives 1)
        """
        return _compute(lambda: _bounded(math.prod)(numbers))


class DivideTool(Tool):
    name = "divide"
    description = "Divide a by b (a / b)."

    def __call__(self, a: float, b: float) -> Number | ToolOutput:
        """See the class description.

        Args:
            a: the dividend
            b: the divisor (must not be 0)
        """
        if b == 0:
            return ToolOutput.error("division by zero: the divisor b is 0")
        return _compute(lambda: a / b)


class ExponentialTool(Tool):
    name = "exponential"
    description = "Raise base to the power exponent (base ** exponent)."

    def __call__(self, base: float, exponent: float) -> Number | ToolOutput:
        """See the class description.

        Args:
            base: the base
            exponent: the exponent
        """
        return _compute(lambda: _power(base, exponent))


class SquareRootTool(Tool):
    name = "square_root"
    description = "The square root of a non-negative number."

    def __call__(self, number: float) -> Number | ToolOutput:
        """See the class description.

        Args:
            number: a number >= 0
        """
        if number < 0:
            return ToolOutput.error(f"cannot take the square root of a negative number ({number})")
        return _compute(lambda: math.sqrt(number))


class NthRootTool(Tool):
    name = "nth_root"
    description = "The real n-th root of a number (odd roots of negative numbers are negative)."

    def __call__(self, number: float, n: int) -> Number | ToolOutput:
        """See the class description.

        Args:
            number: the radicand
            n: the degree of the root (a non-zero integer; 2 is the square root)
        """
        if n == 0:
            return ToolOutput.error("the degree n of the root must not be 0")
        if number < 0 and n % 2 == 0:
            return ToolOutput.error(f"an even root (n={n}) of a negative number ({number}) is not real")
        if number == 0 and n < 0:
            return ToolOutput.error("a negative root of 0 is a division by zero")

        def root() -> float:
            magnitude = abs(number) ** (1.0 / n)
            # Snap to an exact integer root when there is one (27 ** (1/3) is 3.0000000000000004).
            nearest = round(magnitude)
            if nearest != 0 and math.isclose(nearest**n, abs(number), rel_tol=1e-12):
                magnitude = float(nearest)
            return -magnitude if number < 0 else magnitude

        return _compute(root)


class MeanTool(Tool):
    name = "mean"
    description = "The arithmetic mean (average) of a list of numbers."

    def __call__(self, numbers: list[float]) -> Number | ToolOutput:
        """See the class description.

        Args:
            numbers: at least one number
        """
        return _statistic(numbers, "mean", statistics.fmean)


class MedianTool(Tool):
    name = "median"
    description = "The median (middle value) of a list of numbers."

    def __call__(self, numbers: list[float]) -> Number | ToolOutput:
        """See the class description.

        Args:
            numbers: at least one number
        """
        return _statistic(numbers, "median", statistics.median)


class ModeTool(Tool):
    name = "mode"
    description = "The most common value of a list of numbers (the first one seen when tied)."

    def __call__(self, numbers: list[float]) -> Number | ToolOutput:
        """See the class description.

        Args:
            numbers: at least one number
        """
        return _statistic(numbers, "mode", statistics.mode)


class StandardDeviationTool(Tool):
    name = "standard_deviation"
    description = "The standard deviation of a list of numbers (sample by default, or population)."

    def __call__(self, numbers: list[float], population: bool = False) -> Number | ToolOutput:
        """See the class description.

        Args:
            numbers: the data (at least two numbers for the sample deviation, one for population)
            population: true for the population standard deviation instead of the sample one
        """
        return _dispersion(numbers, population, "standard deviation", statistics.pstdev, statistics.stdev)


class VarianceTool(Tool):
    name = "variance"
    description = "The variance of a list of numbers (sample by default, or population)."

    def __call__(self, numbers: list[float], population: bool = False) -> Number | ToolOutput:
        """See the class description.

        Args:
            numbers: the data (at least two numbers for the sample variance, one for population)
            population: true for the population variance instead of the sample one
        """
        return _dispersion(numbers, population, "variance", statistics.pvariance, statistics.variance)


class FactorialTool(Tool):
    name = "factorial"
    description = f"n! for an integer 0 <= n <= {MAX_FACTORIAL}."

    def __call__(self, n: int) -> Number | ToolOutput:
        """See the class description.

        Args:
            n: a non-negative integer
        """
        return _compute(lambda: _factorial(n))


class EvaluateTool(Tool):
    name = "evaluate"
    description = (
        "Evaluate an arithmetic expression exactly, e.g. '(2 + 3) * 4 ** 2 / 7'. Supports numbers, "
        "+ - * / // % ** (^ also means power) and parentheses, the constants pi, e and tau, and the "
        "functions " + ", ".join(sorted(_FUNCTIONS)) + "."
    )

    def __call__(self, expression: str) -> Number | ToolOutput:
        """See the class description.

        Args:
            expression: the expression, in Python/calculator syntax
        """
        return _compute(lambda: evaluate_expression(expression))


# -- the toolkit -----------------------------------------------------------------------------------

TOOL_CLASSES: tuple[type[Tool], ...] = (
    SumTool,
    SubtractTool,
    MultiplyTool,
    DivideTool,
    ExponentialTool,
    SquareRootTool,
    NthRootTool,
    MeanTool,
    MedianTool,
    ModeTool,
    StandardDeviationTool,
    VarianceTool,
    FactorialTool,
    EvaluateTool,
)


class CalculatorToolkit(Toolkit):
    name = "calculator"

    def guidelines(self) -> str:
        return (
            "Use the calculator tools for any arithmetic or statistics instead of computing in your "
            "head. Use evaluate for a compound expression; the other tools for single operations."
        )

    def provide(self) -> list[Tool]:
        return [cls() for cls in TOOL_CLASSES]


__all__ = [
    "CalculatorToolkit",
    "DivideTool",
    "EvaluateTool",
    "ExponentialTool",
    "FactorialTool",
    "MeanTool",
    "MedianTool",
    "ModeTool",
    "MultiplyTool",
    "NthRootTool",
    "SquareRootTool",
    "StandardDeviationTool",
    "SubtractTool",
    "SumTool",
    "VarianceTool",
    "evaluate_expression",
]
