"""FileSystem toolkit: read, search and (optionally) change files under one root directory.

This module only wires tools: what a model sees (names, docstrings, defaults). The work is in
``toolkits/fs``: ``confine`` reaches files race-free inside the root (no link is ever followed by
the kernel; only regular files with a single link are read or written), ``reading`` keeps every read
bounded, ``globbing`` matches globs in linear time, ``readers`` and ``writers`` are the tools' bodies
as plain functions, ``bash`` runs the opt-in shell.

Read tools and write tools are separate (``WRITE_TOOLS``) so a read-only agent can ``exclude`` them;
``bash`` exists only with ``allow_bash=True`` and always asks for approval.
"""

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolfork.tools import Tool, Toolkit, ToolOutput, tool

from .fs import readers, writers
from .fs.bash import bash_environment, run_bash
from .fs.confine import Root, require_platform
from .fs.errors import FileSystemError, PathRefused, guard

__all__ = ["FileSystemError", "FileSystemToolkit", "PathRefused"]


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
        require_platform()
        base = Path(root if root is not None else os.getcwd())
        try:
            resolved = base.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise ValueError(f"FileSystemToolkit root {str(base)!r} does not exist: {exc}") from None
        if not resolved.is_dir():
            raise ValueError(f"FileSystemToolkit root {str(base)!r} is not a directory")
        if bash_timeout <= 0:
            raise ValueError("bash_timeout must be positive")
        if not 1 <= max_read_bytes <= readers.HARD_MAX_BYTES:
            raise ValueError(f"max_read_bytes must be between 1 and {readers.HARD_MAX_BYTES}")
        self.root = resolved
        self.confined = Root(resolved, base.absolute())
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

    # ------------------------------------------------------------ tools

    def provide(self) -> list[Tool]:
        tools = [*self._read_tools(), *self._write_tools()]
        if self.allow_bash:
            tools.append(self._bash_tool())
        return tools

    def _read_tools(self) -> list[Tool]:
        root = self.confined

        @tool
        def describe_directory_content(path: str = ".", recursive: bool = False, max_entries: int = 200) -> ToolOutput:
            """List the files and folders in a directory with their sizes.

            Args:
                path: directory relative to the root; '.' is the root itself
                recursive: also list the contents of subdirectories
                max_entries: stop after this many entries (1..5000)
            """
            return readers.describe_directory_content(root, path, recursive, max_entries)

        @tool
        def read_file(path: str, max_bytes: int = self.max_read_bytes, offset: int = 0) -> ToolOutput:
            """Read a text file; long files are cut at max_bytes with a note telling where to continue.

            Args:
                path: file relative to the root
                max_bytes: most bytes to return (1..10000000)
                offset: byte offset to start reading at, to continue a truncated read
            """
            return readers.read_file(root, path, max_bytes, offset)

        @tool
        def preview_file(path: str, lines: int = 20) -> ToolOutput:
            """Size, type and first lines of a file: a cheap look before reading it whole.

            Args:
                path: file relative to the root
                lines: how many lines to show (1..500)
            """
            return readers.preview_file(root, path, lines)

        @tool
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
            return readers.grep_file_content(root, pattern, path, ignore_case, file_glob, max_matches)

        @tool
        def glob_path(pattern: str, path: str = ".", max_results: int = 500) -> ToolOutput:
            """Find files and directories whose path matches a glob ('*.py', '**/test_*.py', 'docs/*').

            Args:
                pattern: glob relative to path; '**' matches any number of directories
                path: directory to search from, relative to the root
                max_results: stop after this many paths (1..10000)
            """
            return readers.glob_path(root, pattern, path, max_results)

        @tool
        def parse_file(path: str, max_chars: int = 100_000) -> ToolOutput:
            """Extract readable text from an HTML or PDF file (plain text files are returned as is).

            Args:
                path: file relative to the root
                max_chars: most characters of text to return (1..10000000)
            """
            return readers.parse_file(root, path, max_chars)

        return [describe_directory_content, read_file, preview_file, grep_file_content, glob_path, parse_file]

    def _write_tools(self) -> list[Tool]:
        root = self.confined

        @tool
        def write_file(path: str, content: str, overwrite: bool = True, create_dirs: bool = True) -> ToolOutput:
            """Create or replace a text file (UTF-8).

            Args:
                path: file relative to the root
                content: the full new content of the file
                overwrite: replace the file if it exists; when false an existing file is an error
                create_dirs: create missing parent directories
            """
            return writers.write_file(root, path, content, overwrite, create_dirs)

        @tool
        def edit_file(path: str, search: str, replace: str, count: int | None = None) -> ToolOutput:
            """Replace exact text in a file; reports how many occurrences were replaced.

            Args:
                path: file relative to the root
                search: exact text to find (not a regex); must occur at least once
                replace: text to put in its place
                count: replace only the first `count` occurrences; default all
            """
            return writers.edit_file(root, path, search, replace, count)

        @tool
        def delete_file(path: str) -> ToolOutput:
            """Delete one file (never a directory).

            Args:
                path: file relative to the root
            """
            return writers.delete_file(root, path)

        return [write_file, edit_file, delete_file]

    def _bash_tool(self) -> Tool:
        fs = self

        def needs_approval(inputs: Mapping[str, Any]) -> str:
            return f"bash would run {inputs.get('command')!r} in {fs.root}"

        @tool(timeout=self.bash_timeout + 10, approval_policy=needs_approval)
        @guard
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
            return run_bash(command, fs.root, limit, bash_environment(fs.root, fs.bash_env))

        return bash
