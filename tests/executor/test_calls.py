"""Every call is admitted and finished by one rule (``toolfork.executor.calls``), whichever path runs it.

Two kinds of test: the source is searched for copies of each rule (by the names and the statements
that gave them away before: a second ``effective_timeout``, a second positive-number check, a second
limit-or-crash verdict, ``started_at`` stamped elsewhere), and the rule's outcomes are checked on the
paths that use it (``Executor.run`` and ``toolfork run``'s line lane give the same counts and results
for an unknown tool, a bad timeout and a journal's answer).
"""

from __future__ import annotations

import ast
import io
import json
import math
import os
import sys
from pathlib import Path

import pytest

from toolfork import tool
from toolfork.executor import Executor, ToolCall
from toolfork.executor.calls import CallBook, effective_timeout
from toolfork.executor.stats import UNKNOWN_TOOL

PACKAGE = Path(__file__).resolve().parents[2] / "toolfork"

# Places allowed a copy of a rule, by file and name (none: sessions admit and finish through calls.py).
SESSION_COPIES: dict[str, set[str]] = {}

# rule -> the one file that may define it
RULES = {
    "effective_timeout": "executor/calls.py",
    "positive_finite": "executor/calls.py",
    "unknown_tool": "executor/calls.py",
    "stamp": "executor/calls.py",
    "death_result": "executor/backends/fork/outcomes.py",
}


def _rule_name(name: str) -> str:
    """``_is_positive_finite`` and ``positive_finite`` are one rule."""
    name = name.lstrip("_")
    return name[3:] if name.startswith("is_") else name


def copies() -> dict[str, list[str]]:
    """rule -> every place in toolfork/ that writes it: a definition by its name, a call of the
    limit verdict on a wait status (``rlimits.classify``), a store to a result's ``started_at``."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _rule_name(node.name) in RULES:
                found.setdefault(_rule_name(node.name), []).append(where)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "classify" and ast.unparse(node.func.value) == "rlimits":
                found.setdefault("classify", []).append(where)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and node.attr == "started_at" \
                    and ast.unparse(node.value) != "self":
                found.setdefault("started_at", []).append(where)
    return found


def test_each_rule_of_a_call_is_written_once() -> None:
    found = copies()
    allowed = {**RULES, "classify": "executor/backends/fork/outcomes.py", "started_at": "executor/calls.py"}
    extra = []
    for rule, places in sorted(found.items()):
        for place in places:
            if place != allowed[rule] and rule not in SESSION_COPIES.get(place, set()):
                extra.append(f"{rule}: {place} (the rule lives in {allowed[rule]})")
    assert not extra, "a rule written again:\n" + "\n".join(extra)
    for rule, home in allowed.items():
        if rule == "started_at":  # stores, not a definition: ``stamp`` and ``finish`` (which writes it out)
            assert found.get(rule, []).count(home) >= 1, f"{rule}: not in {home}: {found.get(rule)}"
        else:
            assert found.get(rule, []).count(home) == 1, f"{rule}: not written once in {home}: {found.get(rule)}"


def test_the_search_finds_a_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The search itself, on a planted copy of each kind: it must name the file."""
    pkg = tmp_path / "toolfork"
    (pkg / "commands").mkdir(parents=True)
    for rule, home in {**RULES, "classify": "executor/backends/fork/outcomes.py"}.items():
        target = pkg / home
        target.parent.mkdir(parents=True, exist_ok=True)
        body = {"classify": "def f(s, limits):\n    return rlimits.classify(s, limits)\n"}.get(
            rule, f"def {rule}():\n    pass\n")
        target.write_text(target.read_text() + body if target.exists() else body)
    (pkg / "executor" / "calls.py").write_text((pkg / "executor" / "calls.py").read_text()
                                               + "def g(r):\n    r.started_at = 0\n")
    (pkg / "commands" / "lane.py").write_text(
        "def _is_positive_finite(v):\n    return 0 < v\n"
        "def timeout(r, limits):\n    r.started_at = 1\n    return rlimits.classify(r, limits)\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    found = copies()
    assert found["positive_finite"] == ["commands/lane.py", "executor/calls.py"]
    assert found["started_at"] == ["commands/lane.py", "executor/calls.py"]
    assert found["classify"] == ["commands/lane.py", "executor/backends/fork/outcomes.py"]
    with pytest.raises(AssertionError, match=r"commands/lane\.py"):
        test_each_rule_of_a_call_is_written_once()


# ----------------------------------------------------------------------------- the rule's outcomes


@tool
def echo(text: str) -> str:
    """Echo.

    Args:
        text: what to say
    """
    return text


def test_effective_timeout_is_the_calls_then_the_tools_then_the_default() -> None:
    assert effective_timeout(1.0, 2.0, 3.0) == 1.0
    assert effective_timeout(None, 2.0, 3.0) == 2.0
    assert effective_timeout(None, None, 3.0) == 3.0
    assert effective_timeout(math.inf, 2.0, 3.0) is None
    assert effective_timeout(None, None, None) is None


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "5"])
def test_admit_refuses_a_timeout_that_is_no_positive_number_naming_the_call(bad: object) -> None:
    book = CallBook(None, {}, {}, lambda: ["echo"])
    result = book.admit(ToolCall("c1", "echo", {"text": "x"}, timeout=bad), echo)  # type: ignore[arg-type]
    assert not isinstance(result, type(None))
    assert getattr(result, "status", None) == "error"
    assert result.error is not None and result.error.type == "ValueError"  # type: ignore[union-attr]
    assert "'c1'" in result.error.message and "positive number" in result.error.message  # type: ignore[union-attr]
    book.finish(result)  # type: ignore[arg-type]
    assert book.counts == {("echo", "error"): 1}
    assert result.started_at is not None  # type: ignore[union-attr]


def test_admit_refuses_a_sandboxed_tool_where_calls_share_one_process() -> None:
    book = CallBook(None, {}, {}, lambda: ["echo"], one_process=lambda name: name == "echo")
    result = book.admit(ToolCall("c1", "echo", {"text": "x"}), echo)
    assert getattr(result, "status", None) == "error"
    assert result.error.type == "LimitsNotEnforceable" and "one process" in result.error.message  # type: ignore[union-attr]


def test_an_unknown_tools_call_is_counted_apart_even_if_a_tool_has_that_name_later() -> None:
    counts: dict[tuple[str, str], int] = {}
    book = CallBook(None, {}, counts, lambda: ["echo"])
    unknown = book.admit(ToolCall("c1", "nope", {}), None)
    assert unknown.error.type == "UnknownToolError" and "echo" in unknown.error.message  # type: ignore[union-attr]
    book.finish(unknown)  # type: ignore[arg-type]
    assert counts == {(UNKNOWN_TOOL, "error"): 1}


def test_run_and_the_line_lane_count_the_same() -> None:
    """One job through the lane and the same calls through ``Executor.run``: the same stats, and the
    same statuses line for line."""
    from toolfork.commands import _input
    from toolfork.commands._idset import IdSet
    from toolfork.commands._lane_job import LaneJob
    from toolfork.commands._output import OutFile
    from toolfork.commands._progress import Progress

    lines = [{"id": "a", "name": "echo", "arguments": {"text": "x"}},
             {"id": "b", "name": "nope", "arguments": {}},
             {"id": "c", "name": "echo", "arguments": {"text": 5}},  # not a string: a ToolInputError
             {"id": "d", "name": "echo", "arguments": {"text": "y"}, "timeout": 30}]  # read in the host
    with Executor([echo], mode="fork", workers=2) as ex:
        results = ex.run([ToolCall(**line) for line in lines])  # type: ignore[arg-type]
        by_run = dict(ex.stats().calls)
    assert by_run == {("echo", "ok"): 2, ("echo", "error"): 1, (UNKNOWN_TOOL, "error"): 1}
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    with Executor([echo], mode="fork", workers=2) as ex:
        assert LaneJob.fits(ex)
        out = OutFile(os.open(os.devnull, os.O_WRONLY), "<null>", close=True)
        written: list[bytes] = []
        out.write_line = lambda data, lines=1: written.append(data)  # type: ignore[method-assign]
        out.write = lambda record: (written.append(json.dumps(record).encode() + b"\n"), record)[1]  # type: ignore[method-assign]
        LaneJob(ex, _input.LineSource(io.BytesIO(data)), out, Progress(None, None, 1.0), IdSet(), 64).run()
        by_lane = dict(ex.stats().calls)
    assert by_lane == by_run
    records = {r["id"]: r for r in map(json.loads, b"".join(written).splitlines())}
    assert [records[k]["status"] for k in "abcd"] == [r.status for r in results] == ["ok", "error", "error", "ok"]


@pytest.mark.parametrize("mode", ["fork", "sequential"])
def test_every_mode_admits_and_finishes_by_the_one_rule(mode: str) -> None:
    """Mode parity: the rule is the Executor's, before any backend, so an unknown tool, a bad timeout and
    a good call come out the same, and are counted the same, in every mode."""
    calls = [ToolCall("a", "echo", {"text": "x"}), ToolCall("b", "nope", {}),
             ToolCall("c", "echo", {"text": "x"}, timeout=-1)]
    with Executor([echo], mode=mode, workers=2) as ex:
        results = ex.run(calls)
        stats = dict(ex.stats().calls)
    assert [r.status for r in results] == ["ok", "error", "error"]
    assert [r.error.type for r in results[1:]] == ["UnknownToolError", "ValueError"]  # type: ignore[union-attr]
    assert all(r.started_at is not None for r in results)
    assert stats == {("echo", "ok"): 1, ("echo", "error"): 1, (UNKNOWN_TOOL, "error"): 1}
