"""Every code block of README.md and docs/*.md runs (or is checked) in the test suite.

Conventions, written as HTML comments on the lines right before a fenced block (invisible on a
rendered page, plain to whoever edits it):

* ``python`` blocks run, each in a fresh interpreter (as ``__main__``, in a temporary directory),
  unless marked. A block that prints shows its output in comments: on the ``print(...)`` line
  (``print(x)   # 3``) and/or in the ``#`` lines right below it; the printed words must match.
* ``<!-- docs: continues -->``: this block belongs to the sequence of the block before it on the
  page and runs in the same interpreter, after it (names defined there are still defined).
* ``<!-- docs: setup`` ... ``-->``: hidden Python that runs right before the block (fixtures a reader
  does not need: a stub hook, a file the example reads, a scripted model server). In setup code,
  ``model_server()`` starts the scripted model server of tests/modelserver and points the
  Anthropic and OpenAI providers at it (base URL and a dummy key in the environment).
* ``<!-- docs: not run: REASON -->``: shown, not run. Kept for what cannot run on a test machine
  (a remote cluster); the reason is required. The block must still compile.
* ``bash`` / ``console`` / ``sh`` blocks are not run (they install packages or start long jobs):
  they must be valid shell (``bash -n``; for ``console`` the ``$ `` lines), and every ``toolfork``
  command in them must be accepted by the CLI's own argument parser.
* ``json`` blocks must parse; in ``jsonl`` blocks, every line must. Blocks without a language (or
  ``text``) are prose: not checked. Any other language fails the test, so a new kind of block gets a
  rule before it gets in.
* ``<!-- docs: file NAME -->``: the block is the content of a file the reader saves as NAME (it is
  not run on its own). ``<!-- docs: run -->`` on a ``console`` block: its ``$ `` commands run for
  real. A page with either runs as a walkthrough, the way a reader types it: its ``file`` blocks are
  written and its ``run`` blocks run, in page order, in one empty directory; each command must exit
  0 (``run: exit N``: N) and print the lines shown under it, if any: its stdout exactly, then its
  stderr, whose numbers may differ (times, pids).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from toolfork.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
END = "\x00docs-block-end"
PROSE = ("", "text")
SHELL = ("bash", "sh", "shell", "console")

FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)[ ]*$")
MARK = re.compile(r"<!--\s*docs:\s*(?P<body>.*?)-->", re.S)

HARNESS = '''\
import os as _docs_os


def model_server():
    """Start the scripted model server and point the providers at it; returns it for scripting."""
    from tests.modelserver import ScriptedModelServer

    srv = ScriptedModelServer()
    srv.__enter__()
    for _var in ("ANTHROPIC_AUTH_TOKEN", "OPENAI_ORG_ID"):
        _docs_os.environ.pop(_var, None)
    _docs_os.environ.update(ANTHROPIC_BASE_URL=srv.base_url, ANTHROPIC_API_KEY="test",
                            OPENAI_BASE_URL=srv.openai_base_url, OPENAI_API_KEY="test")
    return srv
'''


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    marks: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def mark(self, name: str) -> str | None:
        for m in self.marks:
            if m == name or m.startswith((name + ":", name + "\n", name + " ")):
                return m[len(name):].lstrip(":").strip()
        return None

    @property
    def setup(self) -> str:
        setup = self.mark("setup")
        return textwrap.dedent(setup) + "\n" if setup else ""


def blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, start = len(m["indent"]), i
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        code = "\n".join(line[indent:] if line[:indent].strip() == "" else line for line in lines[i + 1:j])
        out.append(Block(page, start + 1, m["lang"].lower(), code + "\n", _marks(lines[:start])))
        i = j + 1
    return out


def _marks(before: list[str]) -> list[str]:
    """The ``<!-- docs: ... -->`` comments right above a fence (only blank lines and other comments
    in between), in page order."""
    text = "\n".join(before).rstrip()
    found = []
    while text.endswith("-->"):
        opening = text.rfind("<!--")
        if opening < 0:
            break
        m = MARK.fullmatch(text[opening:])
        if m:
            found.append(m["body"].strip())
        text = text[:opening].rstrip()
    return found[::-1]


def sequences() -> list[list[Block]]:
    seqs: list[list[Block]] = []
    for page in PAGES:
        current: list[Block] | None = None
        for b in blocks(page):
            if b.lang != "python" or b.mark("not run") is not None or b.mark("file") is not None:
                continue
            if b.mark("continues") is not None and current is not None:
                current.append(b)
            else:
                current = [b]
                seqs.append(current)
    return seqs


def expected_output(code: str) -> list[str] | None:
    """The output a block shows in comments after its prints, or None when it shows none: a comment
    on the line that ends a ``print(...)`` call, and the ``#`` lines right below it."""
    shown: list[str] = []
    lines = code.splitlines()
    ends = sorted({node.end_lineno for node in ast.walk(ast.parse(code))
                   if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                   and node.func.id == "print" and node.end_lineno is not None})
    for end in ends:
        inline = re.search(r"\)\s+#\s?(.*)$", lines[end - 1])
        if inline:
            shown.append(inline.group(1))
        for follow in lines[end:]:
            if not follow.lstrip().startswith("#"):
                break
            shown.append(follow.lstrip()[1:])
    return shown or None


ALL_SEQUENCES = sequences()


@pytest.mark.parametrize("seq", ALL_SEQUENCES, ids=[s[0].where for s in ALL_SEQUENCES])
def test_python_blocks_run_and_print_what_they_show(seq: list[Block], tmp_path: Path) -> None:
    parts = [HARNESS]
    for b in seq:
        parts.append(f"# ---- {b.where}\n{b.setup}\n{b.code}\nprint({END!r}, flush=True)\n")
    script = tmp_path / "docs_example.py"
    script.write_text("\n".join(parts))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env=env)
    assert out.returncode == 0, f"{seq[0].where}:\n{out.stderr[-3000:]}"
    printed = out.stdout.split(END + "\n")
    assert len(printed) == len(seq) + 1, out.stdout
    for b, text in zip(seq, printed, strict=False):
        shown = expected_output(b.code)
        if shown is not None:
            assert text.split() == " ".join(shown).split(), f"{b.where} printed:\n{text}"


def _shell_commands(b: Block) -> list[str]:
    if b.lang == "console":
        return [line[2:] for line in b.code.splitlines() if line.startswith("$ ")]
    return [line for line in b.code.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _toolfork_invocations(command: str) -> list[list[str]]:
    words = shlex.split(command, comments=True)
    out, current = [], []
    for w in [*words, "&&"]:
        if w in ("&&", "||", "|", ";"):
            if current and current[0] == "toolfork":
                out.append(current[1:])
            current = []
        else:
            current.append(w)
    return out


def parse_command_line(argv: list[str]) -> argparse.Namespace:
    """What ``toolfork.cli.main`` does before running a command: the chosen command's arguments are
    added lazily, then the whole line is parsed (SystemExit on anything the CLI refuses)."""
    parser = build_parser()
    chosen = next((a for a in argv if not a.startswith("-")), None)
    if chosen in COMMANDS:
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        importlib.import_module(COMMANDS[chosen][0]).add_arguments(subparsers.choices[chosen])
    return parser.parse_args(argv)


ALL_BLOCKS = [b for page in PAGES for b in blocks(page)]


@pytest.mark.parametrize("b", ALL_BLOCKS, ids=[b.where for b in ALL_BLOCKS])
def test_every_block_has_a_rule_and_keeps_it(b: Block) -> None:
    if b.lang == "python":
        reason = b.mark("not run")
        assert reason is None or reason, f"{b.where}: 'not run' needs a reason"
        compile(b.setup + b.code, b.where, "exec")
    elif b.lang in SHELL:
        commands = _shell_commands(b)
        assert commands, f"{b.where}: no command"
        check = subprocess.run(["bash", "-n"], input="\n".join(commands), capture_output=True, text=True)
        assert check.returncode == 0, f"{b.where}: {check.stderr}"
        for command in commands:
            for argv in _toolfork_invocations(command):
                try:
                    parse_command_line(argv)
                except SystemExit as exc:
                    pytest.fail(f"{b.where}: `toolfork {shlex.join(argv)}` is refused by the CLI ({exc})")
    elif b.lang == "json":
        json.loads(b.code)
    elif b.lang == "jsonl":
        for line in b.code.splitlines():
            assert not line.strip() or isinstance(json.loads(line), dict), f"{b.where}: {line}"
    else:
        assert b.lang in PROSE, f"{b.where}: no rule for ```{b.lang} blocks; add one to tests/test_docs.py"


def test_the_conventions_are_understood() -> None:
    """The parser itself: markers, indentation, sequences, shown output."""
    page = ROOT / "docs" / "tools.md"
    found = blocks(page)
    assert [b.lang for b in found].count("python") >= 6
    assert found[0].mark("continues") is None
    assert all(b.mark("continues") == "" for b in found[1:] if b.lang == "python")
    seqs = [s for s in ALL_SEQUENCES if s[0].page == page]
    assert len(seqs) == 1 and len(seqs[0]) == len([b for b in found if b.lang == "python"])
    assert expected_output("print(x)   # ok 3\n") == ["ok 3"]
    assert expected_output("try:\n    print(e,\n          1)\n# a\n# b\nexcept E:\n    x = 1  # c\n") == [" a", " b"]
    assert expected_output("x = 1  # no print\n") is None
    assert _toolfork_invocations("pip install -e . && toolfork run a.jsonl -o b.jsonl  # c") == [
        ["run", "a.jsonl", "-o", "b.jsonl"]]


WALKTHROUGHS = [page for page in PAGES if any(b.mark("file") is not None or b.mark("run") is not None
                                               for b in blocks(page))]
NUMBER = re.compile(r"\d+(\.\d+)?")


def _console_steps(b: Block) -> list[tuple[str, list[str]]]:
    """A ``console`` block's commands, each with the lines shown under it."""
    steps: list[tuple[str, list[str]]] = []
    for line in b.code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps and line.strip():
            steps[-1][1].append(line)
    return steps


@pytest.mark.parametrize("page", WALKTHROUGHS, ids=[str(p.relative_to(ROOT)) for p in WALKTHROUGHS])
def test_walkthrough_runs_as_a_reader_types_it(page: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    ran = 0
    for b in blocks(page):
        name = b.mark("file")
        if name:
            (tmp_path / name).write_text(b.code)
        elif b.lang == "console" and b.mark("run") is not None:
            for command, shown in _console_steps(b):
                out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120,
                                     cwd=tmp_path, env=env)
                expected = int((b.mark("run") or "").removeprefix("exit") or 0)
                assert out.returncode == expected, f"{b.where}: `{command}` exited {out.returncode}:\n{out.stderr}"
                # stdout exactly; stderr (progress lines, times, pids) with its numbers left open
                stdout, stderr = out.stdout.splitlines(), [NUMBER.sub("N", line) for line in out.stderr.splitlines()]
                expected_lines = shown[:len(stdout)] + [NUMBER.sub("N", line) for line in shown[len(stdout):]]
                assert not shown or stdout + stderr == expected_lines, (
                    f"{b.where}: `{command}` printed:\n{out.stdout}{out.stderr}")
                ran += 1
    assert ran, f"{page.relative_to(ROOT)}: a walkthrough with no command to run"


def test_the_quickstart_is_short_first_and_right(tmp_path: Path) -> None:
    """The quickstart is linked first from the README, is at most 600 words, and its batch job gives the
    statuses its text promises (the walkthrough test checks only what is printed)."""
    page = ROOT / "docs" / "quickstart.md"
    assert page in WALKTHROUGHS
    text = page.read_text()
    assert len(MARK.sub("", text).split()) <= 600
    readme_links = re.findall(r"\]\((docs/[\w-]+\.md)\)", (ROOT / "README.md").read_text())
    assert readme_links[0] == "docs/quickstart.md", readme_links[:3]
    files = {b.mark("file"): b.code for b in blocks(page) if b.mark("file")}
    for name in ("tools.py", "calls.jsonl"):
        (tmp_path / name).write_text(files[name])
    out = subprocess.run([sys.executable, "-m", "toolfork.cli", "run", "calls.jsonl", "-o", "results.jsonl"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 1, out.stderr  # some calls failed, as the page says
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [(r["id"], r["status"]) for r in records] == [("1", "ok"), ("2", "ok"), ("3", "error"), ("4", "timeout")]
    assert [r["output"]["data"] for r in records[:2]] == [6, 49]
    assert "'x'" in records[2]["error"]["message"] or "x:" in records[2]["error"]["message"]


def test_the_readme_main_job_succeeds(tmp_path: Path) -> None:
    """The README's first command line (the first line of its first block, within the first screen), run
    for real (the block check only parses it)."""
    first = blocks(ROOT / "README.md")[0]
    assert first.lang == "bash" and first.line <= 10, first.where
    assert "toolfork run examples/calls.jsonl -o results.jsonl" in first.code.splitlines()[0]
    out_file = tmp_path / "results.jsonl"
    out = subprocess.run([sys.executable, "-m", "toolfork.cli", "run", "examples/calls.jsonl", "-o", str(out_file)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out_file.read_text().splitlines()]
    inputs = [line for line in (ROOT / "examples/calls.jsonl").read_text().splitlines() if line.strip()]
    assert len(records) == len(inputs) and all(r["status"] == "ok" for r in records)


RESULTS = ROOT / "bench" / "results"
USER_PAGES = [*PAGES, *sorted(RESULTS.glob("*.md")), *sorted(RESULTS.glob("*.json"))]
# What speaks to the tracker or to the history of the work rather than to the user.
TRACKER = re.compile(r"\bissues? #?\d+|#\d+\b|\bred[- ]team\b|\bthis session\b", re.I)


@pytest.mark.parametrize("page", USER_PAGES, ids=[str(p.relative_to(ROOT)) for p in USER_PAGES])
def test_user_pages_do_not_cite_the_tracker(page: Path) -> None:
    found = [f"{page.relative_to(ROOT)}:{n}: {m.group(0)!r}" for n, line in enumerate(page.read_text().splitlines(), 1)
             for m in TRACKER.finditer(line)]
    assert not found, "\n".join(found)


def test_the_tracker_pattern_catches_what_it_should() -> None:
    hits = ["the targets of issue 16", "see #12", "Issue #3 asked", "found by the red team", "this session's work"]
    misses = ["an issue with 16 workers", "C# 12", "the ## heading", "a session of its own", "1.5x"]
    assert all(TRACKER.search(text) for text in hits)
    assert not any(TRACKER.search(text) for text in misses)
