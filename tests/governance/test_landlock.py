"""Landlock: a forked child restricted to a directory reads only inside it and writes only under
write_paths; bad paths and threaded processes are refused naming why."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from toolfork.governance import landlock

from .forked import in_child


def _try(action: str, path: Path) -> str:
    try:
        if action == "read":
            path.read_text()
        elif action == "list":
            os.listdir(path)
        else:
            path.write_text("new")
        return "ok"
    except OSError as exc:
        return type(exc).__name__


def _tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    inside, out, outside = tmp_path / "inside", tmp_path / "inside" / "out", tmp_path / "outside"
    for d in (inside, out, outside):
        d.mkdir()
    (inside / "data.txt").write_text("in")
    (outside / "secret.txt").write_text("out")
    return inside, out, outside


def test_a_restricted_child_reads_only_inside_and_writes_only_under_write_paths(tmp_path: Path) -> None:
    inside, out, outside = _tree(tmp_path)

    def body() -> dict:
        landlock.restrict([str(inside)], [str(out)])
        return {
            "read inside": _try("read", inside / "data.txt"),
            "list inside": _try("list", inside),
            "read outside": _try("read", outside / "secret.txt"),
            "list outside": _try("list", outside),
            "write under write_paths": _try("write", out / "result.txt"),
            "write inside, not under write_paths": _try("write", inside / "new.txt"),
            "write outside": _try("write", outside / "new.txt"),
        }

    result = in_child(body)
    assert result.raised is None, result.raised
    assert result.value == {
        "read inside": "ok", "list inside": "ok", "read outside": "PermissionError",
        "list outside": "PermissionError", "write under write_paths": "ok",
        "write inside, not under write_paths": "PermissionError", "write outside": "PermissionError",
    }
    assert (out / "result.txt").read_text() == "new"
    assert not (inside / "new.txt").exists() and not (outside / "new.txt").exists()
    assert (outside / "secret.txt").read_text() == "out"  # the parent is not restricted


def test_write_paths_alone_leave_reading_free(tmp_path: Path) -> None:
    _, out, outside = _tree(tmp_path)

    def body() -> tuple[str, str, str]:
        landlock.restrict(None, [str(out)])
        return _try("read", outside / "secret.txt"), _try("write", outside / "x"), _try("write", out / "y")

    assert in_child(body).value == ("ok", "PermissionError", "ok")


def test_a_path_that_does_not_exist_is_refused_naming_the_setting(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    out = in_child(lambda: landlock.restrict([str(missing)], None))
    assert out.raised is not None
    assert out.raised.startswith("LandlockError") and f"read_paths: cannot open {str(missing)!r}" in out.raised


def test_a_process_running_threads_is_refused(tmp_path: Path) -> None:
    def body() -> None:
        stop = threading.Event()
        t = threading.Thread(target=stop.wait)
        t.start()
        try:
            landlock.restrict([str(tmp_path)], None)
        finally:
            stop.set()
            t.join()

    out = in_child(body)
    assert out.raised is not None and "threads" in out.raised and out.raised.startswith("LandlockError")


def test_probe_and_abi_version() -> None:
    assert landlock.abi_version() >= 1
    verdict = landlock.probe()
    assert verdict.ok, verdict.reason
