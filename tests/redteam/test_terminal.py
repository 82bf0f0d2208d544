"""No terminal control from data: control sequences in an input file's ids, a sandboxed tool's exception
class name and a tool's own log line reach ``toolfork run``'s stderr escaped, never raw, as root and as
nobody; the JSONL output keeps the exact text."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.redteam.conftest import REPO, become, child_env, shared_dir
from tests.redteam.terminal_tools import CSI8, OSC52, TITLE

RAW = ("\x1b", "\x07", "\x9b", "\x9d")


@pytest.fixture
def work() -> Iterator[Path]:
    """A directory root and nobody can both write."""
    with shared_dir("toolfork-terminal-", "this suite") as path:
        yield path


@pytest.mark.timeout(180)
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_control_sequences_from_data_never_reach_stderr_raw(work: Path, user: str) -> None:
    ids = [f"{OSC52}crash", f"{TITLE}sandboxed", f"{CSI8}logged"]
    rows = [{"id": ids[0], "name": "crash", "arguments": {}},
            {"id": ids[1], "name": "raise_named", "arguments": {"name": f"Evil{OSC52}Error"}},
            {"id": ids[2], "name": "log_line", "arguments": {"text": f"look {TITLE}"}}]
    calls, out = work / "calls.jsonl", work / "out.jsonl"
    calls.write_text("".join(json.dumps(r) + "\n" for r in rows))
    calls.chmod(0o644)
    done = subprocess.run([*become(user), sys.executable, "-m", "toolfork.cli", "run", str(calls), "-o", str(out),
                           "--tools", "tests/redteam/terminal_tools.py:TOOLS", "--workers", "1"],
                          capture_output=True, cwd=REPO, env=child_env(), timeout=150, check=False)
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 1, stderr  # calls failed, the job ran
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert sorted(records) == sorted(ids)  # the JSONL keeps the exact text
    assert records[ids[0]]["status"] == "crashed"
    assert records[ids[1]]["status"] == "error" and records[ids[1]]["error"]["type"] == f"Evil{OSC52}Error"
    assert records[ids[2]]["status"] == "ok"
    # Each reached stderr, escaped: the id in the crash WARNING, the class name in the final counts,
    # the tool's own log line.
    assert "\\x1b]52;c;cHduZWQ=\\x07crash" in stderr, stderr
    assert "Evil\\x1b]52;c;cHduZWQ=\\x07Error 1" in stderr, stderr
    assert "tool says look \\x1b]0;owned\\x07" in stderr, stderr
    assert not [c for c in RAW if c in stderr], repr(stderr)


def test_escape_shows_every_control_character_and_keeps_lines() -> None:
    from toolfork.commands._terminal import escape

    assert escape("plain text, é, 日本\tand\nlines") == "plain text, é, 日本\tand\nlines"
    assert escape(f"{OSC52}{TITLE}{CSI8}\r\x00\x7f\u202eevil") == \
        "\\x1b]52;c;cHduZWQ=\\x07\\x1b]0;owned\\x07\\x9b2J\\x0d\\x00\\x7f\\u202eevil"
    assert escape(escape(TITLE)) == escape(TITLE)  # escaping twice changes nothing more


def test_toolfork_chat_shows_the_model_s_text_and_the_calls_escaped() -> None:
    import io

    from toolfork.agent import TextDelta, ToolCallFinished, ToolCallStarted
    from toolfork.commands.chat import Printer

    out = io.StringIO()
    printer = Printer(out)
    printer(TextDelta(f"answer {OSC52}"))
    printer(ToolCallStarted(f"id{TITLE}", f"tool{CSI8}", {"q": TITLE}))
    printer(ToolCallFinished(f"id{TITLE}", "tool", "error", None, 0.1, error=f"Boom{OSC52}"))
    shown = out.getvalue()
    assert not [c for c in RAW if c in shown], repr(shown)
    assert "answer \\x1b]52;c;cHduZWQ=\\x07" in shown and "[id\\x1b]0;owned\\x07]" in shown
