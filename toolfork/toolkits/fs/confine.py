"""Confinement to one root directory, without a window between the check and the use.

Resolving a path and then opening it leaves a gap in which another process can swap a directory or
a file for a symbolic link to ``/etc``. So the kernel never follows a link for us here: every path
is walked one component at a time, each opened relative to the directory descriptor already held
(``os.open(name, dir_fd=...)``) with ``O_NOFOLLOW``; a link met on the way is read with ``readlink``
and resolved by this module against the components walked so far, and a target outside the root is
refused. Whatever is swapped, and whenever, the worst outcome is an error or a different file
inside the root.

A file is judged on the descriptor that will be read or written (``fstat``), never on its name:
only regular files (a FIFO or a device would hang a reader or do worse) with a single link (a hard
link inside the tree to a file outside would otherwise be read and changed through the tree). Names
are looked at with ``lstat`` first so a FIFO or a device is refused before it is ever opened.

What cannot be proved from inside the tree, and is documented instead: a directory another process
moves out of the root while a call holds it open is still read (its contents came from the root);
a mount point inside the root is entered (only an administrator can mount); a hard-linked file whose
other names are removed between the open and the check passes the link count.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .errors import FileSystemError, PathRefused

__all__ = ["MAX_WALK_DEPTH", "Entry", "Opened", "Place", "Root", "check_file", "kind_of", "require_platform"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_MAX_LINKS = 40  # as the kernel's own limit on links in one lookup
_MAX_RETRIES = 100  # a name that keeps changing kind under us is given up on
MAX_WALK_DEPTH = 64  # walks list deeper directories but do not enter them (one descriptor per level)
# What an O_NOFOLLOW open of a name that became a link raises (FreeBSD says EMLINK, Linux ELOOP),
# or of a name that disappeared: the component is looked at again.
_SWAPPED = {errno.ELOOP, errno.EMLINK, errno.ENOENT}


def require_platform() -> None:
    """Refuse to build a toolkit on a platform without the calls that make confinement race-free."""
    needed = ("open", "stat", "readlink", "mkdir", "unlink")
    missing = [name for name in needed if getattr(os, name) not in os.supports_dir_fd]
    if missing or not _NOFOLLOW:
        raise RuntimeError(
            "FileSystemToolkit needs a POSIX platform with O_NOFOLLOW and dir_fd support for os."
            + ", os.".join(missing or ["open"])
        )


def kind_of(mode: int) -> str:
    """A file type in words, for error messages."""
    for test, word in (
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO (named pipe)"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISLNK, "symbolic link"),
    ):
        if test(mode):
            return word
    return "regular file" if stat.S_ISREG(mode) else "special file"


@dataclass
class Place:
    """Where a path leads: an entry ``name`` of a directory held open, or that directory itself.

    ``st`` is the entry's ``lstat`` (None when it does not exist); ``parts`` the components from the
    root to the entry (empty for the root).
    """

    dir_fd: int
    name: str
    parts: tuple[str, ...]
    st: os.stat_result | None

    @property
    def rel(self) -> str:
        return "/".join(self.parts) or "."


@dataclass
class Opened:
    """A regular file opened inside the root: its descriptor (the caller closes it) and ``fstat``."""

    fd: int
    st: os.stat_result
    rel: str


@dataclass
class Entry:
    """One name met by ``Root.walk``; ``dir_fd`` is valid until the walk moves on."""

    dir_fd: int
    name: str
    parts: tuple[str, ...]
    st: os.stat_result

    @property
    def rel(self) -> str:
        return "/".join(self.parts)


class Root:
    """The root directory and every way of reaching a file under it."""

    def __init__(self, path: Path, given: Path | None = None) -> None:
        self.path = path
        # Absolute paths (from the model or in link targets) may name the root as resolved or as given.
        self._prefixes = {PurePosixPath(path).parts}
        if given is not None and given.is_absolute():
            self._prefixes.add(PurePosixPath(os.path.normpath(given)).parts)

    # ------------------------------------------------------------ paths from the model

    def split(self, path: str) -> tuple[str, ...]:
        """The components of a model-supplied path below the root, or ``PathRefused`` saying why."""
        if not isinstance(path, str) or not path.strip():
            raise FileSystemError("path is empty: give a path relative to the root directory, e.g. '.'")
        if "\x00" in path:
            raise PathRefused(f"path {path!r} is refused: it contains a NUL byte")
        pure = PurePosixPath(path)
        if ".." in pure.parts:
            raise PathRefused(f"path {path!r} is refused: '..' is not allowed; give a path inside the root directory")
        if pure.is_absolute():
            inner = self._below(pure.parts)
            if inner is None:
                raise PathRefused(f"path {path!r} is refused: absolute paths must be inside the root directory")
            return inner
        return tuple(p for p in pure.parts if p not in ("", "."))

    def _below(self, parts: tuple[str, ...]) -> tuple[str, ...] | None:
        for prefix in self._prefixes:
            if parts[: len(prefix)] == prefix:
                return parts[len(prefix) :]
        return None

    # ------------------------------------------------------------ the walk

    @contextlib.contextmanager
    def place(self, path: str | tuple[str, ...], *, follow: bool = True, make_dirs: bool = False) -> Iterator[Place]:
        """Walk to ``path`` inside the root; the directories on the way stay open for the block.

        ``follow``: a link as the last component is followed (inside the root only). ``make_dirs``:
        missing directories on the way are created. A missing directory on the way raises
        ``FileSystemError``; a link leading out raises ``PathRefused``.
        """
        shown = _shown(path)
        pending = list(reversed(self.split(path) if isinstance(path, str) else path))
        fds = [os.open(self.path, _DIR_FLAGS)]
        names: list[str] = []
        links = retries = 0
        try:
            while pending:
                part = pending.pop()
                if part == "..":  # only from a link's target: the model's paths never hold '..'
                    if not names:
                        raise _escape(shown)
                    os.close(fds.pop())
                    names.pop()
                    continue
                last = not pending
                try:
                    st: os.stat_result | None = os.stat(part, dir_fd=fds[-1], follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                if st is None and last:
                    yield Place(fds[-1], part, (*names, part), None)
                    return
                if st is None and not make_dirs:
                    raise FileSystemError(f"directory {'/'.join((*names, part))!r} does not exist")
                if st is None:
                    retries += 1
                    if retries > _MAX_RETRIES:
                        raise FileSystemError(f"path {shown!r} keeps changing while it is opened")
                    with contextlib.suppress(FileExistsError):  # made meanwhile: look again
                        os.mkdir(part, dir_fd=fds[-1])
                    pending.append(part)
                    continue
                if stat.S_ISLNK(st.st_mode) and (follow or not last):
                    links += 1
                    if links > _MAX_LINKS:
                        raise PathRefused(f"path {shown!r} cannot be resolved: too many levels of symbolic links")
                    try:
                        target = os.readlink(part, dir_fd=fds[-1])
                    except OSError:  # no longer a link: look at it again
                        pending.append(part)
                        continue
                    target_parts = PurePosixPath(target).parts
                    if target.startswith("/"):
                        inner = self._below(target_parts)
                        if inner is None:
                            raise _escape(shown)
                        while len(fds) > 1:
                            os.close(fds.pop())
                        names.clear()
                        target_parts = inner
                    pending.extend(reversed([p for p in target_parts if p not in ("", ".")]))
                    continue
                if last:
                    yield Place(fds[-1], part, (*names, part), st)
                    return
                if not stat.S_ISDIR(st.st_mode):
                    raise FileSystemError(f"{'/'.join((*names, part))!r} is a {_article(st.st_mode)}, not a directory")
                try:
                    fd = os.open(part, _DIR_FLAGS, dir_fd=fds[-1])
                except OSError as exc:
                    if exc.errno == errno.ENOTDIR:
                        raise FileSystemError(f"{'/'.join((*names, part))!r} is not a directory") from None
                    if exc.errno not in _SWAPPED:
                        raise
                    retries += 1
                    if retries > _MAX_RETRIES:
                        raise FileSystemError(f"path {shown!r} keeps changing while it is opened") from None
                    pending.append(part)
                    continue
                fds.append(fd)
                names.append(part)
            yield Place(fds[-1], "", tuple(names), os.fstat(fds[-1]))
        finally:
            for fd in fds:
                os.close(fd)

    # ------------------------------------------------------------ opening what the walk found

    def open_file(self, path: str | tuple[str, ...], *, writable: bool = False) -> Opened:
        """An existing regular file with one link, opened for reading (or reading and writing)."""
        shown = _shown(path)
        for _ in range(_MAX_RETRIES):
            with self.place(path) as where:
                if where.st is None:
                    raise _missing(shown)
                check_file(shown, where.st)
                try:
                    fd = os.open(where.name, _open_flags(writable), dir_fd=where.dir_fd)
                except OSError as exc:
                    if exc.errno in _SWAPPED:
                        continue
                    raise
                return Opened(_checked(fd, shown), os.fstat(fd), where.rel)
        raise FileSystemError(f"path {shown!r} keeps changing while it is opened")

    def open_for_write(self, path: str, *, overwrite: bool, make_dirs: bool) -> tuple[Opened, bool]:
        """A file to write, created if missing (``O_EXCL``) or an existing one checked as ``open_file``
        does; also says whether it was created. Nothing is truncated here."""
        for _ in range(_MAX_RETRIES):
            with self.place(path, make_dirs=make_dirs) as where:
                if not where.name or (where.st is not None and stat.S_ISDIR(where.st.st_mode)):
                    raise FileSystemError(f"{path!r} is a directory; give a file path")
                if where.st is None:
                    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
                    try:
                        fd = os.open(where.name, flags, 0o666, dir_fd=where.dir_fd)
                    except FileExistsError:
                        continue
                    return Opened(fd, os.fstat(fd), where.rel), True
                if not overwrite:
                    raise FileSystemError(f"file {path!r} already exists and overwrite is false")
                check_file(path, where.st)
                try:
                    fd = os.open(where.name, os.O_WRONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, dir_fd=where.dir_fd)
                except OSError as exc:
                    if exc.errno in _SWAPPED:
                        continue
                    raise
                return Opened(_checked(fd, path), os.fstat(fd), where.rel), False
        raise FileSystemError(f"path {path!r} keeps changing while it is opened")

    def unlink(self, path: str) -> str:
        """Remove one name that is not a directory (a link is followed to its target inside the root)."""
        with self.place(path) as where:
            if where.st is None:
                raise _missing(path)
            if not where.name or stat.S_ISDIR(where.st.st_mode):
                raise FileSystemError(f"{path!r} is a directory, not a file")
            os.unlink(where.name, dir_fd=where.dir_fd)  # never follows a link: removes a name inside the root
            return where.rel

    def open_entry(self, entry: Entry) -> Opened | None:
        """A regular file met by ``walk`` (a link is followed inside the root), opened for reading;
        None when it is not one, leads outside, or changed meanwhile."""
        try:
            if stat.S_ISLNK(entry.st.st_mode):
                return self.open_file(entry.parts)
            check_file(entry.rel, entry.st)
            fd = os.open(entry.name, _READ_FLAGS, dir_fd=entry.dir_fd)
            return Opened(_checked(fd, entry.rel), os.fstat(fd), entry.rel)
        except (OSError, FileSystemError):
            return None

    def follow(self, entry: Entry) -> tuple[str, int | None] | None:
        """Where a link met by ``walk`` leads inside the root: its path and mode (None: nothing there
        yet); None when it leads outside or cannot be resolved."""
        try:
            with self.place(entry.parts) as where:
                return where.rel, None if where.st is None else where.st.st_mode
        except (OSError, FileSystemError):
            return None

    @contextlib.contextmanager
    def open_dir(self, path: str) -> Iterator[tuple[int, Place]]:
        """An existing directory, held open for the block."""
        with self.place(path) as where:
            if where.st is None:
                raise FileSystemError(f"directory {path!r} does not exist")
            if not where.name:
                yield where.dir_fd, where
                return
            if not stat.S_ISDIR(where.st.st_mode):
                raise FileSystemError(f"{path!r} is a {_article(where.st.st_mode)}, not a directory")
            fd = os.open(where.name, _DIR_FLAGS, dir_fd=where.dir_fd)
            try:
                yield fd, where
            finally:
                os.close(fd)

    def walk(
        self, dir_fd: int, parts: tuple[str, ...], *, recursive: bool = True, depth: int = 0
    ) -> Iterator[Entry]:
        """Every name under a directory held open, sorted, a directory's names before its subdirectories'.

        Subdirectories are entered by descriptor with ``O_NOFOLLOW``: a linked directory is listed,
        never entered, and a directory swapped for a link meanwhile is skipped. Directories more
        than ``MAX_WALK_DEPTH`` levels down are listed, not entered.
        """
        try:
            names = sorted(os.listdir(dir_fd))
        except OSError:
            return
        subdirs = []
        for name in names:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue
            entry = Entry(dir_fd, name, (*parts, name), st)
            yield entry
            if recursive and depth < MAX_WALK_DEPTH and stat.S_ISDIR(st.st_mode):
                subdirs.append(entry)
        for sub in subdirs:
            try:
                fd = os.open(sub.name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                continue
            try:
                yield from self.walk(fd, sub.parts, depth=depth + 1)
            finally:
                os.close(fd)


def check_file(path: str, st: os.stat_result) -> None:
    """Refuse what is not a regular file with a single link; says which and why."""
    if stat.S_ISDIR(st.st_mode):
        raise FileSystemError(f"{path!r} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise FileSystemError(
            f"{path!r} is a {kind_of(st.st_mode)}, not a regular file; only regular files are read or written"
        )
    if st.st_nlink > 1:
        raise PathRefused(
            f"path {path!r} is refused: the file has {st.st_nlink} hard links, so it may also be a file "
            "outside the root directory"
        )


def _checked(fd: int, path: str) -> int:
    """The descriptor, if what was opened is (still) a regular file with one link; else closed and refused."""
    try:
        check_file(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_flags(writable: bool) -> int:
    return (_READ_FLAGS & ~os.O_RDONLY) | os.O_RDWR if writable else _READ_FLAGS


def _shown(path: str | tuple[str, ...]) -> str:
    return path if isinstance(path, str) else "/".join(path) or "."


def _article(mode: int) -> str:
    return "file" if stat.S_ISREG(mode) else kind_of(mode)


def _missing(path: str) -> FileSystemError:
    return FileSystemError(f"file {path!r} does not exist (use glob_path or describe_directory_content)")


def _escape(path: str) -> PathRefused:
    return PathRefused(f"path {path!r} is refused: it leads outside the root directory through a symbolic link")
