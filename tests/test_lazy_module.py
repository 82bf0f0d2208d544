"""``tests.lazy.lazy_module``: collecting a test module that binds an SDK lazily does not import the SDK (with
pytest's own collection, which reads attributes of every global), and a test's first real use does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.lazy import lazy_module

ROOT = Path(__file__).resolve().parent.parent

PROBE = "VALUE = 42\n"
TEST_MODULE = '''
from tests.lazy import lazy_module

sdk = lazy_module("lazyprobe_sdk")


def test_uses_it() -> None:
    assert sdk.VALUE == 42
'''
CONFTEST = '''
import sys


def pytest_collection_finish(session):
    with open("collected.txt", "w") as f:
        f.write(str("lazyprobe_sdk" in sys.modules))
'''


def test_pytest_collection_leaves_the_module_unimported_and_the_test_imports_it(tmp_path: Path) -> None:
    (tmp_path / "lazyprobe_sdk.py").write_text(PROBE)
    (tmp_path / "test_probe.py").write_text(TEST_MODULE)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    env_path = f"{tmp_path}:{ROOT}"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "test_probe.py"],
        cwd=tmp_path, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "collected.txt").read_text() == "False"  # collection read its globals, did not import
    assert "1 passed" in run.stdout


def test_a_probe_for_a_private_name_is_refused_and_a_public_name_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "lazyprobe_other.py").write_text(PROBE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazyprobe_other", raising=False)
    sdk = lazy_module("lazyprobe_other")
    assert getattr(sdk, "_mock_name", None) is None and not hasattr(sdk, "__wrapped__")
    assert "lazyprobe_other" not in sys.modules
    assert sdk.VALUE == 42
    assert "lazyprobe_other" in sys.modules


def test_a_module_that_is_not_installed_fails_at_once() -> None:
    with pytest.raises(ModuleNotFoundError, match="no_such_sdk_anywhere"):
        lazy_module("no_such_sdk_anywhere")
