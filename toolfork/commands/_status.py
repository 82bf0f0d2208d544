"""``toolfork run --status OUT.jsonl``: what a job's output holds, without running anything.

    OUT.jsonl ──> each complete line: Tally (by status and error type), OutcomeUnknown ids in order
    OUT.jsonl.journal ──> locked? (oslock.holder): the process writing the job now
                  └──> stdout: one line of counts, the unknown ids (JSON strings, one a line)

Read only: it takes no lock and changes nothing (a partial last line is not counted, not cut off).
The ids are printed as JSON strings, so an id's control characters cannot reach the terminal raw.
"""

from __future__ import annotations

import json
import os

from toolfork.commands._options import error
from toolfork.commands._summary import Tally
from toolfork.executor import oslock
from toolfork.executor.journal import OUTCOME_UNKNOWN


def show_status(path: str, journal: str) -> int:
    """Print OUT's counts and OutcomeUnknown ids; 0, or 2 when OUT cannot be read."""
    tally = Tally()
    unknown: list[str] = []
    try:
        with open(path, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break
                try:
                    record = json.loads(line)
                    call_id = str(record["id"])
                except (ValueError, KeyError, TypeError):
                    continue
                tally.add(record)
                error_info = record.get("error")
                if isinstance(error_info, dict) and error_info.get("type") == OUTCOME_UNKNOWN:
                    unknown.append(call_id)
    except OSError as exc:
        return error("run", f"--status: cannot read {path!r}: {exc.strerror}")
    print(f"{json.dumps(path)}: {tally.records} records: {tally.describe()}")
    writer = _writer(journal)
    if writer is not None:
        print(f"a job is writing it now (process {writer})")
    if unknown:
        print(f"{len(unknown)} OutcomeUnknown (resume with --rerun-unknown to run them again):")
        for call_id in unknown:
            print(json.dumps(call_id))
    return 0


def _writer(journal: str) -> int | None:
    try:
        fd = os.open(journal, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return oslock.holder(fd)
    finally:
        os.close(fd)


__all__ = ["show_status"]
