"""A user's own tools load as Python loads a script: the file's directory on ``sys.path``, and an import
error shown as the user's traceback (their file and line), for every command and option that imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import child_env

HELPERS = "def double(x):\n    return 2 * x\n"
TOOLS = '''from toolfork import tool
from helpers import double


@tool
def twice(x: int) -> int:
    """Twice x."""
    return double(x)
'''
DEEP = '''import os


def config():
    return os.environ["MY_CONFIG_THING"]


VALUE = config()
'''


def _toolfork(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = child_env()
    env.pop("MY_CONFIG_THING", None)
    return subprocess.run([sys.executable, "-m", "toolfork.cli", *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``proj/`` with tools.py importing helpers.py beside it, a calls file, and a module that fails deep."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "helpers.py").write_text(HELPERS)
    (proj / "tools.py").write_text(TOOLS)
    (proj / "deep.py").write_text(DEEP)
    (proj / "hooks.py").write_text("import deep\n\n\ndef reset():\n    pass\n")
    (proj / "calls.jsonl").write_text(json.dumps({"id": "a", "name": "twice", "arguments": {"x": 4}}) + "\n")
    return proj


@pytest.mark.parametrize("where", ["parent", "inside", "elsewhere"])
@pytest.mark.parametrize("explicit", [False, True])
def test_a_tools_file_imports_the_modules_beside_it(project: Path, tmp_path: Path, where: str,
                                                   explicit: bool) -> None:
    cwd = {"parent": tmp_path, "inside": project, "elsewhere": Path("/")}[where]
    calls = project / "calls.jsonl"
    args = ["run", str(calls), *(["--tools", str(project / "tools.py")] if explicit else [])]
    done = _toolfork(cwd, *args)
    assert done.returncode == 0, done.stderr
    [record] = [json.loads(line) for line in done.stdout.splitlines()]
    assert (record["status"], record["output"]["data"]) == ("ok", 8), record


def _assert_user_traceback(done: subprocess.CompletedProcess[str], spec: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    err = done.stderr
    assert f"'{spec}' failed to import:\nTraceback (most recent call last):" in err, err
    assert 'deep.py", line 8, in <module>' in err and "VALUE = config()" in err, err
    assert 'deep.py", line 5, in config' in err and 'return os.environ["MY_CONFIG_THING"]' in err, err
    assert err.rstrip().endswith("KeyError: 'MY_CONFIG_THING'"), err
    assert "importlib" not in err and "_loading.py" not in err and "specs.py" not in err, err  # the user's frames
    assert err.count("Traceback (most recent call last)") == 1, err  # one block


def test_an_import_error_shows_the_users_traceback_in_run(project: Path) -> None:
    _assert_user_traceback(_toolfork(project, "run", "calls.jsonl", "--tools", "deep.py"), "deep.py")


def test_an_import_error_of_a_dotted_module_shows_the_users_traceback(project: Path) -> None:
    _assert_user_traceback(_toolfork(project, "tools", "--tools", "deep"), "deep")


def test_an_import_error_in_a_hook_module_shows_the_users_traceback(project: Path) -> None:
    done = _toolfork(project, "run", "calls.jsonl", "--before-child", "hooks.py:reset")
    _assert_user_traceback(done, "hooks.py")
    assert 'hooks.py", line 1, in <module>' in done.stderr
    done = _toolfork(project, "worker", "--tools", "tools.py", "--after-child", "hooks.py:reset")
    _assert_user_traceback(done, "hooks.py")


def test_an_import_error_in_mcp_serve_tools_shows_the_users_traceback(project: Path) -> None:
    _assert_user_traceback(_toolfork(project, "mcp", "serve", "--tools", "deep.py"), "deep.py")


def test_a_syntax_error_points_at_the_line(project: Path) -> None:
    (project / "typo.py").write_text("x = 1\ndef f(:\n    pass\n")
    done = _toolfork(project, "tools", "--tools", "typo.py")
    assert done.returncode == 2
    assert 'typo.py", line 2' in done.stderr and "SyntaxError" in done.stderr, done.stderr
