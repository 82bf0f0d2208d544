"""``--resume --rerun-unknown``: the calls whose records in OUT are ``OutcomeUnknown`` run again, and
their new records take the old ones' places, so OUT still holds every id once, in input order.

A job writes its records in input order, appending; the re-run calls' records come after OUT's end
(before the records of lines never run yet). So the run notes in its journal where OUT ended and a
hash of what it held (``begin_rerun``), and once the job stops, however it stops, ``settle_rerun``
moves each new record into the place of its call's ``OutcomeUnknown`` record::

    OUT: r1 … [u3: OutcomeUnknown] … rN │ r3' (run again) rN+1 … (appended by this run)
                                        ▲ the journal's mark: {"rerun_from": size, "sha256": …}
    settle: r1 … r3' … rN rN+1 …  ── written to OUT.rerun, synced, renamed over OUT ── mark cleared

Only records of calls started since the mark move (a duplicate-id record of a later line never
started: it stays where it is). A job killed before ``settle_rerun`` leaves the mark: the next
``--resume`` settles first. If it was killed after the rename but before the mark was cleared, OUT's
head no longer has the noted hash and nothing moves twice.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import deque
from collections.abc import Callable
from typing import Any

from toolfork.commands._loading import UsageError
from toolfork.executor.journal import OUTCOME_UNKNOWN, Journal

RERUN_SUFFIX = ".rerun"


def begin_rerun(out: str, journal: Journal) -> None:
    """Note where OUT ends now, before this run appends the records of the calls it runs again."""
    size, digest = _head(out, None)
    journal.mark({"rerun_from": size, "sha256": digest})


def settle_rerun(out: str, journal: Journal) -> bool:
    """Put the records of the calls run again since the mark in place of their ``OutcomeUnknown``
    ones; True when OUT changed. Clears the mark."""
    note = journal.marked
    if not isinstance(note, dict) or "rerun_from" not in note:
        return False
    started = journal.since_mark
    offset = int(note["rerun_from"])
    changed = False
    try:
        if _head(out, offset)[1] == note.get("sha256") and started is not None:
            changed = _move(out, offset, lambda call_id: call_id in started)
    except OSError as exc:
        raise UsageError(f"--rerun-unknown: cannot rewrite {out!r}: {exc.strerror}") from exc
    journal.mark(None)
    return changed


def _head(path: str, size: int | None) -> tuple[int, str]:
    """(size, sha256) of the file's first ``size`` bytes (all of it for None)."""
    digest = hashlib.sha256()
    total = 0
    with open(path, "rb") as f:
        while size is None or total < size:
            chunk = f.read(1 << 20 if size is None else min(1 << 20, size - total))
            if not chunk:
                break
            digest.update(chunk)
            total += len(chunk)
    return total, digest.hexdigest()


def _move(path: str, offset: int, ran_again: Callable[[str], bool]) -> bool:
    """Rewrite OUT with the moved records (streamed: what is held is one place per call run again)."""
    places: dict[str, deque[tuple[int, int]]] = {}  # id -> (start, length) of its new records after offset
    moved: set[int] = set()
    with open(path, "rb") as f:
        f.seek(offset)
        at = offset
        for line in f:
            if not line.endswith(b"\n"):
                break  # a partial last line: the writer died inside its write
            call_id = _id(line)
            if call_id is not None and ran_again(call_id):
                places.setdefault(call_id, deque()).append((at, len(line)))
            at += len(line)
        end = at
        if not places:
            return False
        temp = path + RERUN_SUFFIX
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            with open(fd, "wb", closefd=False) as w:
                f.seek(0)
                at = 0
                while at < offset:
                    line = f.readline()
                    if not line:
                        break
                    at += len(line)
                    waiting = places.get(_unknown_id(line) or "")
                    if waiting:
                        start, length = waiting.popleft()
                        moved.add(start)
                        w.write(os.pread(f.fileno(), length, start))
                    else:
                        w.write(line)
                f.seek(offset)
                at = offset
                while at < end:  # the records of lines this run was the first to run, in order
                    line = f.readline()
                    if not line:
                        break
                    if at not in moved:
                        w.write(line)
                    at += len(line)
            os.fsync(fd)
        finally:
            os.close(fd)
    if not moved:
        os.unlink(temp)
        return False
    os.replace(temp, path)
    return True


def _unknown_id(line: bytes) -> str | None:
    """The id of an ``OutcomeUnknown`` record, or None (a quick test first: most lines are not)."""
    if OUTCOME_UNKNOWN.encode() not in line:
        return None
    record = _record(line)
    if record is None:
        return None
    error = record.get("error")
    return str(record.get("id")) if isinstance(error, dict) and error.get("type") == OUTCOME_UNKNOWN else None


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _id(line: bytes) -> str | None:
    record = _record(line)
    return str(record["id"]) if record is not None and "id" in record else None


__all__ = ["RERUN_SUFFIX", "begin_rerun", "settle_rerun"]
