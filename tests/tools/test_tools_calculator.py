"""The calculator against Python's own arithmetic and ``statistics``, and its refusal of bad input."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from toolfork import ToolInputError, ToolOutput
from toolfork.toolkits import CalculatorToolkit
from toolfork.toolkits.calculator import MAX_INT_BITS

CALC = {t.name: t for t in CalculatorToolkit().tools()}
FLOATS = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False)
NUMBERS = st.one_of(st.integers(-10**6, 10**6), FLOATS)


def value(name: str, **arguments: Any) -> float:
    out = CALC[name].invoke(arguments)
    assert not out.is_error, out.as_text()
    assert out.as_text() == str(out.data)
    return out.data  # type: ignore[no-any-return]


def error(name: str, **arguments: Any) -> str:
    out = CALC[name].invoke(arguments)
    assert out.is_error, f"{name}{arguments} should be an error, got {out.as_text()}"
    return out.as_text()


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def test_the_toolkit_has_every_operation() -> None:
    assert list(CALC) == ["sum", "subtract", "multiply", "divide", "exponential", "square_root", "nth_root",
                          "mean", "median", "mode", "standard_deviation", "variance", "factorial", "evaluate"]
    assert "calculator" in (CalculatorToolkit().guidelines() or "")
    for t in CALC.values():
        assert t.description and t.to_openai(strict=True)


@settings(max_examples=80, deadline=None)
@given(st.lists(NUMBERS, max_size=20))
def test_sum_and_multiply(numbers: list[float]) -> None:
    assert close(value("sum", numbers=numbers), math.fsum(numbers))
    product = math.prod(float(n) for n in numbers[:6])
    if math.isfinite(product):
        assert close(value("multiply", numbers=numbers[:6]), product)


@settings(max_examples=80, deadline=None)
@given(NUMBERS, NUMBERS)
def test_subtract_and_divide(a: float, b: float) -> None:
    assert close(value("subtract", a=a, b=b), float(a) - float(b))
    if b == 0:
        assert "division by zero" in error("divide", a=a, b=b)
    elif not math.isfinite(float(a) / float(b)):
        assert "not a finite number" in error("divide", a=a, b=b)  # 1 / 1e-313 overflows to inf
    else:
        assert close(value("divide", a=a, b=b), float(a) / float(b))


@settings(max_examples=80, deadline=None)
@given(st.integers(-50, 50), st.integers(-8, 8))
def test_exponential_matches_pow(base: int, exponent: int) -> None:
    if base == 0 and exponent < 0:
        assert "division by zero" in error("exponential", base=base, exponent=exponent)
    else:
        assert close(value("exponential", base=base, exponent=exponent), float(base) ** exponent)


def test_exponential_overflow_and_complex_results_are_errors() -> None:
    assert "too large" in error("exponential", base=10, exponent=400)
    assert "not a real number" in error("exponential", base=-8, exponent=0.5)


@settings(max_examples=80, deadline=None)
@given(st.floats(0, 1e12, allow_nan=False))
def test_square_root(x: float) -> None:
    assert close(value("square_root", number=x), math.sqrt(x))


@settings(max_examples=80, deadline=None)
@given(st.integers(-1000, 1000), st.integers(1, 7))
def test_nth_root_inverts_integer_powers(root: int, n: int) -> None:
    assume(root >= 0 or n % 2 == 1)
    assert value("nth_root", number=root**n, n=n) == root


def test_root_errors() -> None:
    assert "negative" in error("square_root", number=-1)
    assert "not real" in error("nth_root", number=-16, n=4)
    assert "must not be 0" in error("nth_root", number=8, n=0)
    assert close(value("nth_root", number=8, n=-3), 0.5)


@settings(max_examples=80, deadline=None)
@given(st.lists(NUMBERS, min_size=2, max_size=30))
def test_statistics_match_the_statistics_module(numbers: list[float]) -> None:
    floats = [float(n) for n in numbers]
    assert close(value("mean", numbers=numbers), statistics.fmean(floats))
    assert close(value("median", numbers=numbers), statistics.median(floats))
    assert value("mode", numbers=numbers) == statistics.mode(floats)
    assert math.isclose(value("standard_deviation", numbers=numbers), statistics.stdev(floats),
                        rel_tol=1e-6, abs_tol=1e-6)
    assert math.isclose(value("variance", numbers=numbers, population=True), statistics.pvariance(floats),
                        rel_tol=1e-6, abs_tol=1e-6)


@pytest.mark.parametrize("name", ["mean", "median", "mode", "standard_deviation", "variance"])
def test_empty_lists_are_errors(name: str) -> None:
    assert "empty" in error(name, numbers=[])


def test_sample_deviation_needs_two_values_but_population_one() -> None:
    assert "at least two" in error("standard_deviation", numbers=[3])
    assert "at least two" in error("variance", numbers=[3])
    assert value("standard_deviation", numbers=[3], population=True) == 0
    assert value("sum", numbers=[]) == 0 and value("multiply", numbers=[]) == 1


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 1000))
def test_factorial(n: int) -> None:
    assert value("factorial", n=n) == math.factorial(n)


def test_factorial_limits() -> None:
    assert "non-negative" in error("factorial", n=-1)
    assert "limited" in error("factorial", n=1001)
    with pytest.raises(ToolInputError, match="n: Input should be a valid integer"):
        CALC["factorial"].invoke({"n": 2.5})


def test_bad_input_types_are_refused_by_validation() -> None:
    with pytest.raises(ToolInputError, match=r"numbers\[1\]: Input should be a valid number"):
        CALC["mean"].invoke({"numbers": [1, "two"]})


# -- evaluate --------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(2 + 3) * 4 ** 2 / 8", 10),
        ("-(3 - 5) % 3", 2),
        ("7 // 2 + 2 ^ 3", 11),
        ("sqrt(16) + abs(-2) + max(1, 5, 3) - min(4, 2)", 9),
        ("round(pi, 2)", 3.14),
        ("log(e) + log10(1000) + log2(8) + log(8, 2)", 10),
        ("floor(2.7) + ceil(2.1) + factorial(5) + pow(2, 10)", 1149),
        ("1.5e3 + 0.5", 1500.5),
        ("2 ** 100", 2**100),
        ("0.1 + 0.2", 0.30000000000000004),
    ],
)
def test_evaluate_computes(expression: str, expected: float) -> None:
    assert close(value("evaluate", expression=expression), expected)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("9**9**9**9", "too large"),
        ("10**10**10", "too large"),
        ("factorial(100000)", "limited"),
        ("2 ** 20000", "too large"),
        ("(10**3000) * (10**3000) * (10**3000) * (10**3000)", "too large"),
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("sqrt(-1)", "negative"),
        ("log(0)", "positive"),
        ("(-8) ** 0.5", "not a real number"),
        ("10.0 ** 400", "too large"),
        ("__import__('os')", "unknown function '__import__'"),
        ("__import__('os').system('true')", "unknown function"),
        ("().__class__", "is not allowed"),
        ("x + 1", "unknown name 'x'"),
        ("'a' * 3", "only numbers"),
        ("True + 1", "only numbers"),
        ("1 << 3", "'<<' is not allowed"),
        ("lambda: 1", "is not allowed"),
        ("[1, 2]", "is not allowed"),
        ("1 if 1 else 2", "is not allowed"),
        ("sqrt(x=4)", "positional arguments only"),
        ("sqrt(1, 2)", "takes 1 argument"),
        ("1 +", "cannot parse"),
        ("", "empty"),
        ("1" * 1001, "longer than 1000"),
        ("-" * 990 + "1", "nested too deeply"),
        ("(" * 400 + "1" + ")" * 400, "cannot parse"),
        ("1j", "only numbers"),
    ],
)
def test_evaluate_refuses(expression: str, message: str) -> None:
    assert message in error("evaluate", expression=expression)


def _expressions(depth: int) -> st.SearchStrategy[str]:
    leaf = st.one_of(st.integers(0, 1000).map(str),
                     st.floats(0, 1000, allow_nan=False).map(lambda f: repr(round(f, 3))))
    if depth == 0:
        return leaf
    sub = _expressions(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(["+", "-", "*", "/", "//", "%"]), sub)
        .map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(sub, st.integers(0, 3)).map(lambda t: f"({t[0]}) ** {t[1]}"),
        sub.map(lambda s: f"-{s}"),
    )


@settings(max_examples=200, deadline=None)
@given(_expressions(3))
def test_evaluate_agrees_with_python(expression: str) -> None:
    try:
        expected = eval(expression, {"__builtins__": {}}, {})  # test oracle only, on generated arithmetic
    except ZeroDivisionError:
        assert "division by zero" in error("evaluate", expression=expression)
        return
    except OverflowError:
        error("evaluate", expression=expression)
        return
    if isinstance(expected, complex) or not math.isfinite(expected):
        error("evaluate", expression=expression)
        return
    got = value("evaluate", expression=expression)
    assert close(got, expected), (expression, got, expected)
    if isinstance(expected, int):
        assert got == expected and isinstance(got, int)


def test_integral_results_read_as_integers() -> None:
    out = CALC["divide"].invoke({"a": 6, "b": 3})
    assert out.as_text() == "2" and out.data == 2
    assert isinstance(CALC["evaluate"].invoke({"expression": "2 ** 60"}).data, int)
    assert MAX_INT_BITS >= 64


def test_errors_never_raise_past_the_tool() -> None:
    for name, args in [("divide", {"a": 1, "b": 0}), ("mean", {"numbers": []}),
                       ("evaluate", {"expression": "1/"}), ("factorial", {"n": -3})]:
        out = CALC[name].invoke(args)
        assert isinstance(out, ToolOutput) and out.is_error
