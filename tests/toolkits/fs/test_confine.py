"""toolkits/fs/confine: links are resolved by the walk itself, inside the root only, whatever form
their target takes; every tool refuses what is not a regular file with a single link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolfork.toolkits.fs import readers, writers
from toolfork.toolkits.fs.confine import Root
from toolfork.toolkits.fs.errors import FileSystemError, PathRefused


@pytest.fixture
def root(tmp_path: Path) -> Root:
    base = tmp_path / "root"
    (base / "a" / "b").mkdir(parents=True)
    (base / "a" / "b" / "f.txt").write_text("deep\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    return Root(base.resolve(), base)


def _read(root: Root, path: str) -> str:
    opened = root.open_file(path)
    try:
        return os.pread(opened.fd, 100, 0).decode()
    finally:
        os.close(opened.fd)


def test_links_inside_the_root_in_every_form(root: Root) -> None:
    base = root.path
    (base / "rel").symlink_to("a/b/f.txt")
    (base / "a" / "up").symlink_to("../a/b/f.txt")  # '..' inside a target, staying inside
    (base / "abs").symlink_to(base / "a" / "b" / "f.txt")
    (base / "dirlink").symlink_to("a/b", target_is_directory=True)
    (base / "chain").symlink_to("rel")
    for path in ("rel", "a/up", "abs", "dirlink/f.txt", "chain"):
        assert _read(root, path) == "deep\n", path
    assert root.open_file("chain").rel == "a/b/f.txt"


def test_links_out_of_the_root_in_every_form(root: Root) -> None:
    base = root.path
    (base / "up2").symlink_to("../outside.txt")
    (base / "a" / "b" / "upup").symlink_to("../../../outside.txt")
    (base / "abs").symlink_to(base.parent / "outside.txt")
    (base / "sneaky").symlink_to(f"{base}/../outside.txt")  # an absolute target that climbs out
    for path in ("up2", "a/b/upup", "abs", "sneaky"):
        with pytest.raises(PathRefused, match="outside the root directory through a symbolic link"):
            root.open_file(path)


def test_a_link_loop_is_an_error_not_a_hang(root: Root) -> None:
    (root.path / "loop1").symlink_to("loop2")
    (root.path / "loop2").symlink_to("loop1")
    with pytest.raises(PathRefused, match="too many levels of symbolic links"):
        root.open_file("loop1")


def test_a_file_in_the_middle_of_a_path(root: Root) -> None:
    with pytest.raises(FileSystemError, match=r"'a/b/f\.txt' is a file, not a directory"):
        root.open_file("a/b/f.txt/more")


def test_writers_create_directories_only_inside(root: Root) -> None:
    (root.path / "out").symlink_to(root.path.parent, target_is_directory=True)
    refused = writers.write_file(root, "out/new/x.txt", "x", True, True)
    assert refused.is_error and "through a symbolic link" in refused.as_text()
    assert not (root.path.parent / "new").exists()
    made = writers.write_file(root, "n1/n2/x.txt", "x", True, True)
    assert made.as_text() == "created n1/n2/x.txt (1 bytes)" and (root.path / "n1" / "n2" / "x.txt").read_text() == "x"


def test_edit_keeps_bytes_it_does_not_touch_and_refuses_what_is_not_utf8(root: Root) -> None:
    (root.path / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    assert writers.edit_file(root, "crlf.txt", "two", "2", None).data["replaced"] == 1
    assert (root.path / "crlf.txt").read_bytes() == b"one\r\n2\r\n"
    (root.path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    message = writers.edit_file(root, "latin1.txt", "caf", "x", None).as_text()
    assert "is not UTF-8 text" in message and "it was not changed" in message
    assert (root.path / "latin1.txt").read_bytes() == b"caf\xe9\n"


def test_readers_are_plain_functions_of_a_root(root: Root) -> None:
    assert readers.read_file(root, "a/b/f.txt", 100, 0).as_text() == "deep\n"
    assert readers.glob_path(root, "**/*.txt", ".", 10).as_text() == "a/b/f.txt"
    assert readers.grep_file_content(root, "de+p", ".", False, None, 10).as_text() == "a/b/f.txt:1: deep"
    listing = readers.describe_directory_content(root, "a", True, 10).as_text()
    assert listing == "Contents of a (2 entries):\na/b/  [directory]\na/b/f.txt  [file, 5 B]"


def test_a_very_deep_tree_is_walked_to_a_bounded_depth(root: Root) -> None:
    from toolfork.toolkits.fs.confine import MAX_WALK_DEPTH

    # Deeper than a path string may be long: made one level at a time from descriptors.
    fd = os.open(root.path, os.O_RDONLY)
    try:
        for _ in range(MAX_WALK_DEPTH + 20):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("deepest.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as handle:
            handle.write("x")
    finally:
        os.close(fd)
    listing = readers.glob_path(root, "**/d", ".", 10_000).as_text().splitlines()
    assert len(listing) == MAX_WALK_DEPTH + 1  # the last level is listed, not entered
    assert readers.grep_file_content(root, "x", ".", False, None, 10).as_text().startswith("No match")
