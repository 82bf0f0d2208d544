"""A tool that returns something that is not data (a lock, a client, a generator object) gets an error
result naming the type and what to return instead, in every way a call runs; data, generator tools and
scalars with a faithful text form still come back ok."""

from __future__ import annotations

import datetime
import functools
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from toolfork import Limits, ToolOutput, tool
from toolfork.executor import Executor, ToolCall

REPO = Path(__file__).resolve().parents[2]


def a_lock() -> str:
    """Return a lock by mistake."""
    return threading.Lock()  # type: ignore[return-value]


def a_generator_object() -> str:
    """Return a generator expression (items it never gives as progress)."""
    return (str(i) for i in range(3))  # type: ignore[return-value]


def an_iterator() -> str:
    """Return a map object."""
    return map(str, range(3))  # type: ignore[return-value]


def a_lock_inside() -> dict[str, Any]:
    """Return data with a lock in it."""
    return {"ok": 1, "guard": threading.Lock()}


def _logged(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)
    return wrapper


@_logged
def counting(n: int) -> Iterator[int]:
    """A generator tool behind a decorator: its yields are progress, its return value the result."""
    yield from range(n)
    return n  # type: ignore[misc]


@dataclass
class Point:
    x: int
    y: int


def data(kind: str) -> Any:
    """Data of every accepted kind."""
    return {"dict": {"a": [1, 2.5, None, True]}, "point": Point(1, 2), "date": datetime.date(2026, 1, 2),
            "uuid": uuid.UUID(int=7), "output": ToolOutput.text("t"), "none": None}[kind]


FUNCTIONS = [a_lock, a_generator_object, an_iterator, a_lock_inside, counting, data]
TOOLS = [tool(f) for f in FUNCTIONS]


def _executor(how: str) -> Executor:
    if how == "inline":
        return Executor([tool(inline=True)(f) for f in FUNCTIONS], mode="fork", workers=1)
    if how == "sandbox":
        return Executor(TOOLS, mode="fork", workers=1, limits=Limits(network=False))
    return Executor(TOOLS, mode=how, workers=2)


HOW = ["fork", "sequential", "inline", "sandbox"]


@pytest.mark.parametrize("how", HOW)
def test_a_result_that_is_not_data_is_an_error_naming_its_type(how: str) -> None:
    with _executor(how) as ex:
        results = ex.run([ToolCall("l", "a_lock", {}), ToolCall("g", "a_generator_object", {}),
                          ToolCall("m", "an_iterator", {}), ToolCall("n", "a_lock_inside", {})])
    for r in results:
        assert r.status == "error" and r.error is not None and r.error.type == "TypeError", (how, r)
        assert "return data instead: a JSON-like value" in r.error.message, r.error.message
    lock, gen, it, nested = (r.error.message for r in results if r.error)
    assert lock.startswith("the tool returned a _thread.lock object, which is not data;")
    assert gen.startswith("the tool returned a generator object, which is not data (an iterator is read once")
    assert "return list(...) of its items" in gen
    assert it.startswith("the tool returned a map object, which is not data")
    assert nested.startswith("the tool returned a dict holding something that is not data") and "_thread.lock" in nested


@pytest.mark.parametrize("how", HOW)
def test_data_and_generator_tools_still_come_back_ok(how: str) -> None:
    kinds = ["dict", "point", "date", "uuid", "output", "none"]
    with _executor(how) as ex:
        results = ex.run([ToolCall("c", "counting", {"n": 3}),
                          *(ToolCall(k, "data", {"kind": k}) for k in kinds)])
    assert [r.status for r in results] == ["ok"] * 7, [r.error for r in results]
    texts = [r.output.as_text() for r in results if r.output is not None]
    assert texts == ["3", json.dumps({"a": [1, 2.5, None, True]}), '{"x": 1, "y": 2}', "2026-01-02",
                     "00000000-0000-0000-0000-000000000007", "t", ""]


def test_toolfork_run_writes_the_error_record(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    calls.write_text(json.dumps({"id": "l", "name": "a_lock", "arguments": {}}) + "\n")
    done = subprocess.run([sys.executable, "-m", "toolfork.cli", "run", str(calls), "--tools",
                           "tests/tools/test_not_data_results.py:TOOLS"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert done.returncode != 2, done.stderr
    [record] = [json.loads(line) for line in done.stdout.splitlines()]
    assert record["status"] == "error" and record["error"]["type"] == "TypeError"
    assert "_thread.lock object, which is not data" in record["error"]["message"]
