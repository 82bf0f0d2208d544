"""``Executor.run(calls, journal=Journal(path))``: a program that embeds the executor resumes a batch.

Run again with the same journal, a batch gives the recorded results of the calls that finished
without running them, ``OutcomeUnknown`` for those that started and never finished (unless the tool is
idempotent, or ``rerun_unknown``), and runs the rest; idempotency keys stay the same.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli import journal_tools as J
from toolfork.executor import OUTCOME_UNKNOWN, Executor, Journal, JournalBusy, JournalError

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


# ------------------------------------------------------------------ one writer, damage, matching the call


def test_a_second_journal_on_the_file_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    path = tmp_path / "batch.journal"
    with Journal(path):
        with pytest.raises(JournalBusy, match=r"in use by process \d+: a job has one writer at a time") as busy:
            Journal(path)
        assert busy.value.pid == os.getpid()
    with Journal(path):  # closed: free again
        pass


HOLDER = """
import sys, time
from toolfork.executor import Executor, Journal
from tests.cli.journal_tools import TOOLS
journal = Journal(sys.argv[1])
with Executor(TOOLS, mode="fork", workers=2) as ex:
    ex.run([{"id": "w", "name": "key", "arguments": {"text": "warm"}}], journal=journal)
    print(" ".join(map(str, ex.backend.worker_pids)), flush=True)
    time.sleep(120)
"""


def test_the_lock_dies_with_its_process_not_with_its_workers(tmp_path: Path) -> None:
    path = tmp_path / "batch.journal"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[2])
    try:
        assert holder.stdout is not None
        workers = [int(p) for p in holder.stdout.readline().split()]
        assert workers
        with pytest.raises(JournalBusy) as busy:
            Journal(path)
        assert busy.value.pid == holder.pid
        for pid in workers:  # a forked worker closed the journal: it never keeps the lock alive
            assert str(path) not in {os.path.realpath(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        holder.kill()
        holder.wait()
        with Journal(path) as journal:  # at once, whether the workers have noticed yet or not
            assert journal.started(journal.key("w", "key", {"text": "warm"}))
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        _gone(workers if "workers" in locals() else [])


def _gone(pids: list[int]) -> None:
    """The SIGKILLed host's workers leave on their own (they notice their host is gone)."""
    end = time.monotonic() + 30
    for pid in pids:
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < end:
            time.sleep(0.02)
        if os.path.exists(f"/proc/{pid}"):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(("content", "where"), [
    ("5\n", "line 1"), ("null\n", "line 1"), ('["started"]\n', "line 1"),
    ('{"job": "k"}\n5\n', "line 2"), ('{"job": "k"}\nnull\n', "line 2"), ('{"job": "k"}\n["started"]\n', "line 2"),
    ('{"job": "k"}\n{"started": 5}\n', "line 2"), ('{"job": "k"}\n{"finished": "a", "result": 3}\n', "line 2"),
])
def test_a_damaged_journal_is_a_journal_error_naming_file_and_line(tmp_path: Path, content: str, where: str) -> None:
    path = tmp_path / "batch.journal"
    path.write_text(content)
    with pytest.raises(JournalError, match=where) as error:
        Journal(path, match="id")
    assert str(path) in str(error.value)
    assert path.read_text() == content  # left as it was


def test_a_fifo_in_the_journals_place_is_refused_without_hanging(tmp_path: Path) -> None:
    path = tmp_path / "batch.journal"
    os.mkfifo(path)
    with pytest.raises(JournalError, match=r"not a regular file \(a FIFO\)"):
        Journal(path)


ORDERS = [{"id": "call_0", "name": "key", "arguments": {"text": "place_order"}}]
CANCEL = [{"id": "call_0", "name": "key", "arguments": {"text": "cancel_order"}}]


def test_turns_that_reuse_call_ids_get_their_own_results(tmp_path: Path,
                                                         make_executor: Callable[..., Executor]) -> None:
    """One journal per task, across an agent's turns whose ids repeat: an entry answers only its call."""
    ex = make_executor(TOOLS)
    path = tmp_path / "task.journal"
    with Journal(path) as journal:
        turn1 = ex.run(ORDERS, journal=journal)[0]
        turn2 = ex.run(CANCEL, journal=journal)[0]
    assert turn1.output is not None and turn1.output.as_text().startswith("place_order:")
    assert turn2.output is not None and turn2.output.as_text().startswith("cancel_order:")
    with Journal(path) as journal:  # the task resumed: each turn answered by its own entry, nothing runs
        again = [ex.run(ORDERS, journal=journal)[0], ex.run(CANCEL, journal=journal)[0]]
    assert [r.to_dict() for r in again] == [turn1.to_dict(), turn2.to_dict()]


def test_a_callers_key_decides_what_is_the_same_call(tmp_path: Path, make_executor: Callable[..., Executor]) -> None:
    ex = make_executor(TOOLS)
    path = tmp_path / "task.journal"

    def by_text(call_id: str, name: str, arguments: Any) -> str:
        return f"{name}:{arguments['text']}"

    with Journal(path, match=by_text) as journal:
        first = ex.run(ORDERS, journal=journal)[0]
        renamed = ex.run([{**ORDERS[0], "id": "toolu_9"}], journal=journal)[0]  # another id, the same call
    assert renamed.call_id == "toolu_9" and renamed.output == first.output
    with pytest.raises(JournalError, match="matches calls by 'caller'"):
        Journal(path)


ODD_IDS = ["5", "line-3", "a\nb", "nul\x00id", '"}\n{"started": "x', '{"finished": "e0", "result": {}}', "é" * 50_000]


def test_look_alike_ids_are_entries_like_any_other(tmp_path: Path, make_executor: Callable[..., Executor]) -> None:
    """Ids with newlines, NUL, 100 kB, or that look like journal entries: each its own call, on resume too."""
    ex = make_executor(TOOLS)
    path = tmp_path / "batch.journal"
    calls = [{"id": i, "name": "key", "arguments": {"text": str(n)}} for n, i in enumerate(ODD_IDS)]
    with Journal(path) as journal:
        first = ex.run(calls, journal=journal)
    assert [r.status for r in first] == ["ok"] * len(ODD_IDS)
    with Journal(path) as journal:  # read back whole: no id broke a line or passed for another entry
        again = ex.run(calls, journal=journal)
    assert [r.to_dict() for r in again] == [r.to_dict() for r in first]
    with Journal(tmp_path / "by-id.journal", match="id") as journal:
        journal.start(ODD_IDS)
    with Journal(tmp_path / "by-id.journal", match="id") as journal:
        assert all(journal.started(i) for i in ODD_IDS) and not journal.started("x")


def test_calls_sharing_an_id_get_their_own_idempotency_keys_kept_on_resume(
        tmp_path: Path, make_executor: Callable[..., Executor]) -> None:
    """Turn 2's call_0 is another call than turn 1's: an API deduplicating on the key must not merge them."""
    ex = make_executor(TOOLS)
    path = tmp_path / "task.journal"
    turns = [[{"id": "call_0", "name": "key", "arguments": {"text": text}}] for text in ("tea", "coffee")]
    with Journal(path) as journal:
        keys = [ex.run(turn, journal=journal)[0].output.as_text().split(":")[1] for turn in turns]  # type: ignore[union-attr]
    assert keys[0] != keys[1]
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if '"finished"' not in line))  # killed before any result
    with Journal(path) as journal:  # key is idempotent: both run again, each with its own key again
        again = [ex.run(turn, journal=journal)[0].output.as_text().split(":")[1] for turn in turns]  # type: ignore[union-attr]
    assert again == keys
