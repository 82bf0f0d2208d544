"""What every command shares: ``--version``, ``python -m toolfork``, a missing optional package as one
line naming the extra (exit 2), and one ``--tools SPEC`` grammar in run, worker, chat and tools."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import toolfork
from tests.cli.conftest import REPO, child_env, read_jsonl, run_process, write_jsonl
from tests.cli.test_loading import SPEC_FORMS
from tests.modelserver import ScriptedModelServer, Turn
from tests.modelserver.fixture import model_server  # noqa: F401 - the fixture chat runs against
from toolfork import cli

# ------------------------------------------------------------------------- version, python -m


def test_version_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"toolfork {toolfork.__version__}\n"


def test_python_dash_m_toolfork_is_the_same_command_line() -> None:
    version = subprocess.run([sys.executable, "-m", "toolfork", "--version"], capture_output=True, text=True,
                             cwd=REPO, env=child_env(), timeout=60)
    assert (version.returncode, version.stdout) == (0, f"toolfork {toolfork.__version__}\n")
    assert toolfork.__version__.count(".") >= 2  # X.Y.Z
    listed = subprocess.run([sys.executable, "-m", "toolfork", "tools", "--toolkit", "calculator", "--format",
                             "text"], capture_output=True, text=True, cwd=REPO, env=child_env(), timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("sum(")
    usage = subprocess.run([sys.executable, "-m", "toolfork"], capture_output=True, text=True, cwd=REPO,
                           env=child_env(), timeout=60)
    assert usage.returncode == 2 and usage.stderr.startswith("usage: toolfork ")


# ------------------------------------------------------------------------- missing optional packages

# Runs the CLI with some top-level packages made unimportable, as if they were not installed.
WITHOUT = """
import sys

blocked = set(sys.argv[1].split(","))


class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
from toolfork.cli import main

raise SystemExit(main(sys.argv[2:]))
"""


def run_without(blocked: str, *args: str, stdin: str = "", env: dict[str, str] | None = None
                ) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in child_env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", WITHOUT, blocked, *args], input=stdin, capture_output=True,
                          text=True, cwd=REPO, env=full_env, timeout=60)


@pytest.mark.parametrize("env", [{"ANTHROPIC_API_KEY": "k"}, {}], ids=["with-key", "without-key"])
def test_chat_without_the_anthropic_sdk_names_the_extra(env: dict[str, str]) -> None:
    done = run_without("anthropic", "chat", "--provider", "anthropic", stdin="hello\n", env=env)
    assert done.returncode == 2
    assert done.stderr == ("toolfork: the Anthropic provider needs the 'anthropic' package: "
                           "pip install 'toolfork[anthropic]'\n")
    assert done.stdout == ""


@pytest.mark.parametrize("provider", ["openai", "openai-compatible"])
def test_chat_without_the_openai_sdk_names_the_extra(provider: str) -> None:
    done = run_without("openai", "chat", "--provider", provider, "--model", "m", env={"OPENAI_API_KEY": "k"})
    assert done.returncode == 2
    assert "needs the 'openai' package: pip install 'toolfork[openai]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_in_ray_mode_without_ray_names_the_extra(tmp_path: Path) -> None:
    calls = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "name": "ping"}])
    done = run_without("ray", "run", str(calls), "--tools", "tests/cli/spec_tools.py", "--mode", "ray",
                       "-o", str(tmp_path / "out.jsonl"), "-q")
    assert done.returncode == 2
    assert "pip install 'toolfork[ray]'" in done.stderr and "Traceback" not in done.stderr


def test_tools_whose_module_needs_a_missing_extra_names_it(tmp_path: Path) -> None:
    user = tmp_path / "web_tools.py"
    user.write_text("import httpx\n")
    done = run_without("httpx", "tools", "--tools", str(user))
    assert done.returncode == 2
    assert "No module named 'httpx'" in done.stderr
    assert "pip install 'toolfork[web]'" in done.stderr
    # the user's own traceback, pointing at their import, in one block: not a crash of the command
    assert done.stderr.count("Traceback") == 1 and 'web_tools.py", line 1, in <module>' in done.stderr
    assert "toolfork/cli.py" not in done.stderr


def test_any_command_hitting_a_missing_extra_exits_2_and_others_still_raise(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from toolfork.commands import tools as tools_command

    def needs_pymysql(args: object) -> int:
        raise ModuleNotFoundError("No module named 'pymysql'", name="pymysql")

    monkeypatch.setattr(tools_command, "main", needs_pymysql)
    assert cli.main(["tools", "--list"]) == 2
    assert capsys.readouterr().err == ("toolfork: the 'PyMySQL' package is not installed: "
                                       "pip install 'toolfork[mysql]'\n")

    def real_bug(args: object) -> int:  # a module that is no extra of ours: a bug, keep the traceback
        raise ModuleNotFoundError("No module named 'toolfork.gone'", name="toolfork.gone")

    monkeypatch.setattr(tools_command, "main", real_bug)
    with pytest.raises(ModuleNotFoundError, match=r"toolfork\.gone"):
        cli.main(["tools", "--list"])


# ------------------------------------------------------------------------- --tools in every command


@pytest.mark.parametrize(("spec", "names"), SPEC_FORMS)
def test_tools_command_accepts_every_spec_form(spec: str, names: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["tools", "--tools", spec]) == 0
    assert [d["name"] for d in json.loads(capsys.readouterr().out)] == names


@pytest.mark.parametrize(("spec", "names"), SPEC_FORMS)
def test_run_accepts_every_spec_form(spec: str, names: list[str], tmp_path: Path) -> None:
    rows = [{"id": n, "name": n, "arguments": {} if n == "ping" else {"text": "hi"}} for n in names]
    out = tmp_path / "out.jsonl"
    assert cli.main(["run", str(write_jsonl(tmp_path / "c.jsonl", rows)), "--tools", spec, "--workers", "2",
                     "-o", str(out), "-q"]) == 0
    records = read_jsonl(out)
    assert [(r["id"], r["status"]) for r in records] == [(n, "ok") for n in names]


@pytest.mark.parametrize(("spec", "names"), SPEC_FORMS)
def test_worker_accepts_every_spec_form(spec: str, names: list[str]) -> None:
    line = json.dumps({"id": "1", "name": names[-1], "arguments": {"text": "hi"}})
    done = run_process("worker", "--tools", spec, "--mode", "sequential", stdin=line + "\n")
    assert done.returncode == 0, done.stderr
    assert f"{len(names)} tools from {spec}" in done.stderr
    record = json.loads(done.stdout)
    assert (record["status"], record["output"]["content"][0]["text"]) == ("ok", "HI!" if spec.endswith(
        "louder") else "HI")


@pytest.mark.parametrize(("spec", "names"), SPEC_FORMS)
def test_chat_accepts_every_spec_form(spec: str, names: list[str], model_server: ScriptedModelServer,  # noqa: F811
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    model_server.script([Turn(text="hello")])
    monkeypatch.setattr("sys.stdin", io.StringIO("hi\n"))
    assert cli.main(["chat", "--provider", "openai", "--base-url", model_server.openai_base_url,
                     "--tools", spec]) == 0
    assert model_server.requests[0].tools == names


@pytest.mark.parametrize("command", ["tools", "run", "worker", "chat"])
def test_every_command_refuses_a_bad_spec_with_exit_2(command: str, tmp_path: Path) -> None:
    args = {"tools": ["tools"], "run": ["run", "-", "-o", str(tmp_path / "o.jsonl")], "worker": ["worker"],
            "chat": ["chat", "--provider", "openai"]}[command]
    for spec, message in [("tests/cli/nope.py", "'tests/cli/nope.py': no such file"),
                          ("tests/cli/spec_tools.py:nothing", "has no attribute 'nothing'"),
                          ("tests/cli/cli_tools.py:NOT_A_TOOL", "cannot use 'nope' as a tool")]:
        done = subprocess.run([sys.executable, "-m", "toolfork", *args, "--tools", spec], input="",
                              capture_output=True, text=True, cwd=REPO,
                              env={**child_env(), "OPENAI_API_KEY": "k"}, timeout=60)
        assert done.returncode == 2, (command, spec, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr, (command, spec, done.stderr)
