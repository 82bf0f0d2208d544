"""The values rule itself (``toolfork.tools.values``): what each kind of value becomes, what is refused
naming its type, and the data-only codec applying the same rule where it encodes."""

from __future__ import annotations

import threading
from decimal import Decimal
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from toolfork.executor.wire import dataonly
from toolfork.tools.values import NotData, as_data, as_value, is_data


@pytest.mark.parametrize(("value", "want"), [
    (np.int64(3), 3), (np.float32(0.5), 0.5), (np.array([[1, 2]]), [[1, 2]]), (np.array(7), 7),
    (np.bool_(False), False), (mpmath.mpf(0.25), 0.25), (mpmath.mpf(2), 2.0),
    (Fraction(1, 3), "1/3"), (Fraction(1, 2), "1/2"), (Decimal("1.50"), "1.50"), (..., "Ellipsis"),
    (1j, "1j"), ({"k": (1, np.int8(2))}, {"k": [1, 2]}), ({np.int64(1)}, [1]), (float("nan"), float("nan")),
])
def test_each_kind_of_value_becomes_data(value: object, want: object) -> None:
    got = as_data(value)
    if want != want:  # NaN is kept as a float at the top (JSON text is the output's business)
        assert got != got
    else:
        assert got == want and type(got) is type(want)


def test_mpmath_beyond_a_float_is_its_text() -> None:
    with mpmath.workdps(30):
        third = mpmath.mpf(1) / 3
        assert as_data(third) == str(third) and len(str(third)) > 20


@pytest.mark.parametrize(("value", "named"), [
    (threading.Lock(), "_thread.lock object"), (iter([1]), "list_iterator object"),
    ({"deep": [threading.Lock()]}, "dict holding something that is not data (a _thread.lock object)"),
])
def test_values_with_no_form_as_data_are_refused_naming_their_type(value: object, named: str) -> None:
    with pytest.raises(NotData, match="not data") as caught:
        as_data(value, "a progress value is")
    assert named in str(caught.value) and str(caught.value).startswith("a progress value is a")


def test_progress_and_context_values_that_are_data_are_kept_as_they_are() -> None:
    kept = {"pair": (1, "two"), "blob": b"\x00", "n": [None, True, 2.5]}
    assert is_data(kept) and as_value(kept, "x") is kept
    assert not is_data({1: "int key"}) and as_value({1: "a"}, "x") == {"1": "a"}
    assert as_value({"n": np.int64(1)}, "x") == {"n": 1}


def test_the_data_only_codec_encodes_by_the_same_rule() -> None:
    sent = {"n": np.int64(3), "a": np.arange(2), "m": mpmath.mpf(0.5), "e": ..., "pair": (1, 2)}
    assert dataonly.decode(dataonly.encode(sent)) == {"n": 3, "a": [0, 1], "m": 0.5, "e": "Ellipsis", "pair": (1, 2)}
    with pytest.raises(dataonly.NotData, match=r"_thread\.lock"):
        dataonly.encode({"lock": threading.Lock()})
