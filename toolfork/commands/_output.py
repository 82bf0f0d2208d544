"""The output of ``run`` and ``worker``: result records written as whole lines, and, for ``--resume``,
what an earlier run already wrote.

The promise both rest on: no reader (a client of the co-process, ``tail -f``, a resumed job) ever sees
half a line from us. Each line goes out in one ``write`` with no buffer in between, and a job killed
in the middle of that write leaves a partial last line that ``--resume`` cuts off.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from toolfork.commands._idset import IdSet
from toolfork.commands._loading import UsageError


def result_failed(record: dict[str, Any]) -> bool:
    """A call failed when its status is not ok, or it is ok with an error output (the tool reported
    a failure the model could act on: for a batch job that is still a failure)."""
    if record.get("status") != "ok":
        return True
    output = record.get("output")
    return isinstance(output, dict) and bool(output.get("is_error"))


class OutFile:
    """Result lines, each written with one ``write`` of a complete line and flushed at once (no
    buffer), so a reader or a killed job never sees half a line written by us."""

    def __init__(self, fd: int | None, name: str, close: bool) -> None:
        self.fd = fd  # None: sys.stdout has no descriptor (redirected in-process), write through it
        self.name = name
        self._close = close

    @classmethod
    def open(cls, path: str, *, append: bool) -> OutFile:
        if path == "-":
            return cls._private_stdout()
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        try:
            return cls(os.open(path, flags, 0o666), path, close=True)
        except OSError as exc:
            raise UsageError(f"cannot write {path!r}: {exc.strerror}") from exc

    @classmethod
    def _private_stdout(cls) -> OutFile:
        """Keep stdout for our records alone: we write to a duplicate of it, and descriptor 1 (and
        ``sys.stdout``) now lead to stderr. A tool that prints, or a library that logs to stdout (Ray
        prints worker deaths there), cannot break a line of the JSONL stream. Open it before the
        executor forks its workers, so they inherit the redirection."""
        sys.stdout.flush()
        try:
            fd = sys.stdout.fileno()
            err = sys.stderr.fileno()
        except (AttributeError, OSError, ValueError):  # redirected in-process (tests): write through it
            return cls(None, "<stdout>", close=False)
        private = os.dup(fd)
        os.dup2(err, fd)
        sys.stdout = sys.stderr
        return cls(private, "<stdout>", close=True)

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        if self.fd is None:
            sys.stdout.write(line)
            sys.stdout.flush()
            return
        view = memoryview(line.encode("utf-8", "surrogatepass"))
        while view:
            view = view[os.write(self.fd, view):]

    def close(self) -> None:
        if self._close and self.fd is not None:
            os.close(self.fd)


def scan_previous(path: str) -> tuple[IdSet, int, int]:
    """For --resume: the ids of OUT's complete lines, how many there are and how many failed. A
    trailing partial line (the job was killed mid-write) is cut off so the appended lines start clean;
    a complete line that is not a JSON record is left alone and its call runs again."""
    done = IdSet()
    count = failed = 0
    keep = 0
    try:
        with open(path, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break
                keep += len(line)
                try:
                    record = json.loads(line)
                    call_id = record["id"]
                except (ValueError, KeyError, TypeError):
                    continue
                if done.add(str(call_id)):
                    count += 1
                    failed += result_failed(record)
        if os.path.getsize(path) > keep:
            os.truncate(path, keep)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise UsageError(f"--resume: cannot read {path!r}: {exc.strerror}") from exc
    return done, count, failed


__all__ = ["OutFile", "result_failed", "scan_previous"]
