"""The counts ``toolfork run`` ends with: its records by status (all five, zeros too) and by error type.

A job of a million calls needs one look to say what happened: how many ran, how many failed and
of what. The counts are of records written (one a non-blank input line), so they add up to the output's
length; after ``--resume`` there are two sets, this run's lines and the whole output file's.

    Job._write / Progress.note_ok ──> Tally.add(record) / Tally.add_ok(n) ──> Tally.describe() on stderr
    scan_previous (OUT's lines before a --resume) ──> Tally ──┘ (merged: the whole file)
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from toolfork.executor.types import STATUSES


class Tally:
    """Records counted by status and by error type."""

    __slots__ = ("error_output", "errors", "records", "statuses")

    def __init__(self) -> None:
        self.records = 0
        self.statuses: dict[str, int] = dict.fromkeys(STATUSES, 0)
        self.errors: Counter[str] = Counter()  # error.type -> records
        self.error_output = 0  # ok records whose tool returned an output marked as an error

    def add(self, record: dict[str, Any]) -> None:
        self.records += 1
        status = record.get("status")
        status = status if isinstance(status, str) else str(status)
        self.statuses[status] = self.statuses.get(status, 0) + 1
        error = record.get("error")
        if isinstance(error, dict):
            self.errors[str(error.get("type"))] += 1
        elif status == "ok":
            output = record.get("output")
            self.error_output += isinstance(output, dict) and bool(output.get("is_error"))

    def add_ok(self, count: int) -> None:
        """``count`` ok records without an error output (lines a worker encoded)."""
        self.records += count
        self.statuses["ok"] += count

    def merged(self, other: Tally) -> Tally:
        both = Tally()
        both.records = self.records + other.records
        for status in {*self.statuses, *other.statuses}:
            both.statuses[status] = self.statuses.get(status, 0) + other.statuses.get(status, 0)
        both.errors = self.errors + other.errors
        both.error_output = self.error_output + other.error_output
        return both

    def describe(self) -> str:
        """``ok 8, error 2, timeout 1, crashed 1, cancelled 0; error types: ToolInputError 1, ...``"""
        statuses = ", ".join(f"{status} {count}" for status, count in self.statuses.items())
        if self.error_output:
            statuses = statuses.replace(f"ok {self.statuses['ok']}",
                                        f"ok {self.statuses['ok']} ({self.error_output} with an error output)", 1)
        ranked = sorted(self.errors.items(), key=lambda item: (-item[1], item[0]))
        errors = ", ".join(f"{name} {count}" for name, count in ranked) or "none"
        return f"{statuses}; error types: {errors}"


__all__ = ["Tally"]
