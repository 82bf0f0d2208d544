"""`toolfork chat` driven as a user would: a real subprocess, stdin lines, keys in the environment,
the scripted model server as the API."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.modelserver import ScriptedModelServer, ToolCallSpec, Turn
from toolfork import cli

REPO = Path(__file__).resolve().parents[2]


def run_cli(args: list[str], stdin: str, env_extra: dict[str, str], drop: tuple[str, ...] = ()
            ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(env_extra)
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "toolfork.cli", "chat", *args], input=stdin, text=True,
                          capture_output=True, cwd=REPO, env=env, timeout=60)


def test_chat_shows_tool_calls_with_durations_and_the_answer(model_server: ScriptedModelServer) -> None:
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "add", {"a": 2, "b": 3})]),
                         Turn(text="2 + 3 = 5"), Turn(text="bye")])
    done = run_cli(["--provider", "openai", "--base-url", model_server.openai_base_url,
                    "--tools", "tests.agent.agent_tools:add", "--parallel"],
                   "what is 2+3?\n\nthanks\n", {"OPENAI_API_KEY": "test-key"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == '  -> add({"a": 2, "b": 3}) [c1]'
    assert lines[1].startswith("  <- add ok in ") and lines[1].endswith("s [c1]")
    assert lines[2:] == ["2 + 3 = 5", "bye"]
    assert model_server.requests[1].tool_results[0].content == "5"
    assert model_server.requests[2].messages[-1]["content"] == "thanks"


def test_chat_without_a_key_stops_with_a_clear_message(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert cli.main(["chat", "--provider", "anthropic"]) == 2
    assert capsys.readouterr().err.strip() == ("toolfork chat: no API key for anthropic: set ANTHROPIC_API_KEY or "
                                               "ANTHROPIC_AUTH_TOKEN in the environment")
    assert cli.main(["chat", "--provider", "openai"]) == 2
    assert "set OPENAI_API_KEY" in capsys.readouterr().err


def test_chat_asks_for_approval_on_stdin(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    model_server.script([Turn(tool_calls=[ToolCallSpec("c1", "transfer", {"amount": 500, "log": str(log)})]),
                         Turn(text="sent"),
                         Turn(tool_calls=[ToolCallSpec("c2", "transfer", {"amount": 700, "log": str(log)})]),
                         Turn(text="not sent")])
    done = run_cli(["--provider", "anthropic", "--base-url", model_server.base_url,
                    "--tools", "tests.agent.agent_tools:transfer"],
                   "pay 500\ny\npay 700\nn\n", {"ANTHROPIC_API_KEY": "test-key"})
    assert done.returncode == 0, done.stderr
    assert "approve transfer(" in done.stdout and "(moves 500, more than 100)? [y/N]" in done.stdout
    assert log.read_text().split() == ["500"]
    assert "Not executed: the user rejected this call: declined in the CLI" in \
        model_server.requests[3].tool_results[-1].content
    assert done.stdout.rstrip().endswith("not sent")


def test_chat_reports_bad_tool_specs_and_model_errors(model_server: ScriptedModelServer,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert cli.main(["chat", "--provider", "openai", "--tools", "no_such_module:x"]) == 2
    assert "no_such_module" in capsys.readouterr().err
    assert cli.main(["chat", "--provider", "openai-compatible", "--base-url", model_server.openai_base_url]) == 2
    assert "needs --model" in capsys.readouterr().err
    model_server.script([Turn(text="hello from llama")])
    monkeypatch.setattr("sys.stdin", io.StringIO("hi\nhi again\n"))
    assert cli.main(["chat", "--provider", "openai-compatible", "--model", "llama3", "--base-url",
                     model_server.openai_base_url, "--toolkit", "calculator"]) == 0
    out = capsys.readouterr().out
    assert "hello from llama" in out
    # The script ran out: the API error is shown and the session goes on, no traceback.
    assert "error: openai-compatible:" in out
    assert model_server.requests[0].tools, "the calculator toolkit's tools were offered"
