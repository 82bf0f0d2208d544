"""FileSystem toolkit: read, search and (optionally) change files under one root directory.

Every path a model gives is checked before any file is opened: ``..`` components are refused
outright, absolute paths must lie inside the root, and the path is resolved (symlinks followed) and
must still lie inside the root, so a link planted in the tree cannot reach ``/etc``. Directory walks
(listing, grep, glob) never follow symlinked directories for the same reason. The checks do not
defend against another process swapping a directory for a symlink between the check and the open;
the root is meant to be a tree only the agent and its user write to.

Read tools and write tools are separate (``WRITE_TOOLS``) so a read-only agent can ``exclude`` them;
``bash`` exists only with ``allow_bash=True`` and always asks for approval.
"""

import codecs
import functools
import mimetypes
import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePath
from typing import Any, TypeVar

from toolfork.tools import Tool, Toolkit, ToolOutput, tool

__all__ = ["FileSystemToolkit", "PathRefused"]

_BINARY_SNIFF = 8192
_MAX_LINE_CHARS = 400
_HARD_MAX_BYTES = 10_000_000
_BASH_OUTPUT_CHARS = 50_000
_SAFE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")

F = TypeVar("F", bound=Callable[..., Any])


class FileSystemError(ValueError):
    """A problem the model can fix (missing file, bad pattern); becomes an error output."""


class PathRefused(FileSystemError):
    """A path that would leave the root directory."""


def _guard(fn: F) -> F:
    """Expected failures become error outputs; the model reads them and tries something else."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FileSystemError as exc:
            return ToolOutput.error(str(exc))
        except PermissionError as exc:
            return ToolOutput.error(f"permission denied: {exc.strerror or exc}")
        except IsADirectoryError:
            return ToolOutput.error("expected a file but the path is a directory")
        except OSError as exc:
            return ToolOutput.error(f"file system error: {exc.strerror or exc}")

    return wrapper  # type: ignore[return-value]


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _is_binary(head: bytes) -> bool:
    """NUL bytes, or mostly undecodable bytes; a Latin-1 text file with a few accents still counts as text."""
    if b"\x00" in head:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        decoded = head.decode("utf-8", errors="replace")
        return decoded.count("\ufffd") > max(8, len(decoded) // 10)
    return False


def _utf8_boundary(chunk: bytes) -> int:
    """Length of ``chunk`` without a trailing partial UTF-8 sequence, so a cut never splits a char."""
    end = len(chunk)
    for back in range(1, min(4, end) + 1):
        byte = chunk[end - back]
        if byte & 0xC0 != 0x80:  # a lead byte (or ASCII)
            need = 1 if byte < 0x80 else 2 if byte >> 5 == 0x6 else 3 if byte >> 4 == 0xE else 4
            return end if back >= need else end - back
    return end


def _human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob with ``**`` (any number of directories) to a regex over '/'-joined paths."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            close = pattern.find("]", i + 2)
            if close == -1:
                out.append(re.escape("["))
                i += 1
            else:
                body = pattern[i + 1 : close]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = close + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


class FileSystemToolkit(Toolkit):
    """Files under ``root`` (default: the current directory); ``bash`` only with ``allow_bash=True``.

    ``bash`` runs with a minimal environment (PATH, locale, TZ) so a command cannot print the API keys
    of the host's environment; pass ``bash_env`` to give it more.
    """

    name = "filesystem"
    WRITE_TOOLS: tuple[str, ...] = ("write_file", "edit_file", "delete_file")

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        allow_bash: bool = False,
        bash_timeout: float = 30.0,
        bash_env: Mapping[str, str] | None = None,
        max_read_bytes: int = 100_000,
    ) -> None:
        super().__init__()
        base = Path(root if root is not None else os.getcwd())
        try:
            resolved = base.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise ValueError(f"FileSystemToolkit root {str(base)!r} does not exist: {exc}") from None
        if not resolved.is_dir():
            raise ValueError(f"FileSystemToolkit root {str(base)!r} is not a directory")
        if bash_timeout <= 0:
            raise ValueError("bash_timeout must be positive")
        if not 1 <= max_read_bytes <= _HARD_MAX_BYTES:
            raise ValueError(f"max_read_bytes must be between 1 and {_HARD_MAX_BYTES}")
        self.root = resolved
        self.allow_bash = allow_bash
        self.bash_timeout = float(bash_timeout)
        self.bash_env = dict(bash_env) if bash_env is not None else None
        self.max_read_bytes = max_read_bytes

    def guidelines(self) -> str:
        text = (
            "File tools work inside one root directory; give paths relative to it (e.g. 'src/app.py'). "
            "'..' and paths outside the root are refused. Use preview_file or grep_file_content before "
            "reading large files; read_file truncates and tells you the offset to continue from."
        )
        if self.allow_bash:
            text += " The bash tool runs in the root directory and every command needs the user's approval."
        return text

    # ------------------------------------------------------------ path confinement

    def resolve(self, path: str) -> Path:
        """The real path for a model-supplied path, or ``PathRefused`` saying why not."""
        if not isinstance(path, str) or not path.strip():
            raise FileSystemError("path is empty: give a path relative to the root directory, e.g. '.'")
        if "\x00" in path:
            raise PathRefused(f"path {path!r} is refused: it contains a NUL byte")
        pure = PurePath(path)
        if ".." in pure.parts:
            raise PathRefused(f"path {path!r} is refused: '..' is not allowed; give a path inside the root directory")
        candidate = Path(path) if pure.is_absolute() else self.root / pure
        try:
            real = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # symlink loops
            raise PathRefused(f"path {path!r} cannot be resolved: {exc}") from None
        if not _within(real, self.root):
            if pure.is_absolute():
                raise PathRefused(f"path {path!r} is refused: absolute paths must be inside the root directory")
            raise PathRefused(f"path {path!r} is refused: it leads outside the root directory through a symbolic link")
        return real

    def relative(self, real: Path) -> str:
        rel = real.relative_to(self.root).as_posix()
        return rel or "."

    def _existing_file(self, path: str) -> Path:
        real = self.resolve(path)
        if not real.exists():
            raise FileSystemError(f"file {path!r} does not exist (use glob_path or describe_directory_content)")
        if real.is_dir():
            raise FileSystemError(f"{path!r} is a directory, not a file")
        return real

    def _existing_dir(self, path: str) -> Path:
        real = self.resolve(path)
        if not real.exists():
            raise FileSystemError(f"directory {path!r} does not exist")
        if not real.is_dir():
            raise FileSystemError(f"{path!r} is a file, not a directory")
        return real

    def walk(self, top: Path) -> Iterator[Path]:
        """Files under ``top`` in a stable order, never following symlinked directories out."""
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                full = Path(dirpath) / name
                if full.is_symlink():
                    try:
                        target = full.resolve()
                    except (OSError, RuntimeError):
                        continue
                    if not _within(target, self.root) or not target.is_file():
                        continue
                yield full

    # ------------------------------------------------------------ tools

    def provide(self) -> list[Tool]:
        tools = [*self._read_tools(), *self._write_tools()]
        if self.allow_bash:
            tools.append(self._bash_tool())
        return tools

    def _read_tools(self) -> list[Tool]:
        fs = self

        @tool
        @_guard
        def describe_directory_content(path: str = ".", recursive: bool = False, max_entries: int = 200) -> ToolOutput:
            """List the files and folders in a directory with their sizes.

            Args:
                path: directory relative to the root; '.' is the root itself
                recursive: also list the contents of subdirectories
                max_entries: stop after this many entries (1..5000)
            """
            _bounded("max_entries", max_entries, 1, 5000)
            top = fs._existing_dir(path)
            lines: list[str] = []
            truncated = False

            def entries() -> Iterator[Path]:
                if not recursive:
                    yield from sorted(top.iterdir(), key=lambda p: p.name)
                    return
                for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
                    dirnames.sort()
                    here = Path(dirpath)
                    for name in sorted(dirnames + filenames):
                        yield here / name

            for entry in entries():
                if len(lines) >= max_entries:
                    truncated = True
                    break
                rel = entry.relative_to(fs.root).as_posix()
                if entry.is_symlink():
                    try:
                        target = entry.resolve()
                        inside = _within(target, fs.root)
                    except (OSError, RuntimeError):
                        inside = False
                    note = f"-> {fs.relative(target)}" if inside else "-> (outside the root; not followed)"
                    lines.append(f"{rel}  [symlink {note}]")
                elif entry.is_dir():
                    lines.append(f"{rel}/  [directory]")
                else:
                    try:
                        size = entry.stat().st_size
                    except OSError:
                        size = 0
                    lines.append(f"{rel}  [file, {_human_size(size)}]")
            header = f"Contents of {fs.relative(top)} ({len(lines)} entries):"
            if not lines:
                header = f"{fs.relative(top)} is empty."
            text = "\n".join([header, *lines])
            if truncated:
                text += (
                    f"\n[truncated: showing the first {max_entries} entries; raise max_entries or list a subdirectory]"
                )
            return ToolOutput.text(text)

        @tool
        @_guard
        def read_file(path: str, max_bytes: int = fs.max_read_bytes, offset: int = 0) -> ToolOutput:
            """Read a text file; long files are cut at max_bytes with a note telling where to continue.

            Args:
                path: file relative to the root
                max_bytes: most bytes to return (1..10000000)
                offset: byte offset to start reading at, to continue a truncated read
            """
            _bounded("max_bytes", max_bytes, 1, _HARD_MAX_BYTES)
            _bounded("offset", offset, 0, None)
            real = fs._existing_file(path)
            size = real.stat().st_size
            with real.open("rb") as handle:
                head = handle.read(_BINARY_SNIFF)
                if _is_binary(head):
                    raise FileSystemError(
                        f"{path!r} is a binary file ({_human_size(size)}); use parse_file for PDF or HTML, "
                        "or preview_file for its type"
                    )
                if offset > size:
                    raise FileSystemError(f"offset {offset} is past the end of {path!r} ({size} bytes)")
                handle.seek(offset)
                chunk = handle.read(max_bytes)
            end = offset + len(chunk)
            if end < size:
                chunk = chunk[: _utf8_boundary(chunk)] or chunk
                end = offset + len(chunk)
            text = chunk.decode("utf-8", errors="replace")
            if end < size:
                text += (
                    f"\n\n[truncated: showed bytes {offset}..{end} of {size}; call read_file with "
                    f"offset={end} to read more]"
                )
            return ToolOutput.text(text)

        @tool
        @_guard
        def preview_file(path: str, lines: int = 20) -> ToolOutput:
            """Size, type and first lines of a file: a cheap look before reading it whole.

            Args:
                path: file relative to the root
                lines: how many lines to show (1..500)
            """
            _bounded("lines", lines, 1, 500)
            real = fs._existing_file(path)
            size = real.stat().st_size
            mime = mimetypes.guess_type(real.name)[0] or "unknown"
            with real.open("rb") as handle:
                head = handle.read(_BINARY_SNIFF)
            info: dict[str, Any] = {
                "path": fs.relative(real),
                "size_bytes": size,
                "size": _human_size(size),
                "type": mime,
                "binary": _is_binary(head),
            }
            if info["binary"]:
                info["preview"] = None
                info["note"] = "binary file: no text preview (parse_file extracts text from PDF)"
                return ToolOutput.from_value(info)
            shown: list[str] = []
            total = 0
            with real.open("r", encoding="utf-8", errors="replace", newline="") as text_handle:
                for line in text_handle:
                    total += 1
                    if len(shown) < lines:
                        shown.append(_clip(line.rstrip("\r\n")))
                    elif size > 50_000_000:
                        total = -1  # do not count lines of huge files
                        break
            info["line_count"] = total if total >= 0 else None
            info["preview"] = "\n".join(shown)
            return ToolOutput.from_value(info)

        @tool
        @_guard
        def grep_file_content(
            pattern: str,
            path: str = ".",
            ignore_case: bool = False,
            file_glob: str | None = None,
            max_matches: int = 100,
        ) -> ToolOutput:
            """Search files for a regular expression; prints 'path:line_number: line' for each match.

            Args:
                pattern: Python regular expression, e.g. 'def \\w+_tool'
                path: file or directory (searched recursively) relative to the root
                ignore_case: match case-insensitively
                file_glob: only search files whose path matches this glob, e.g. '**/*.py'
                max_matches: stop after this many matching lines (1..5000)
            """
            _bounded("max_matches", max_matches, 1, 5000)
            try:
                regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
            except re.error as exc:
                raise FileSystemError(f"invalid regular expression {pattern!r}: {exc}") from None
            real = fs.resolve(path)
            if not real.exists():
                raise FileSystemError(f"{path!r} does not exist")
            files: Iterator[Path] = iter([real]) if real.is_file() else fs.walk(real)
            matcher = glob_to_regex(file_glob) if file_glob else None
            hits: list[str] = []
            searched = 0
            truncated = False
            for file in files:
                rel = file.relative_to(fs.root).as_posix()
                if matcher and not matcher.match(rel):
                    continue
                try:
                    with file.open("rb") as handle:
                        if _is_binary(handle.read(_BINARY_SNIFF)):
                            continue
                    handle_text = file.open("r", encoding="utf-8", errors="replace", newline="")
                except OSError:
                    continue
                searched += 1
                with handle_text:
                    for number, line in enumerate(handle_text, start=1):
                        if regex.search(line):
                            if len(hits) >= max_matches:
                                truncated = True
                                break
                            hits.append(f"{rel}:{number}: {_clip(line.rstrip(chr(13) + chr(10)))}")
                if truncated:
                    break
            if not hits:
                return ToolOutput.text(f"No match for {pattern!r} in {searched} file(s).")
            text = "\n".join(hits)
            if truncated:
                text += f"\n[truncated: stopped at {max_matches} matches; narrow the pattern or path]"
            return ToolOutput.text(text)

        @tool
        @_guard
        def glob_path(pattern: str, path: str = ".", max_results: int = 500) -> ToolOutput:
            """Find files and directories whose path matches a glob ('*.py', '**/test_*.py', 'docs/*').

            Args:
                pattern: glob relative to path; '**' matches any number of directories
                path: directory to search from, relative to the root
                max_results: stop after this many paths (1..10000)
            """
            _bounded("max_results", max_results, 1, 10_000)
            if not pattern.strip():
                raise FileSystemError("pattern is empty: give a glob such as '**/*.py'")
            pure = PurePath(pattern)
            if pure.is_absolute() or ".." in pure.parts:
                raise PathRefused(f"pattern {pattern!r} is refused: it must be relative and must not contain '..'")
            top = fs._existing_dir(path)
            regex = glob_to_regex(pattern)
            found: list[str] = []
            truncated = False
            for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
                dirnames.sort()
                here = Path(dirpath)
                for name in sorted(dirnames + filenames):
                    full = here / name
                    if not regex.match(full.relative_to(top).as_posix()):
                        continue
                    if full.is_symlink():
                        try:
                            if not _within(full.resolve(), fs.root):
                                continue
                        except (OSError, RuntimeError):
                            continue
                    if len(found) >= max_results:
                        truncated = True
                        break
                    rel = full.relative_to(fs.root).as_posix()
                    found.append(rel + "/" if full.is_dir() and not full.is_symlink() else rel)
                if truncated:
                    break
            if not found:
                return ToolOutput.text(f"No path matches {pattern!r} under {fs.relative(top)}.")
            text = "\n".join(found)
            if truncated:
                text += f"\n[truncated: first {max_results} matches; narrow the pattern]"
            return ToolOutput.text(text)

        @tool
        @_guard
        def parse_file(path: str, max_chars: int = 100_000) -> ToolOutput:
            """Extract readable text from an HTML or PDF file (plain text files are returned as is).

            Args:
                path: file relative to the root
                max_chars: most characters of text to return (1..10000000)
            """
            _bounded("max_chars", max_chars, 1, _HARD_MAX_BYTES)
            real = fs._existing_file(path)
            with real.open("rb") as handle:
                head = handle.read(_BINARY_SNIFF)
            suffix = real.suffix.lower()
            if head.startswith(b"%PDF") or suffix == ".pdf":
                text = _pdf_text(real)
            elif suffix in (".html", ".htm", ".xhtml") or head.lstrip()[:15].lower().startswith(
                (b"<!doctype html", b"<html")
            ):
                text = _html_text(real.read_bytes())
            elif _is_binary(head):
                mime = mimetypes.guess_type(real.name)[0] or "unknown type"
                raise FileSystemError(
                    f"cannot extract text from {path!r} ({mime}): parse_file reads HTML, PDF and text"
                )
            else:
                text = real.read_text(encoding="utf-8", errors="replace")
            if len(text) > max_chars:
                total = len(text)
                text = text[:max_chars] + f"\n\n[truncated: showed {max_chars} of {total} characters]"
            return ToolOutput.text(text)

        return [describe_directory_content, read_file, preview_file, grep_file_content, glob_path, parse_file]

    def _write_tools(self) -> list[Tool]:
        fs = self

        @tool
        @_guard
        def write_file(path: str, content: str, overwrite: bool = True, create_dirs: bool = True) -> ToolOutput:
            """Create or replace a text file (UTF-8).

            Args:
                path: file relative to the root
                content: the full new content of the file
                overwrite: replace the file if it exists; when false an existing file is an error
                create_dirs: create missing parent directories
            """
            real = fs.resolve(path)
            if real.is_dir():
                raise FileSystemError(f"{path!r} is a directory; give a file path")
            existed = real.exists()
            if existed and not overwrite:
                raise FileSystemError(f"file {path!r} already exists and overwrite is false")
            if not real.parent.exists():
                if not create_dirs:
                    raise FileSystemError(f"directory {fs.relative(real.parent)!r} does not exist")
                real.parent.mkdir(parents=True, exist_ok=True)
            data = content.encode("utf-8")
            real.write_bytes(data)
            verb = "replaced" if existed else "created"
            return ToolOutput.text(f"{verb} {fs.relative(real)} ({len(data)} bytes)")

        @tool
        @_guard
        def edit_file(path: str, search: str, replace: str, count: int | None = None) -> ToolOutput:
            """Replace exact text in a file; reports how many occurrences were replaced.

            Args:
                path: file relative to the root
                search: exact text to find (not a regex); must occur at least once
                replace: text to put in its place
                count: replace only the first `count` occurrences; default all
            """
            if search == "":
                raise FileSystemError("search text is empty: give the exact text to replace")
            if count is not None:
                _bounded("count", count, 1, None)
            real = fs._existing_file(path)
            original = real.read_text(encoding="utf-8")
            found = original.count(search)
            if found == 0:
                raise FileSystemError(f"search text not found in {path!r}; read the file to copy the exact text")
            done = found if count is None else min(count, found)
            real.write_text(original.replace(search, replace, done), encoding="utf-8")
            return ToolOutput.from_value({"path": fs.relative(real), "occurrences": found, "replaced": done})

        @tool
        @_guard
        def delete_file(path: str) -> ToolOutput:
            """Delete one file (never a directory).

            Args:
                path: file relative to the root
            """
            real = fs._existing_file(path)
            real.unlink()
            return ToolOutput.text(f"deleted {fs.relative(real)}")

        return [write_file, edit_file, delete_file]

    def _bash_tool(self) -> Tool:
        fs = self

        def needs_approval(inputs: Mapping[str, Any]) -> str:
            return f"bash would run {inputs.get('command')!r} in {fs.root}"

        @tool(timeout=self.bash_timeout + 10, approval_policy=needs_approval)
        @_guard
        def bash(command: str, timeout: float | None = None) -> ToolOutput:
            """Run a shell command in the root directory (needs the user's approval each time).

            Args:
                command: the bash command line
                timeout: seconds before the command is killed; default and maximum the toolkit's limit
            """
            if not command.strip():
                raise FileSystemError("command is empty")
            limit = fs.bash_timeout if timeout is None else timeout
            if limit <= 0 or limit > fs.bash_timeout:
                raise FileSystemError(f"timeout must be between 0 and {fs.bash_timeout:g} seconds")
            return _run_bash(command, fs.root, limit, fs._bash_environment())

        return bash

    def _bash_environment(self) -> dict[str, str]:
        if self.bash_env is not None:
            return dict(self.bash_env)
        env = {key: os.environ[key] for key in _SAFE_ENV_KEYS if key in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env["HOME"] = str(self.root)
        return env


def _bounded(name: str, value: int, low: int, high: int | None) -> None:
    if value < low or (high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f">= {low}"
        raise FileSystemError(f"invalid {name} {value}: must be {span}")


def _clip(line: str) -> str:
    return line if len(line) <= _MAX_LINE_CHARS else line[:_MAX_LINE_CHARS] + " …[line cut]"


def _pdf_text(real: Path) -> str:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError:  # pragma: no cover - extra not installed
        raise FileSystemError("PDF support needs pypdf: pip install 'toolfork[files]'") from None
    try:
        reader = PdfReader(str(real))
        if reader.is_encrypted:
            raise FileSystemError(f"{real.name} is an encrypted PDF; its text cannot be extracted")
        pages = [page.extract_text() or "" for page in reader.pages]
    except PdfReadError as exc:
        raise FileSystemError(f"{real.name} is not a readable PDF: {exc}") from None
    if len(pages) == 1:
        return pages[0].strip()
    return "\n\n".join(f"--- page {i} ---\n{text.strip()}" for i, text in enumerate(pages, start=1))


def _html_text(data: bytes) -> str:
    try:
        from bs4 import BeautifulSoup
    except ImportError:  # pragma: no cover - extra not installed
        raise FileSystemError("HTML support needs beautifulsoup4: pip install 'toolfork[files]'") from None
    soup = BeautifulSoup(data, "html.parser")
    for node in soup(["script", "style", "noscript", "template"]):
        node.decompose()
    title = soup.title.get_text(strip=True) if soup.title else ""
    body = soup.body or soup
    lines = [line.strip() for line in body.get_text("\n").splitlines()]
    text = "\n".join(line for line in lines if line)
    return f"{title}\n\n{text}" if title and not text.startswith(title) else text


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill the shell and everything it started; they share the worker's process group, not their own."""
    try:
        import psutil

        parent = psutil.Process(proc.pid)
        victims = [*parent.children(recursive=True), parent]
        for victim in victims:
            try:
                victim.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
    except Exception:
        proc.kill()


def _run_bash(command: str, cwd: Path, limit: float, env: dict[str, str]) -> ToolOutput:
    # Not a new session: if the executor kills the worker's process group on its own timeout, the
    # command must die with it. Our own, shorter timeout kills the tree with psutil instead.
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    proc = subprocess.Popen(
        [shell, "-c", command],
        cwd=str(cwd),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        stdout, stderr = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        stdout, stderr = proc.communicate()
        return ToolOutput.error(
            f"command timed out after {limit:g} s and was killed\n{_format_streams(stdout, stderr)}"
        )
    finally:
        if proc.poll() is None:
            _kill_tree(proc)
            proc.wait()
    return ToolOutput.text(f"exit code: {proc.returncode}\n{_format_streams(stdout, stderr)}")


def _format_streams(stdout: bytes, stderr: bytes) -> str:
    parts = []
    for label, data in (("stdout", stdout), ("stderr", stderr)):
        text = data.decode("utf-8", errors="replace")
        if len(text) > _BASH_OUTPUT_CHARS:
            text = text[:_BASH_OUTPUT_CHARS] + f"\n[truncated: {len(data)} bytes in total]"
        parts.append(f"--- {label} ---\n{text}")
    return "\n".join(parts)
