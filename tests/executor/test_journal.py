"""``Executor.run(calls, journal=Journal(path))``: a program that embeds the executor resumes a batch.

Run again with the same journal, a batch gives the recorded results of the calls that finished
without running them, ``OutcomeUnknown`` for those that started and never finished (unless the tool is
idempotent, or ``rerun_unknown``), and runs the rest; idempotency keys stay the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli import journal_tools as J
from toolfork.executor import OUTCOME_UNKNOWN, Executor, Journal, JournalError

TOOLS = J.TOOLS


def _calls(effects: Path, n: int = 4, name: str = "effect") -> list[dict[str, Any]]:
    return [{"id": f"e{i}", "name": name, "arguments": {"path": str(effects)}} for i in range(n)]


def _entries(path: Path) -> list[dict[str, Any]]:
    """The journal's entries, without the ``{"writer": PID}`` each open adds."""
    return [e for e in map(json.loads, path.read_text().splitlines()) if "writer" not in e]


def test_a_finished_batch_gives_its_recorded_results_without_running(
        tmp_path: Path, mode: str, make_executor: Callable[..., Executor]) -> None:
    effects, path = tmp_path / "effects.txt", tmp_path / "batch.journal"
    ex = make_executor(TOOLS, mode=mode)
    with Journal(path) as journal:
        first = ex.run(_calls(effects), journal=journal)
    assert [r.status for r in first] == ["ok"] * 4
    entries = _entries(path)
    assert sorted(e["started"] for e in entries if "started" in e) == ["e0", "e1", "e2", "e3"]
    assert sorted(e["finished"] for e in entries if "finished" in e) == ["e0", "e1", "e2", "e3"]
    with Journal(path) as journal:
        again = ex.run(_calls(effects), journal=journal)
    assert [r.to_dict() for r in again] == [r.to_dict() for r in first]
    assert sorted(effects.read_text().split()) == ["e0", "e1", "e2", "e3"]  # nothing ran twice
    assert _entries(path) == entries  # and nothing was written again


def _crashed(path: Path, keep_finished: set[str]) -> None:
    """The journal a batch killed while its calls ran leaves: starts, and only some results."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines
                            if '"finished"' not in line or json.loads(line)["finished"] in keep_finished))


def test_started_and_unfinished_calls_are_outcome_unknown(tmp_path: Path, mode: str,
                                                          make_executor: Callable[..., Executor]) -> None:
    effects, path = tmp_path / "effects.txt", tmp_path / "batch.journal"
    ex = make_executor(TOOLS, mode=mode)
    with Journal(path) as journal:
        ex.run(_calls(effects), journal=journal)
    _crashed(path, {"e0"})
    with Journal(path) as journal:
        results = ex.run([*_calls(effects), *_calls(effects, 6)[4:]], journal=journal)
    assert [r.status for r in results] == ["ok", "error", "error", "error", "ok", "ok"]
    assert {r.error.type for r in results[1:4] if r.error} == {OUTCOME_UNKNOWN}
    assert sorted(effects.read_text().split()) == ["e0", "e1", "e2", "e3", "e4", "e5"]
    with Journal(path) as journal:  # the verdict is recorded: asked again, the same answer
        assert [r.to_dict() for r in ex.run(_calls(effects), journal=journal)] == \
            [r.to_dict() for r in results[:4]]


def test_rerun_unknown_and_idempotent_tools_run_again(tmp_path: Path, make_executor: Callable[..., Executor]) -> None:
    effects, once, path = tmp_path / "effects.txt", tmp_path / "once.txt", tmp_path / "batch.journal"
    ex = make_executor(TOOLS)
    calls = [*_calls(effects, 2), *({**c, "id": f"o{i}"} for i, c in enumerate(_calls(once, 2, "effect_once")))]
    with Journal(path) as journal:
        first = ex.run(calls, journal=journal)
    _crashed(path, set())
    with Journal(path) as journal:
        results = ex.run(calls, journal=journal)
    assert [r.status for r in results] == ["error", "error", "ok", "ok"]  # the idempotent ones ran again
    assert [r.output for r in results[2:]] == [r.output for r in first[2:]]  # with the same keys
    assert len(once.read_text().split()) == 2
    _crashed(path, {"o0", "o1"})
    with Journal(path, rerun_unknown=True) as journal:
        assert [r.status for r in ex.run(calls, journal=journal)] == ["ok"] * 4
    assert sorted(effects.read_text().split()) == ["e0", "e0", "e1", "e1"]


def test_imap_resumes_too_and_keys_follow_the_journal(tmp_path: Path, make_executor: Callable[..., Executor]) -> None:
    path = tmp_path / "batch.journal"
    calls = [{"id": f"k{i}", "name": "key", "arguments": {"text": str(i)}} for i in range(5)]
    with Journal(path) as journal:
        keyed = [r.output.as_text() for r in make_executor(TOOLS).imap(calls, journal=journal) if r.output]
    _crashed(path, set())  # key is idempotent: it runs again, in another executor, with the same keys
    with Journal(path) as journal:
        assert [r.output.as_text() for r in make_executor(TOOLS).imap(calls, journal=journal) if r.output] == keyed
    bare = [[r.output.as_text() for r in make_executor(TOOLS).run(calls) if r.output] for _ in range(2)]
    assert len(set(keyed) | set(bare[0]) | set(bare[1])) == 15  # without a journal: a job per executor


def test_a_file_that_is_no_journal_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("dear diary\n")
    with pytest.raises(JournalError, match="is not a toolfork journal"):
        Journal(path)
    assert path.read_text() == "dear diary\n"


def test_a_durable_journal_writes_every_start_before_its_result(tmp_path: Path, mode: str,
                                                                 make_executor: Callable[..., Executor]) -> None:
    path = tmp_path / "batch.journal"
    calls = [{"id": f"d{i}", "name": "key", "arguments": {"text": str(i)}} for i in range(150)]
    with Journal(path, durable=True) as journal:
        results = list(make_executor(TOOLS, mode=mode).imap(calls, window=16, journal=journal))
    assert [r.call_id for r in results] == [c["id"] for c in calls]
    entries = _entries(path)
    started = [e["started"] for e in entries if "started" in e]
    assert sorted(started) == sorted(c["id"] for c in calls)
    # every start is written before its result
    position = {(k, e.get("started") or e.get("finished")): i for i, e in enumerate(entries) for k in e}
    assert all(position[("started", c["id"])] < position[("finished", c["id"])] for c in calls)
