"""``toolfork run --resume`` after SIGKILL at random moments: side effects at most once, never guessed.

A job of calls whose tools record each effect in a SQLite ledger (``ledger_tools``) is killed with
SIGKILL at random points and resumed until it finishes. Then: every id is in OUT exactly once; the
non-idempotent tool's effect happened at most once per id, and for every ``ok`` record; an id whose
effect is missing is ``OutcomeUnknown``; the idempotent tool's effect is there exactly once per id
(its idempotency key stayed the same across every resume). The kills land while calls run: each one
waits for OUT to grow by a random number of records, then a random moment more.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, child_env
from tests.cli.ledger_tools import LEDGER_ENV, create_ledger, read_ledger

TOOLS = str(REPO / "tests" / "cli" / "ledger_tools.py")
RECORD_BYTES = 150  # about, for a record of OUT


def _calls(path: Path, n: int, pad: int = 0) -> list[str]:
    ids = [f"c{i}" for i in range(n)]
    with open(path, "w") as f:
        for i, call_id in enumerate(ids):
            name = "charge" if i % 2 == 0 else "upsert"
            f.write(json.dumps({"id": call_id, "name": name, "arguments": {"n": i, "pad": pad}}) + "\n")
    return ids


def _wait_groups_gone(pgids: list[int], seconds: float = 15.0) -> None:
    """The killed hosts' workers leave on their own (the next run does not wait for them: what they
    still run was journaled); whatever is still there after ``seconds`` is killed, so no test leaves a
    process behind."""
    end = time.monotonic() + seconds
    for pgid in pgids:
        while time.monotonic() < end:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)
        else:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _run_once(cmd: list[str], env: dict[str, str], out: Path, rng: random.Random, *,
              kill: bool, stop_first: bool) -> tuple[int | None, int]:
    """One run: to its end (its exit status), or SIGKILLed at a random moment while calls run (None);
    and its process group."""
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if kill:
            size = out.stat().st_size if out.exists() else 0
            target = size + RECORD_BYTES * rng.randint(1, 150)
            end = time.monotonic() + 20
            while proc.poll() is None and time.monotonic() < end:
                if out.exists() and out.stat().st_size >= target:
                    break
                time.sleep(0.002)
            time.sleep(rng.uniform(0, 0.03))
            if proc.poll() is None:
                if stop_first:  # the workers go on and fill their result pipes while the host is stopped
                    proc.send_signal(signal.SIGSTOP)
                    time.sleep(rng.uniform(0.05, 0.2))
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return None, proc.pid
        _, err = proc.communicate(timeout=240)
        assert proc.returncode in (0, 1), err.decode(errors="replace")
        return proc.returncode, proc.pid
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def _kill_and_resume(tmp_path: Path, n: int, kills: int, extra: list[str], *, seed: int, pad: int = 0,
                     lane: bool = True, stop_first: bool = False, ledger: str | None = None
                     ) -> tuple[list[str], list[dict], Counter, Counter]:
    ids = _calls(tmp_path / "calls.jsonl", n, pad)
    ledger = ledger or str(tmp_path / "ledger.db")
    create_ledger(ledger)
    out = tmp_path / "out.jsonl"
    env = child_env()
    env[LEDGER_ENV] = ledger
    if not lane:
        env["TOOLFORK_LINE_LANE"] = "0"
    cmd = [sys.executable, "-m", "toolfork", "run", str(tmp_path / "calls.jsonl"), "--tools", TOOLS,
           "-o", str(out), "-q", "--resume", *extra]
    rng = random.Random(seed)
    killed = 0
    groups: list[int] = []
    try:
        for _ in range(kills):
            status, pgid = _run_once(cmd, env, out, rng, kill=True, stop_first=stop_first)
            groups.append(pgid)
            if status is not None:
                break  # it finished before the kill
            killed += 1
        assert killed >= kills // 2, f"only {killed} of {kills} runs were killed before the job finished"
        status, pgid = _run_once(cmd, env, out, rng, kill=False, stop_first=False)
        groups.append(pgid)
    finally:
        _wait_groups_gone(groups)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    return ids, records, Counter(read_ledger(ledger, "charges")), Counter(read_ledger(ledger, "applied"))


def _check(ids: list[str], records: list[dict], charges: Counter, applied: Counter) -> int:
    """The promises; returns how many calls ended OutcomeUnknown."""
    by_id = Counter(r["id"] for r in records)
    assert set(by_id) == set(ids), "an id is missing from OUT, or OUT holds one the input has not"
    assert max(by_id.values()) == 1, f"ids written twice: {[i for i, c in by_id.items() if c > 1][:5]}"
    assert [r["id"] for r in records] == ids, "OUT is not in input order"
    unknown = 0
    for r in records:
        call_id, error = r["id"], r["error"]
        if r["name"] == "charge":
            assert charges[call_id] <= 1, f"{call_id}: charged {charges[call_id]} times"
            if r["status"] == "ok":
                assert charges[call_id] == 1, f"{call_id}: ok, but its charge is not in the ledger"
            else:
                assert error["type"] == "OutcomeUnknown", f"{call_id}: {error}"
                assert "may or may not have happened" in error["message"]
                unknown += 1
        else:
            assert r["status"] == "ok", f"{call_id}: an idempotent call is run again, never reported: {error}"
            assert applied[call_id] == 1, f"{call_id}: applied under {applied[call_id]} keys"
    return unknown


@pytest.mark.timeout(600)  # well under a minute on an idle runner; a loaded machine starts Python slowly
def test_fifty_sigkills_across_ten_thousand_calls_never_repeat_an_effect(tmp_path: Path) -> None:
    ids, records, charges, applied = _kill_and_resume(tmp_path, 10_000, 50, ["--workers", "2"], seed=31)
    _check(ids, records, charges, applied)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("extra, lane, stop_first, pad", [
    (["--workers", "2"], False, False, 0),  # the general path (Executor.imap)
    (["--mode", "sequential"], False, False, 0),
    (["--workers", "2"], True, True, 4000),  # the host stopped while workers fill its result pipes
    (["--workers", "2", "--max-calls-per-worker", "3"], False, False, 0),  # workers being replaced
], ids=["general", "sequential", "pipes-full", "recycling"])
def test_sigkills_in_every_way_of_running(tmp_path: Path, extra: list[str], lane: bool, stop_first: bool,
                                          pad: int) -> None:
    ids, records, charges, applied = _kill_and_resume(tmp_path, 1500, 8, extra, seed=7, pad=pad, lane=lane,
                                                      stop_first=stop_first)
    _check(ids, records, charges, applied)


@pytest.mark.timeout(300)
def test_rerun_unknown_runs_them_again_by_the_users_choice(tmp_path: Path) -> None:
    """After kills, ``--rerun-unknown`` runs the uncertain calls again: every record is ok, and an
    effect may now be there twice, but only for a call that had started in a killed run."""
    ids, records, charges, applied = _kill_and_resume(tmp_path, 1500, 6, ["--workers", "2", "--rerun-unknown"],
                                                      seed=3)
    assert [r["id"] for r in records] == ids
    assert all(r["status"] == "ok" for r in records)
    assert all(charges[i] >= 1 for i in ids[::2])
    assert all(applied[i] == 1 for i in ids[1::2])

