"""PythonInterpreter: a cell runner in a session per episode, on real forked session processes.

What a cell shows (output, value, traceback, images, files), state between cells and between episodes,
the rollback after a timeout, a crash or running out of memory, and the sandbox by default. Every
interpreter here is sandboxed (the default) but where a test says otherwise."""

from __future__ import annotations

import base64
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolfork.agent.providers import anthropic as anthropic_wire
from toolfork.agent.providers import openai as openai_wire
from toolfork.executor import Executor, ToolCall
from toolfork.toolkits import InterpreterSession, PythonInterpreter

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def plain() -> Iterator[tuple[PythonInterpreter, Executor]]:
    interp = PythonInterpreter(timeout=10)
    with Executor(interp, workers=1) as ex:
        yield interp, ex


@pytest.fixture
def cells(plain: tuple[PythonInterpreter, Executor]) -> Iterator[InterpreterSession]:
    interp, ex = plain
    with interp.open(ex) as s:
        yield s


def text(result: object) -> str:
    return result.output.content[0].text  # type: ignore[attr-defined,no-any-return]


def test_state_persists_and_a_cell_shows_output_value_and_traceback(cells: InterpreterSession) -> None:
    first = cells.run_cell("import math\nx = 41\nprint('hello')\nimport sys; print('warn', file=sys.stderr)\nx + 1")
    assert first.status == "ok" and not first.output.is_error
    assert first.output.data["stdout"] == "hello\n" and first.output.data["stderr"] == "warn\n"
    assert first.output.data["value"] == "42"
    assert "[stdout]\nhello" in text(first) and "[value]\n42" in text(first)
    second = cells.run_cell("def f(y):\n    return y / (x - 41)\nmath.floor(x / 2)")
    assert second.output.data["value"] == "20"
    failed = cells.run_cell("f(1)")
    assert failed.output.is_error
    tb = failed.output.data["error"]["traceback"]
    assert "ZeroDivisionError" in tb and "return y / (x - 41)" in tb and "<cell 2>" in tb
    assert "interpreter_kernel" not in tb  # the kernel's own frames are not the cell's
    assert "SyntaxError" in cells.run_cell("def g(:").output.data["error"]["traceback"]
    assert cells.run_cell("input('name? ')").output.data["error"]["type"] == "EOFError"  # nobody is at a keyboard
    assert cells.run_cell("x").output.data["value"] == "41"  # an exception is not a fault: the state goes on


def test_episodes_never_see_each_other(plain: tuple[PythonInterpreter, Executor]) -> None:
    interp, ex = plain
    with interp.open(ex) as a, interp.open(ex) as b:
        a.run_cell("secret = 'a'\nopen('mine.txt', 'w').write('a')")
        seen = b.run_cell("print('secret' in globals(), __import__('os').listdir('.'))")
        assert seen.output.data["stdout"] == "False []\n"
        assert a.workspace != b.workspace and os.listdir(a.workspace) == ["mine.txt"]
    assert not os.path.exists(a.workspace)  # a workspace the interpreter made goes with its session


def test_output_is_bounded_and_the_cut_is_said(plain: tuple[PythonInterpreter, Executor]) -> None:
    _, ex = plain
    with PythonInterpreter(max_output_chars=100).open(ex) as s:
        r = s.run_cell("print('a' * 5000)\n'b' * 5000")
    assert r.output.data["stdout"].startswith("a" * 100)
    assert "[... 4901 more characters not shown]" in r.output.data["stdout"]
    assert "[... 4902 more characters not shown]" in r.output.data["value"]


def test_images_come_back_as_image_blocks_for_anthropic_and_openai(cells: InterpreterSession) -> None:
    r = cells.run_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\n"
                       "from PIL import Image\nImage.new('RGB', (8, 8), (255, 0, 0))")
    images = [b for b in r.output.content if b.type == "image"]
    assert len(images) == 2 and all(base64.b64decode(b.data).startswith(PNG) for b in images)
    assert r.output.data["value"] is None  # an image is shown, not its repr
    block = anthropic_wire.tool_result_block(r)
    assert [c["type"] for c in block["content"]] == ["text", "image", "image"]
    assert block["content"][1]["source"]["media_type"] == "image/png"
    assert openai_wire.responses_part(images[0])["image_url"].startswith("data:image/png;base64,")
    assert cells.run_cell("1").output.content[1:] == []  # a figure is shown once, then closed


def test_files_the_cell_writes_are_listed(cells: InterpreterSession) -> None:
    cells.run_cell("open('old.txt', 'w').write('x')")
    r = cells.run_cell("import os\nos.makedirs('out', exist_ok=True)\nopen('out/data.csv', 'w').write('a,b\\n')")
    assert r.output.data["files"] == [{"path": "out/data.csv", "size": 4}]
    assert "out/data.csv (4 bytes)" in text(r)
    assert os.path.exists(os.path.join(cells.workspace, "out", "data.csv"))


@pytest.mark.parametrize("fault, what, status, sandbox", [
    ("while True:\n    pass", "timed out", "timeout", True),
    ("import os\nos._exit(3)", "crashed", "crashed", True),
    ("b = bytearray(2 * 1024 ** 3)", "ran out of memory", "error", True),  # memory_mb=256: a real limit
    ("while True:\n    pass", "timed out", "timeout", False),
    ("import os\nos._exit(3)", "crashed", "crashed", False),
])
def test_a_failed_cell_is_rolled_back_and_the_model_is_told(plain: tuple[PythonInterpreter, Executor],
                                                            fault: str, what: str, status: str, sandbox: bool) -> None:
    _, ex = plain
    memory = 256 if "bytearray" in fault else None
    with PythonInterpreter(sandbox=sandbox, timeout=1, memory_mb=memory).open(ex) as s:
        s.run_cell("x = 1\nimport json")
        r = s.run_cell(f"x = 2\nopen('during.txt', 'w').write('kept')\n{fault}")
        assert r.status == status
        assert f"the cell {what}" in r.error.message and "rolled back to its state before this cell" in r.error.message
        assert s.restores == 1
        after = s.run_cell("json.dumps(x)")  # the import and the variable from before the cell
        assert after.status == "ok" and after.output.data["value"] == "'1'"
        assert os.path.exists(os.path.join(s.workspace, "during.txt"))  # the workspace is not rolled back


def test_the_timeout_is_per_cell(cells: InterpreterSession) -> None:
    start = time.monotonic()
    r = cells.run_cell("import time\ntime.sleep(30)", timeout=0.5)
    assert r.status == "timeout" and time.monotonic() - start < 10
    assert cells.run_cell("import time\ntime.sleep(0.6)\n'slept'").output.data["value"] == "'slept'"


def test_the_tool_outside_a_session_says_how_to_use_it() -> None:
    with Executor(PythonInterpreter(sandbox=False), workers=1) as ex:
        r = ex.run([ToolCall("c1", "python", {"code": "1"})])[0]
    assert r.output.is_error and "PythonInterpreter(...).open(executor)" in r.output.as_text()


def test_bad_settings_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="timeout=-1"):
        PythonInterpreter(timeout=-1)
    with pytest.raises(ValueError, match="max_output_chars=0"):
        PythonInterpreter(max_output_chars=0)
    with pytest.raises(ValueError, match="memory_mb"):
        PythonInterpreter(memory_mb=0)


# -- the sandbox: the interpreter as a user opens it, with its defaults ------------------------------

@pytest.fixture
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> Iterator[InterpreterSession]:
    monkeypatch.setenv("INTERPRETER_TEST_SECRET_KEY", "sk-not-for-the-cell")  # in the host, before the pool
    interp = PythonInterpreter(timeout=10)
    with Executor(interp, workers=1) as ex, interp.open(ex) as s:
        yield s


def test_the_default_interpreter_has_no_network(sandboxed: InterpreterSession) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        r = sandboxed.run_cell(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)")
    assert r.output.is_error and "Error" in r.output.data["error"]["type"]


def test_the_default_interpreter_writes_only_in_its_workspace(sandboxed: InterpreterSession,
                                                              tmp_path: object) -> None:
    outside = os.path.join(str(tmp_path), "escaped.txt")
    r = sandboxed.run_cell(f"open({outside!r}, 'w').write('x')")
    assert r.output.is_error and not os.path.exists(outside)
    assert sandboxed.run_cell("open('inside.txt', 'w').write('x')").output.data["files"] == [
        {"path": "inside.txt", "size": 1}]


def test_the_default_interpreter_does_not_see_the_hosts_environment(sandboxed: InterpreterSession) -> None:
    r = sandboxed.run_cell("import os\nsorted(k for k in os.environ if 'SECRET' in k)")
    assert r.output.data["value"] == "[]"


def test_an_episode_cannot_read_or_change_another_episodes_files(plain: tuple[PythonInterpreter, Executor]) -> None:
    interp, ex = plain
    with interp.open(ex) as a, interp.open(ex) as b:
        a.run_cell("open('secret.txt', 'w').write('a-only')")
        theirs = os.path.join(a.workspace, "secret.txt")
        read = b.run_cell(f"open({theirs!r}).read()")
        listed = b.run_cell(f"import os\nos.listdir({a.workspace!r})")
        written = b.run_cell(f"open({theirs!r}, 'w').write('b was here')")
        assert read.output.is_error and listed.output.is_error and written.output.is_error
        assert "a-only" not in str(read.output.data) + str(listed.output.data)
        assert a.run_cell("open('secret.txt').read()").output.data["value"] == "'a-only'"


def test_an_executor_that_cannot_give_a_cell_its_own_process_is_refused_naming_why() -> None:
    sandboxed, plain = PythonInterpreter(), PythonInterpreter(sandbox=False)
    with Executor(sandboxed, mode="sequential") as ex:
        with pytest.raises(RuntimeError, match="sandboxed"):
            sandboxed.open(ex)
        with pytest.raises(RuntimeError, match=r"sequential mode.*use mode='fork'"):
            plain.open(ex)
        assert ex.run([ToolCall("c1", "python", {"code": "1"})])[0].output.is_error  # no cell ran in this process


def test_open_interpreters_are_bounded_by_max_sessions_and_a_refused_one_leaves_no_workspace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the workspaces are made
    interp = PythonInterpreter()
    with Executor(interp, workers=1, max_sessions=1) as ex, interp.open(ex) as first:
        # the first's, and the next episode's, opened ahead (not counted: it runs no cell until an open takes it)
        assert len(os.listdir(tmp_path)) == 2 and os.path.basename(first.workspace) in os.listdir(tmp_path)
        with pytest.raises(RuntimeError, match="max_sessions"):
            interp.open(ex)
        assert os.listdir(tmp_path) == [os.path.basename(first.workspace)]
    assert os.listdir(tmp_path) == []


def test_the_next_episode_is_opened_ahead_in_a_workspace_of_its_own_and_only_for_the_same_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each open asks the executor to open the next episode ahead, in a new workspace: the next open with
    the same settings is handed it, with nothing of the episode before (no file, no variable); an open
    after a setting changed gets an episode with the new setting, not the one opened ahead."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    interp = PythonInterpreter(timeout=10)
    with Executor(interp, workers=1) as ex:
        with interp.open(ex) as a:
            assert a.run_cell("secret = 'a'\nopen('a.txt', 'w').write('a')").status == "ok"
            ahead = set(os.listdir(tmp_path)) - {os.path.basename(a.workspace)}
            assert len(ahead) == 1  # the next episode's, made ahead
        with interp.open(ex) as b:
            assert {os.path.basename(b.workspace)} == ahead
            seen = b.run_cell("import os\nsorted(os.listdir('.')), 'secret' in dir()").output.data["value"]
            assert seen == "([], False)"
        interp.max_output_chars = 5
        with interp.open(ex) as c:
            out = c.run_cell("print('0123456789')").output.data["stdout"]
            assert out.startswith("01234\n") and "more characters not shown" in out, out
    assert os.listdir(tmp_path) == []  # every workspace made ahead and not used is removed with its executor


def test_a_cell_stuck_in_c_code_is_rolled_back_at_its_timeout_not_after_the_kill_grace() -> None:
    """No SIGTERM reaches a cell inside one long C call: its process, discarded for its checkpoint, is
    killed at once at the timeout, not ``kill_grace`` (5 s here) later."""
    import time

    interp = PythonInterpreter(timeout=10)
    with Executor(interp, workers=1, kill_grace=5.0) as ex, interp.open(ex) as s:
        assert s.run_cell("x = 41").status == "ok"
        started = time.monotonic()
        r = s.run_cell("x = 0\nimport hashlib\nhashlib.pbkdf2_hmac('sha256', b'x', b'y', 2**31 - 1)", timeout=0.5)
        assert r.status == "timeout" and "rolled back" in r.error.message, r
        assert time.monotonic() - started < 3.5
        assert s.run_cell("x + 1").output.data["value"] == "42"
