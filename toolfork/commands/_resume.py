"""``ResumePoint``: which input lines ``toolfork run --resume`` skips, so the resumed output equals an
uninterrupted run's, bad-line records included.

A job writes one record per non-blank input line, in input order; so what an interrupted run left in
OUT is the records of the input's first N lines. Resume skips exactly those N lines (each line's id is
checked against the id of the record in its place) and treats every line after them as an
uninterrupted run would, duplicates included: a later line that repeats an id of the first N gets its
"duplicate id" record, not a skip. Skipping by id alone loses those records.

When OUT is not such a prefix (another input, an edited one, lines of OUT that are not records), the
first line that differs ends the prefix, and from there on a line is skipped when OUT holds its id.

With ``--rerun-unknown``, a line of the prefix whose record is ``OutcomeUnknown`` (``rerun`` holds those
places) is not skipped: it runs again, and ``_rerun`` puts its new record in place of the old one.
"""

from __future__ import annotations

from array import array

from toolfork.executor.idset import IdSet, id_hash


class ResumePoint:
    """Asked once per non-blank input line, in input order: is this line's record in OUT already?"""

    __slots__ = ("done", "order", "position", "rerun")

    def __init__(self, done: IdSet | None = None, order: array[int] | None = None,
                 rerun: set[int] | None = None) -> None:
        self.done = done if done is not None else IdSet()  # the ids of OUT's records
        self.order = order  # the hashes of those ids in OUT's order; None once the prefix is over
        self.position = 0
        self.rerun = rerun or set()  # places in OUT of OutcomeUnknown records to run again

    @property
    def in_prefix(self) -> bool:
        """Whether lines are still matched against OUT's records one by one."""
        return self.order is not None

    def written(self, call_id: str) -> bool:
        """Whether the next input line (whose id is ``call_id``) already has its record in OUT."""
        order = self.order
        if order is not None:
            k = self.position
            if k < len(order) and order[k] == id_hash(call_id):
                self.position = k + 1
                return k not in self.rerun if self.rerun else True
            self.order = None
            if k >= len(order):  # all of OUT is this input's first lines: the rest run as if never stopped
                self.done = IdSet()
                return False
        return bool(self.done) and call_id in self.done

    def holds(self, call_id: str) -> bool:
        """Whether OUT holds a record with this id, once past the prefix (a line read again, not a new one)."""
        return self.order is None and bool(self.done) and call_id in self.done


__all__ = ["ResumePoint"]
