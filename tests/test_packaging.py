"""What ``pip install toolfork`` gets: the sdist and the wheel built from a copy of this checkout (with
the junk a working tree collects added on purpose), checked file by file and in their metadata.

Built through hatchling's PEP 517 hooks, the same ones ``python -m build`` and ``pip wheel`` call,
in a subprocess whose working directory is the copy (a backend takes the project from there).
"""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from pathlib import Path

import pytest

import toolfork

REPO = Path(__file__).resolve().parents[1]
HOME = "https://github.com/toolfork/toolfork"

BUILD = """
import sys
import hatchling.build as backend
out = sys.argv[1]
print(backend.build_wheel(out))
print(backend.build_sdist(out))
"""

# What a working tree collects and a distribution must never carry.
JUNK = {
    ".git/HEAD": "ref: refs/heads/main\n",
    "toolfork/__pycache__/cli.cpython-311.pyc": "",
    "tests/cli/__pycache__/conftest.cpython-311.pyc": "",
    "results.jsonl": "{}\n",
    "examples/results.jsonl": "{}\n",
    "bench/results/tmp/cell.json": "{}\n",
    ".hypothesis/examples/x": "",
    ".pytest_cache/v/cache/lastfailed": "{}",
    "build/lib/toolfork/stale.py": "",
    "dist/old.whl": "",
}


def _project_files() -> list[str]:
    """The files of the checkout as git sees them (tracked, and new ones not ignored)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=REPO, capture_output=True, check=True, timeout=60).stdout.decode()
    return [p for p in listed.split("\0") if p and (REPO / p).is_file()]


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    copy = tmp_path_factory.mktemp("project")
    for rel in _project_files():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, copy / rel)
    for rel, text in JUNK.items():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_text(text)
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-c", BUILD, str(out)], cwd=copy, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    wheel_name, sdist_name = done.stdout.split()
    shutil.rmtree(copy)
    return out / wheel_name, out / sdist_name


def _metadata(text: str) -> Message:
    return email.message_from_string(text)


def _check_metadata(meta: Message) -> None:
    assert meta["Name"] == "toolfork"
    assert meta["Version"] == toolfork.__version__  # the one version: toolfork/__init__.py
    assert meta["Requires-Python"] == ">=3.10"
    assert meta["Author"] == "toolfork developers"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert urls["Homepage"] == HOME and urls["Source"] == HOME and urls["Issues"] == f"{HOME}/issues"
    classifiers = set(meta.get_all("Classifier"))
    assert {f"Programming Language :: Python :: 3.{minor}" for minor in (10, 11, 12, 13)} <= classifiers
    assert {"Operating System :: POSIX :: Linux", "Typing :: Typed",
            "License :: OSI Approved :: MIT License"} <= classifiers
    assert "pip install" in (meta.get_payload() or "")  # the README is the long description


def test_wheel_holds_the_package_and_nothing_else(dists: tuple[Path, Path]) -> None:
    wheel, _ = dists
    version = toolfork.__version__
    assert wheel.name == f"toolfork-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = f"toolfork-{version}.dist-info"
        meta = _metadata(zf.read(f"{info}/METADATA").decode())
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
    assert all(n.startswith(("toolfork/", f"{info}/")) for n in names), [
        n for n in names if not n.startswith(("toolfork/", f"{info}/"))]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or "stale" in n]
    for required in ("toolfork/py.typed", "toolfork/__init__.py", "toolfork/__main__.py", "toolfork/cli.py",
                     "toolfork/_extras.py", "toolfork/executor/__init__.py", "toolfork/commands/run.py"):
        assert required in names, required
    # Every module of the source package is shipped (a new subpackage is not forgotten).
    source = {p.relative_to(REPO).as_posix() for p in (REPO / "toolfork").rglob("*.py")
              if "__pycache__" not in p.parts}
    assert source <= set(names), source - set(names)
    assert "[console_scripts]\ntoolfork = toolfork.cli:main" in entry_points
    _check_metadata(meta)


def test_sdist_holds_the_project_and_no_junk(dists: tuple[Path, Path]) -> None:
    _, sdist = dists
    root = f"toolfork-{toolfork.__version__}"
    assert sdist.name == f"{root}.tar.gz"
    with tarfile.open(sdist) as tf:
        names = [n.removeprefix(f"{root}/") for n in tf.getnames()]
        pkg_info = tf.extractfile(f"{root}/PKG-INFO")
        assert pkg_info is not None
        meta = _metadata(pkg_info.read().decode())
    for required in ("README.md", "pyproject.toml", "PKG-INFO", "toolfork/__init__.py", "toolfork/py.typed",
                     "toolfork/cli.py", "tests/conftest.py", "docs/executor.md"):
        assert required in names, required
    junk = [n for n in names
            if n.startswith((".git/", ".hypothesis", ".pytest_cache", "build/", "dist/", "bench/results"))
            or "/.hypothesis" in n or "__pycache__" in n or n.endswith((".pyc", "results.jsonl"))]
    assert junk == []
    _check_metadata(meta)
