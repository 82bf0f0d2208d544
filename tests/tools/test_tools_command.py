"""`toolfork tools`: through the real CLI entry point, and once as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toolfork.cli import main
from toolfork.toolkits import CalculatorToolkit

TOOLS_MODULE = '''
from toolfork import Tool, Toolkit, tool


@tool
def greet(name: str, excited: bool = False) -> str:
    """Greet someone.

    Args:
        name: who to greet
        excited: add an exclamation mark
    """
    return f"Hello {name}" + ("!" if excited else "")


@tool(visible=False)
def secret(x: int) -> int:
    """Hidden helper."""
    return x


def plain(word: str) -> str:
    """A plain function."""
    return word


class Kit(Toolkit):
    def provide(self):
        return [greet]


TOOLS = [greet, secret, plain]
CLASH = [greet, Tool.make("greet", "another greet")]
NOT_A_TOOL = 42
'''


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_cli_tools.py"
    path.write_text(TOOLS_MODULE)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["tools", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_calculator_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--toolkit", "calculator")
    assert code == 0 and err == ""
    defs = json.loads(out)
    expected = [{"name": t.name, "description": t.description, "parameters": t.to_json_schema()}
                for t in CalculatorToolkit().tools()]
    assert defs == expected


@pytest.mark.parametrize(
    ("fmt", "extra", "method"),
    [
        ("anthropic", [], lambda t: t.to_anthropic()),
        ("openai", [], lambda t: t.to_openai()),
        ("openai", ["--strict"], lambda t: t.to_openai(strict=True)),
        ("openai-responses", ["--strict"], lambda t: t.to_openai(strict=True, api="responses")),
    ],
)
def test_provider_formats(capsys: pytest.CaptureFixture[str], fmt: str, extra: list[str], method) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "--toolkit", "calculator", "--format", fmt, *extra)
    assert code == 0
    assert json.loads(out) == [method(t) for t in CalculatorToolkit().tools()]


def test_text_format_is_one_line_per_tool(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--toolkit", "calculator", "--format", "text")
    assert code == 0
    assert out.splitlines() == [t.to_string() for t in CalculatorToolkit().tools()]


def test_tools_from_a_file_path(capsys: pytest.CaptureFixture[str], tools_file: Path) -> None:
    code, out, _ = run(capsys, "--tools", f"{tools_file}:TOOLS", "--format", "anthropic")
    assert code == 0
    defs = json.loads(out)
    assert [d["name"] for d in defs] == ["greet", "plain"]  # secret is invisible
    assert defs[0]["input_schema"]["properties"]["name"] == {"description": "who to greet", "type": "string"}
    code, out, _ = run(capsys, "--tools", f"{tools_file}:TOOLS", "--all", "--format", "text")
    assert [line.split("(")[0] for line in out.splitlines()] == ["greet", "secret", "plain"]


def test_tools_from_a_module_in_the_working_directory(
    capsys: pytest.CaptureFixture[str], tools_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tools_file.parent)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tools_file.parent))])
    monkeypatch.delitem(sys.modules, "my_cli_tools", raising=False)
    for spec, names in [("my_cli_tools:greet", ["greet"]), ("my_cli_tools:Kit", ["greet"]),
                        ("my_cli_tools:plain", ["plain"])]:
        code, out, err = run(capsys, "--tools", spec)
        assert code == 0, err
        assert [d["name"] for d in json.loads(out)] == names
    code, out, _ = run(capsys, "--toolkit", "calculator", "--tools", "my_cli_tools:greet", "--format", "text")
    assert out.splitlines()[-1].startswith("greet(name: string, excited: boolean = false)")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give --toolkit NAME or --tools MODULE:ATTR (toolkits: calculator"),
        (["--toolkit", "abacus"], "unknown toolkit 'abacus'"),
        (["--tools", "no_colon_here"], "'no_colon_here': no such module"),
        (["--tools", "surely_not_a_module_xyz:thing"], "'surely_not_a_module_xyz': no such module"),
        (["--tools", "/nonexistent/dir/tools.py:X"], "no such file"),
        (["--tools", "{file}:missing"], "has no attribute 'missing'"),
        (["--tools", "{file}:NOT_A_TOOL"], "cannot use 42 as a tool"),
        (["--tools", "{file}:CLASH"], "Two tools are named 'greet'"),
        (["--toolkit", "calculator", "--strict"], "--strict applies to --format openai"),
    ],
)
def test_bad_invocations_exit_2_with_a_message(
    capsys: pytest.CaptureFixture[str], tools_file: Path, argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *[a.replace("{file}", str(tools_file)) for a in argv])
    assert code == 2
    assert out == ""
    assert message in err


def test_strict_failure_is_reported_not_raised(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "freeform_tools.py"
    path.write_text(textwrap.dedent('''
        from toolfork import tool

        @tool
        def tag(labels: dict[str, str]) -> str:
            """Tag."""
            return ""
    '''))
    code, _, err = run(capsys, "--tools", f"{path}:tag", "--format", "openai", "--strict")
    assert code == 2 and "free-form object" in err


def test_list_toolkits(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--list")
    assert code == 0 and "calculator\tCalculatorToolkit" in out.splitlines()


def test_as_a_real_subprocess() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "toolfork.cli", "tools", "--toolkit", "calculator", "--format", "anthropic"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    defs = json.loads(proc.stdout)
    assert [d["name"] for d in defs] == [t.name for t in CalculatorToolkit().tools()]
    assert all(set(d) == {"name", "description", "input_schema"} for d in defs)
    bad = subprocess.run([sys.executable, "-m", "toolfork.cli", "tools", "--toolkit", "nope"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown toolkit 'nope'" in bad.stderr
