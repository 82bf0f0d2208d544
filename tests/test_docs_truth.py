"""The user docs stay short and say what is true: a word budget, the command lines as argparse has them,
the README's lists as pyproject.toml has them, and the claims a newcomer checks first, checked here.

What counts as prose (the budget): every word a reader reads on README.md and docs/*.md, docs/internals.md
left out (it speaks to whoever works on toolfork). Words inside fenced code blocks (code, commands,
sample output) and inside HTML comments (the docs test's hidden set-up) are not counted; tables are,
cell by cell, and so is inline code (a reader reads `--sandbox` as a word).
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docs import blocks
from toolfork.cli import COMMANDS, build_parser

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pytest itself depends on tomli before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
USER_PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "internals.md")]
# An evening's reading at about 230 words a minute; the room under it is for the sections being added.
WORD_BUDGET = 25_000
FENCE = re.compile(r"^[ ]*```")
COMMENT = re.compile(r"<!--.*?-->", re.S)
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # the commands run from this tree, wherever the test runs


def prose_words(text: str) -> int:
    """The words of a page a reader reads as prose (see the module's docstring)."""
    kept, fenced = [], False
    for line in COMMENT.sub("", text).splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return len("\n".join(kept).split())


def test_prose_words_leave_out_code_and_comments() -> None:
    page = "One two.\n\n```python\nnot counted at all\n```\n<!-- docs: setup\nhidden -->\n| a | `b` |\n"
    assert prose_words(page) == 2 + 5  # "| a | `b` |" is five words


def test_the_user_pages_fit_in_an_evening() -> None:
    counts = {p.relative_to(ROOT).as_posix(): prose_words(p.read_text()) for p in USER_PAGES}
    total = sum(counts.values())
    assert total <= WORD_BUDGET, (f"{total} words of prose, over the budget of {WORD_BUDGET}: move internals to "
                                  f"docs/internals.md or cut repetition; by page: {counts}")


def _options_in(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", text))


def _usage_block(page: Path, command: str) -> str:
    found = [b.code for b in blocks(page) if b.lang in ("", "text") and b.code.lstrip().startswith(command)]
    assert found, f"{page.name}: no usage block starting with {command!r}"
    return found[0]


def _run_parser() -> argparse.ArgumentParser:
    """`toolfork run`'s parser with its arguments, as ``toolfork.cli.main`` builds it."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = subparsers.choices["run"]
    importlib.import_module(COMMANDS["run"][0]).add_arguments(sub)
    return sub


def test_the_usage_of_toolfork_run_in_cli_run_md_is_the_parsers() -> None:
    """Every option of ``toolfork run --help`` is in cli-run.md's usage, and nothing else is."""
    usage = _options_in(_usage_block(ROOT / "docs" / "cli-run.md", "toolfork run CALLS.jsonl"))
    parser = _run_parser()
    actions = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    missing = [a.option_strings[-1] for a in actions if not usage & set(a.option_strings)]
    known = {s for a in parser._actions for s in a.option_strings}
    unknown = sorted(usage - known - {"-vv"})  # -vv is -v given twice
    assert not missing, f"docs/cli-run.md's usage lacks {missing}"
    assert not unknown, f"docs/cli-run.md's usage names options `toolfork run` does not have: {unknown}"


def test_toolfork_help_speaks_to_users() -> None:
    text = build_parser().format_help()
    assert "toolfork.commands" not in text and "``" not in text, text
    assert "tool calls" in text


def test_the_readme_lists_the_real_dependencies_and_extras() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installing = (ROOT / "README.md").read_text().split("## Installing", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([\w.-]+)`", installing))
    deps = {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0] for d in project["dependencies"]}
    assert deps - named == set(), f"README's Installing section misses dependencies {sorted(deps - named)}"
    extras = set(project["optional-dependencies"])
    assert extras - named == set(), f"README's Installing section misses extras {sorted(extras - named)}"


def test_the_readme_names_the_sandbox_in_its_first_screen() -> None:
    readme = (ROOT / "README.md").read_text()
    first_screen = "\n".join(readme.splitlines()[:24])
    assert "sandbox" in first_screen
    # The code interpreter is named there once it is built (a module of toolfork says "interpreter"), and
    # never offered before.
    built = any("interpreter" in path.stem for path in (ROOT / "toolfork").rglob("*.py"))
    if built:
        assert "interpreter" in first_screen.lower()
    else:
        assert "interpreter" not in readme.lower()


def test_the_readme_says_what_the_test_command_installs() -> None:
    text = (ROOT / "README.md").read_text()
    development = text.split("## Development", 1)[1]
    for what in ("PostgreSQL", "MariaDB", "Prometheus", "apt", "root", "npm", "GB", "minutes", "--fast"):
        assert what in development, f"README's Development section does not say {what!r}"
    first = [line for line in text.splitlines()[:12] if line.startswith("./scripts/test.sh")]
    assert first and first[0].split("#")[0].split() == ["./scripts/test.sh"], "the README's test command: the suite"
    assert "--fast" in first[0], "the README's first screen names the fast test command too"


def test_the_fast_test_command_leaves_out_every_test_that_needs_a_server() -> None:
    """scripts/test.sh --fast selects by marks; the tests that need a server carry one."""
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert '-m "not (services or ray or postgres or mysql)"' in script
    default = re.search(r"select\+=\(([^)]*)\)", script)
    assert default and all((ROOT / path).is_dir() for path in default.group(1).split()), "--fast's default paths"
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", "not (services or ray or postgres or mysql)",
                          "tests/mcp/test_conformance.py", "tests/toolkits/test_sql_postgresql.py",
                          "tests/observability/test_metrics_prometheus.py", "tests/test_docs_truth.py"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120, env=ENV)
    selected = [line for line in out.stdout.splitlines() if "::" in line]
    assert selected and all(line.startswith("tests/test_docs_truth.py") for line in selected), out.stdout[-2000:]


def _ignored(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(name, p.strip("/")) for p in patterns)


def test_the_readme_first_command_leaves_nothing_git_would_show(tmp_path: Path) -> None:
    gitignore = ROOT / ".gitignore"
    if not gitignore.exists():
        pytest.skip("no .gitignore in this tree (an sdist): nothing to keep clean")
    patterns = [line for line in gitignore.read_text().splitlines() if line.strip() and not line.startswith(("#", "!"))]
    out = subprocess.run([sys.executable, "-m", "toolfork.cli", "run", str(ROOT / "examples" / "calls.jsonl"),
                          "-o", "results.jsonl", "-q"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path, env=ENV)
    assert out.returncode == 0, out.stderr
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["results.jsonl", "results.jsonl.journal"], left
    assert [name for name in left if not _ignored(name, patterns)] == []


SANDBOX_PID_TOOL = '''
import os

from toolfork import tool


@tool
def pid() -> int:
    """The process id the tool sees."""
    return os.getpid()
'''


def test_a_sandboxed_tool_sees_pid_1_as_cli_run_md_says(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(SANDBOX_PID_TOOL)
    (tmp_path / "calls.jsonl").write_text("".join(json.dumps({"id": str(i), "name": "pid", "arguments": {}}) + "\n"
                                                  for i in range(3)))
    out = subprocess.run([sys.executable, "-m", "toolfork.cli", "run", "calls.jsonl", "--sandbox", "-q"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path, env=ENV)
    if out.returncode == 2 and "cannot be enforced" in out.stderr:
        pytest.skip(f"this host cannot give the sandbox: {out.stderr.strip()[:300]}")
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["output"]["data"] for r in records] == [1, 1, 1]
    assert len({r["worker_pid"] for r in records}) == 3
    page = (ROOT / "docs" / "cli-run.md").read_text()
    assert "answers 1" in page and "new pid each call" not in page


def test_a_str_result_is_text_as_the_quickstart_says(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text("from toolfork import tool\n\n\n@tool\ndef hello() -> str:\n"
                                       '    """Say hello."""\n    return "hi"\n')
    (tmp_path / "calls.jsonl").write_text(json.dumps({"id": "1", "name": "hello", "arguments": {}}) + "\n")
    out = subprocess.run([sys.executable, "-m", "toolfork.cli", "run", "calls.jsonl", "-q"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path, env=ENV)
    assert out.returncode == 0, out.stderr
    output = json.loads(out.stdout)["output"]
    assert "data" not in output and output["content"][0]["text"] == "hi"
    page = (ROOT / "docs" / "quickstart.md").read_text()
    assert "a `str` result has no `data`" in page and "output.as_text()" in page
