"""Values that are not JSON (numpy, mpmath, Decimal, Fraction, Ellipsis) become data by one rule, as a
result, a progress value and a context value, in every mode: fork, sequential, inline, the sandbox (whose
data-only wire carries the converted value) and Ray. Each type is checked in each mode."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.executor.conftest_ray import ray_cluster  # noqa: F401 - a fixture
from tests.executor.values_tools import FUNCTIONS, KINDS, STR_SUBCLASSES, VALUES, returns_str
from toolfork import Limits, tool
from toolfork.executor import CallFinished, CallProgress, Executor, ToolCall

MODES = ["fork", "sequential", "inline", "sandbox"]


def _executor(how: str) -> Executor:
    if how == "inline":
        return Executor([tool(inline=True)(f) for f in FUNCTIONS], mode="fork", workers=1)
    if how == "sandbox":
        return Executor([tool(f) for f in FUNCTIONS], mode="fork", workers=2, limits=Limits(network=False))
    return Executor([tool(f) for f in FUNCTIONS], mode=how, workers=2)


def _check(ex: Executor) -> None:
    calls = [ToolCall(f"{what}-{kind}", what, {"kind": kind}) for kind in KINDS
             for what in ("returns", "progresses", "sets", "builds")]
    events = list(ex.stream(calls))
    finished = {e.call_id: e.result for e in events if isinstance(e, CallFinished)}
    progress = {e.call_id: e.value for e in events if isinstance(e, CallProgress)}
    assert [r.status for r in finished.values()] == ["ok"] * len(calls), \
        [(r.call_id, r.error) for r in finished.values() if r.status != "ok"]
    for kind in KINDS:
        want = VALUES[kind][1]
        out = finished[f"returns-{kind}"].output
        assert out is not None
        if isinstance(want, str):
            assert (out.as_text(), out.data) == (want, None), kind
        else:
            assert (json.loads(out.as_text()), out.data) == (want, want), kind
            assert type(out.data) is type(want), kind
        assert progress[f"progresses-{kind}"] == want, kind
        assert type(progress[f"progresses-{kind}"]) is type(want), kind
        assert ex.context[kind] == want and type(ex.context[kind]) is type(want), kind


@pytest.mark.parametrize("how", MODES)
def test_values_become_data_in_every_mode(how: str) -> None:
    with _executor(how) as ex:
        _check(ex)


@pytest.mark.ray
def test_values_become_data_in_ray_mode(ray_cluster: Any) -> None:  # noqa: F811 - the fixture
    with _executor("ray") as executor:
        _check(executor)


def test_the_sandbox_wire_carries_a_built_output_s_data_converted() -> None:
    """A ToolOutput the tool builds crosses as built in a warm worker; the sandbox's data-only wire carries
    its data made data by the same rule, never the object."""
    with _executor("sandbox") as sandboxed:
        results = sandboxed.run([ToolCall(k, "builds", {"kind": k}) for k in KINDS])
    for kind, result in zip(KINDS, results, strict=True):
        assert result.status == "ok", result.error
        assert result.output is not None and result.output.data == VALUES[kind][1], kind
        assert type(result.output.data) is type(VALUES[kind][1]), kind


@pytest.mark.parametrize("how", MODES)
def test_a_str_subclass_returned_is_its_text_in_every_mode(how: str) -> None:
    """A StrEnum member, numpy.str_ or a framework's text type is the text it holds, as a str (the fork
    pool's TEXT frame once refused one as a frame of the wrong shape and replaced the worker)."""
    with _executor(how) as ex:
        ex.add_tools(tool(inline=how == "inline")(returns_str))
        results = ex.run([ToolCall(kind, "returns_str", {"kind": kind}) for kind in STR_SUBCLASSES])
    assert [(r.status, r.output.as_text() if r.output else r.error) for r in results] == [
        ("ok", "red"), ("ok", "abc"), ("ok", "plain")]
    assert all(type(r.output.content[0].text) is str for r in results if r.output)
