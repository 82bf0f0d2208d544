"""The FileSystem toolkit's write tools, as plain functions of a ``Root``.

Like the readers they reach files only through ``Root``: a file is created with ``O_EXCL`` or
opened with ``O_NOFOLLOW`` in a directory held open, checked on its descriptor (a regular file with
one link, so a hard link to a file outside is never changed), and only then truncated or rewritten.
"""

from __future__ import annotations

import os

from toolfork.tools import ToolOutput

from .confine import Root
from .errors import FileSystemError, bounded, guard
from .reading import read_whole

__all__ = ["EDIT_MAX_BYTES", "delete_file", "edit_file", "write_file"]

EDIT_MAX_BYTES = 10_000_000  # edit_file rewrites files up to this size


def _write_all(fd: int, data: bytes) -> None:
    """``data`` at the start of the file, and the file cut to its length."""
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], done)
    os.ftruncate(fd, len(data))


@guard
def write_file(root: Root, path: str, content: str, overwrite: bool, create_dirs: bool) -> ToolOutput:
    data = content.encode("utf-8")
    opened, created = root.open_for_write(path, overwrite=overwrite, make_dirs=create_dirs)
    try:
        _write_all(opened.fd, data)
    finally:
        os.close(opened.fd)
    return ToolOutput.text(f"{'created' if created else 'replaced'} {opened.rel} ({len(data)} bytes)")


@guard
def edit_file(root: Root, path: str, search: str, replace: str, count: int | None) -> ToolOutput:
    if search == "":
        raise FileSystemError("search text is empty: give the exact text to replace")
    if count is not None:
        bounded("count", count, 1, None)
    opened = root.open_file(path, writable=True)
    try:
        raw = read_whole(opened.fd, opened.st.st_size, EDIT_MAX_BYTES, f"{path!r}")
        try:
            original = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FileSystemError(
                f"{path!r} is not UTF-8 text ({exc.reason} at byte {exc.start}); it was not changed"
            ) from None
        found = original.count(search)
        if found == 0:
            raise FileSystemError(f"search text not found in {path!r}; read the file to copy the exact text")
        done = found if count is None else min(count, found)
        _write_all(opened.fd, original.replace(search, replace, done).encode("utf-8"))
    finally:
        os.close(opened.fd)
    return ToolOutput.from_value({"path": opened.rel, "occurrences": found, "replaced": done})


@guard
def delete_file(root: Root, path: str) -> ToolOutput:
    return ToolOutput.text(f"deleted {root.unlink(path)}")
