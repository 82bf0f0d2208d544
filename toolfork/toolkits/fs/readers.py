"""The FileSystem toolkit's read tools, as plain functions of a ``Root`` (tests import them as they are).

Each one reaches files only through ``Root`` (race-free confinement, regular files with one link)
and reads them only through ``reading`` (bounded memory), and returns a ``ToolOutput``; expected
failures become error outputs (``guard``). The toolkit wraps them as tools with the model-facing
docstrings and defaults.
"""

from __future__ import annotations

import mimetypes
import os
import re
import stat
from pathlib import PurePosixPath
from typing import Any

from toolfork.tools import ToolOutput

from .confine import Root, kind_of
from .errors import FileSystemError, PathRefused, bounded, guard
from .globbing import Glob
from .parsing import html_text, pdf_text
from .reading import (
    BINARY_SNIFF,
    MAX_LINE_CHARS,
    clip,
    human_size,
    is_binary,
    lines_of,
    read_at,
    read_whole,
    utf8_boundary,
)

__all__ = [
    "COUNT_LINES_UP_TO",
    "HARD_MAX_BYTES",
    "PARSE_MAX_BYTES",
    "describe_directory_content",
    "glob_path",
    "grep_file_content",
    "parse_file",
    "preview_file",
    "read_file",
]

HARD_MAX_BYTES = 10_000_000  # the most any one read returns
COUNT_LINES_UP_TO = 50_000_000  # preview_file counts the lines of files up to this size
PARSE_MAX_BYTES = 50_000_000  # parse_file reads HTML and PDF files up to this size
_HTML_STARTS = (b"<!doctype html", b"<html")


def _text_of(line: bytes) -> str:
    """A line as shown: decoded, without its carriage return, at most a screen wide."""
    return clip(line[: MAX_LINE_CHARS * 4 + 4].decode("utf-8", errors="replace").rstrip("\r"))


@guard
def describe_directory_content(root: Root, path: str, recursive: bool, max_entries: int) -> ToolOutput:
    bounded("max_entries", max_entries, 1, 5000)
    lines: list[str] = []
    truncated = False
    with root.open_dir(path) as (fd, where):
        for entry in root.walk(fd, where.parts, recursive=recursive):
            if len(lines) >= max_entries:
                truncated = True
                break
            mode = entry.st.st_mode
            if stat.S_ISLNK(mode):
                target = root.follow(entry)
                note = "(outside the root; not followed)" if target is None else target[0]
                lines.append(f"{entry.rel}  [symlink -> {note}]")
            elif stat.S_ISDIR(mode):
                lines.append(f"{entry.rel}/  [directory]")
            elif stat.S_ISREG(mode):
                links = f", {entry.st.st_nlink} hard links: not readable here" if entry.st.st_nlink > 1 else ""
                lines.append(f"{entry.rel}  [file, {human_size(entry.st.st_size)}{links}]")
            else:
                lines.append(f"{entry.rel}  [{kind_of(mode)}: not readable here]")
    header = f"Contents of {where.rel} ({len(lines)} entries):" if lines else f"{where.rel} is empty."
    text = "\n".join([header, *lines])
    if truncated:
        text += f"\n[truncated: showing the first {max_entries} entries; raise max_entries or list a subdirectory]"
    return ToolOutput.text(text)


@guard
def read_file(root: Root, path: str, max_bytes: int, offset: int) -> ToolOutput:
    bounded("max_bytes", max_bytes, 1, HARD_MAX_BYTES)
    bounded("offset", offset, 0, None)
    opened = root.open_file(path)
    try:
        size = opened.st.st_size
        if is_binary(read_at(opened.fd, BINARY_SNIFF, 0)):
            raise FileSystemError(
                f"{path!r} is a binary file ({human_size(size)}); use parse_file for PDF or HTML, "
                "or preview_file for its type"
            )
        if offset > size:
            raise FileSystemError(f"offset {offset} is past the end of {path!r} ({size} bytes)")
        chunk = read_at(opened.fd, max_bytes, offset)
    finally:
        os.close(opened.fd)
    end = offset + len(chunk)
    if end < size:
        chunk = chunk[: utf8_boundary(chunk)] or chunk
        end = offset + len(chunk)
    text = chunk.decode("utf-8", errors="replace")
    if end < size:
        text += (
            f"\n\n[truncated: showed bytes {offset}..{end} of {size}; call read_file with "
            f"offset={end} to read more]"
        )
    return ToolOutput.text(text)


@guard
def preview_file(root: Root, path: str, lines: int) -> ToolOutput:
    bounded("lines", lines, 1, 500)
    opened = root.open_file(path)
    try:
        size = opened.st.st_size
        head = read_at(opened.fd, BINARY_SNIFF, 0)
        info: dict[str, Any] = {
            "path": opened.rel,
            "size_bytes": size,
            "size": human_size(size),
            "type": mimetypes.guess_type(opened.rel)[0] or "unknown",
            "binary": is_binary(head),
        }
        if info["binary"]:
            info["preview"] = None
            info["note"] = "binary file: no text preview (parse_file extracts text from PDF)"
            return ToolOutput.from_value(info)
        shown: list[str] = []
        total = 0
        for number, line in lines_of(opened.fd, COUNT_LINES_UP_TO):
            if number == total:
                continue  # another piece of a very long line
            total = number
            if len(shown) < lines:
                shown.append(_text_of(line))
            elif size > COUNT_LINES_UP_TO:
                break
    finally:
        os.close(opened.fd)
    info["line_count"] = total if size <= COUNT_LINES_UP_TO else None
    info["preview"] = "\n".join(shown)
    return ToolOutput.from_value(info)


@guard
def grep_file_content(
    root: Root, pattern: str, path: str, ignore_case: bool, file_glob: str | None, max_matches: int
) -> ToolOutput:
    bounded("max_matches", max_matches, 1, 5000)
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise FileSystemError(f"invalid regular expression {pattern!r}: {exc}") from None
    matcher = Glob(file_glob) if file_glob else None
    with root.place(path) as where:
        if where.st is None:
            raise FileSystemError(f"{path!r} does not exist")
        one_file = bool(where.name) and not stat.S_ISDIR(where.st.st_mode)
    hits: list[str] = []
    searched = skipped = 0
    truncated = False

    def search(fd: int, rel: str) -> bool:
        """Add the file's matching lines to ``hits``; False once ``max_matches`` is passed."""
        if is_binary(read_at(fd, BINARY_SNIFF, 0)):
            return True
        last = 0
        for number, line in lines_of(fd):
            if number == last or not regex.search(text := line.decode("utf-8", errors="replace").rstrip("\r")):
                continue
            if len(hits) >= max_matches:
                return False
            hits.append(f"{rel}:{number}: {clip(text)}")
            last = number
        return True

    if one_file:
        opened = root.open_file(path)
        try:
            searched = 1
            truncated = not search(opened.fd, opened.rel)
        finally:
            os.close(opened.fd)
    else:
        with root.open_dir(path) as (fd, top):
            for entry in root.walk(fd, top.parts):
                if stat.S_ISDIR(entry.st.st_mode) or (matcher and not matcher.match(entry.rel)):
                    continue
                found = root.open_entry(entry)
                if found is None:
                    skipped += not stat.S_ISLNK(entry.st.st_mode)
                    continue
                searched += 1
                try:
                    truncated = not search(found.fd, entry.rel)
                finally:
                    os.close(found.fd)
                if truncated:
                    break
    note = (
        f"\n[skipped {skipped} file(s) that are not regular files with a single link (FIFOs, devices, "
        "hard links)]"
        if skipped
        else ""
    )
    if not hits:
        return ToolOutput.text(f"No match for {pattern!r} in {searched} file(s).{note}")
    text = "\n".join(hits)
    if truncated:
        text += f"\n[truncated: stopped at {max_matches} matches; narrow the pattern or path]"
    return ToolOutput.text(text + note)


@guard
def glob_path(root: Root, pattern: str, path: str, max_results: int) -> ToolOutput:
    bounded("max_results", max_results, 1, 10_000)
    if not pattern.strip():
        raise FileSystemError("pattern is empty: give a glob such as '**/*.py'")
    pure = PurePosixPath(pattern)
    if pure.is_absolute() or ".." in pure.parts:
        raise PathRefused(f"pattern {pattern!r} is refused: it must be relative and must not contain '..'")
    glob = Glob(pattern)
    found: list[str] = []
    truncated = False
    with root.open_dir(path) as (fd, top):
        for entry in root.walk(fd, top.parts):
            if not glob.match("/".join(entry.parts[len(top.parts) :])):
                continue
            if stat.S_ISLNK(entry.st.st_mode) and root.follow(entry) is None:
                continue
            if len(found) >= max_results:
                truncated = True
                break
            found.append(entry.rel + "/" if stat.S_ISDIR(entry.st.st_mode) else entry.rel)
    if not found:
        return ToolOutput.text(f"No path matches {pattern!r} under {top.rel}.")
    text = "\n".join(found)
    if truncated:
        text += f"\n[truncated: first {max_results} matches; narrow the pattern]"
    return ToolOutput.text(text)


@guard
def parse_file(root: Root, path: str, max_chars: int) -> ToolOutput:
    bounded("max_chars", max_chars, 1, HARD_MAX_BYTES)
    opened = root.open_file(path)
    name = PurePosixPath(opened.rel).name
    suffix = PurePosixPath(opened.rel).suffix.lower()
    try:
        size = opened.st.st_size
        head = read_at(opened.fd, BINARY_SNIFF, 0)
        whole = True
        if head.startswith(b"%PDF") or suffix == ".pdf":
            text = pdf_text(read_whole(opened.fd, size, PARSE_MAX_BYTES, f"{path!r}"), name)
        elif suffix in (".html", ".htm", ".xhtml") or head.lstrip()[:15].lower().startswith(_HTML_STARTS):
            text = html_text(read_whole(opened.fd, size, PARSE_MAX_BYTES, f"{path!r}"))
        elif is_binary(head):
            mime = mimetypes.guess_type(name)[0] or "unknown type"
            raise FileSystemError(f"cannot extract text from {path!r} ({mime}): parse_file reads HTML, PDF and text")
        else:
            data = read_at(opened.fd, max_chars * 4 + 4, 0)  # enough bytes for max_chars characters
            whole = len(data) >= size
            text = data.decode("utf-8", errors="replace")
    finally:
        os.close(opened.fd)
    if len(text) > max_chars:
        of = f"{len(text)} characters" if whole else f"the characters of a {human_size(size)} file"
        text = text[:max_chars] + f"\n\n[truncated: showed {max_chars} of {of}]"
    return ToolOutput.text(text)
