"""FileSystem toolkit: confinement to the root (.., absolute paths, symlinks), every tool's happy path
and failures, real HTML and PDF parsing, and the opt-in bash tool."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.toolkits.helpers import err, ok
from toolfork.toolkits.filesystem import FileSystemToolkit
from toolfork.tools import Tool

READ_TOOLS = ["describe_directory_content", "read_file", "preview_file", "grep_file_content", "glob_path", "parse_file"]
WRITE_TOOLS = ["write_file", "edit_file", "delete_file"]


def make_pdf(pages: list[str]) -> bytes:
    """A minimal, valid PDF with one line of Helvetica text per page (offsets computed, not guessed)."""
    objects: list[bytes] = []
    page_ids = [3 + 2 * i for i in range(len(pages))]
    font_id = 3 + 2 * len(pages)
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{pid} 0 R" for pid in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 18 Tf 72 720 Td ({escaped}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {page_ids[i] + 1} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """root/ with files, a subdirectory and symlinks; outside/ next to it holds a secret."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "src" / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET-VALUE\n")
    (root / "notes.txt").write_text("alpha\nBeta line\ngamma\n")
    (root / "src" / "app.py").write_text("import os\n\ndef main():\n    return 42\n")
    (root / "src" / "pkg" / "util.py").write_text("def helper():\n    return 'main'\n")
    (root / "image.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (root / "link_out").symlink_to(outside / "secret.txt")
    (root / "dir_out").symlink_to(outside, target_is_directory=True)
    (root / "link_in").symlink_to(root / "notes.txt")
    (root / "dangling_out").symlink_to(outside / "not-yet.txt")
    return {"root": root, "outside": outside}


def kit_tools(root: Path, **kwargs: Any) -> dict[str, Tool]:
    return {t.name: t for t in FileSystemToolkit(root, **kwargs).tools()}


@pytest.fixture
def fs(tree: dict[str, Path]) -> dict[str, Tool]:
    return kit_tools(tree["root"])


# ---------------------------------------------------------------- shape and construction


def test_tools_filters_and_bash_opt_in(tree: dict[str, Path]) -> None:
    root = tree["root"]
    assert [t.name for t in FileSystemToolkit(root).tools()] == READ_TOOLS + WRITE_TOOLS
    read_only = FileSystemToolkit(root).exclude(FileSystemToolkit.WRITE_TOOLS)
    assert [t.name for t in read_only.tools()] == READ_TOOLS
    assert [t.name for t in FileSystemToolkit(root).only(["read_file"]).tools()] == ["read_file"]
    with_bash = FileSystemToolkit(root, allow_bash=True, bash_timeout=5)
    assert [t.name for t in with_bash.tools()][-1] == "bash"
    assert "approval" in (with_bash.guidelines() or "")
    assert "bash" not in {t.name for t in FileSystemToolkit(root).tools()}


def test_constructor_checks_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        FileSystemToolkit(tmp_path / "missing")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        FileSystemToolkit(tmp_path / "file.txt")
    with pytest.raises(ValueError, match="max_read_bytes"):
        FileSystemToolkit(tmp_path, max_read_bytes=0)
    monkeypatch.chdir(tmp_path)
    assert FileSystemToolkit().root == tmp_path.resolve()


# ---------------------------------------------------------------- confinement


@pytest.mark.parametrize(
    ("tool_name", "args"),
    [
        ("read_file", {"path": "../outside/secret.txt"}),
        ("preview_file", {"path": "src/../../outside/secret.txt"}),
        ("describe_directory_content", {"path": ".."}),
        ("grep_file_content", {"pattern": "SECRET", "path": "../outside"}),
        ("glob_path", {"pattern": "*", "path": "../outside"}),
        ("parse_file", {"path": "../outside/secret.txt"}),
        ("write_file", {"path": "../outside/new.txt", "content": "x"}),
        ("edit_file", {"path": "../outside/secret.txt", "search": "TOP", "replace": "x"}),
        ("delete_file", {"path": "../outside/secret.txt"}),
    ],
)
def test_dotdot_is_refused_by_every_tool(
    fs: dict[str, Tool], tree: dict[str, Path], tool_name: str, args: dict[str, Any]
) -> None:
    message = err(fs, tool_name, **args)
    assert "'..' is not allowed" in message
    assert "TOP-SECRET" not in message
    assert (tree["outside"] / "secret.txt").read_text() == "TOP-SECRET-VALUE\n"
    assert not (tree["outside"] / "new.txt").exists()


def test_dotdot_is_refused_even_when_it_would_stay_inside(fs: dict[str, Tool]) -> None:
    assert "'..' is not allowed" in err(fs, "read_file", path="src/../notes.txt")


def test_absolute_paths(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    message = err(fs, "read_file", path="/etc/passwd")
    assert "absolute paths must be inside the root" in message and "root:" not in message
    assert "absolute paths must be inside the root" in err(fs, "read_file", path=str(tree["outside"] / "secret.txt"))
    assert "absolute paths must be inside the root" in err(
        fs, "write_file", path="/tmp/toolfork-escape.txt", content="x"
    )
    assert not Path("/tmp/toolfork-escape.txt").exists()
    inside = ok(fs, "read_file", path=str(tree["root"] / "notes.txt"))
    assert inside.as_text().startswith("alpha")


def test_symlinks_out_of_the_root_are_refused(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    for tool_name, args in [
        ("read_file", {"path": "link_out"}),
        ("read_file", {"path": "dir_out/secret.txt"}),
        ("preview_file", {"path": "link_out"}),
        ("parse_file", {"path": "dir_out/secret.txt"}),
        ("describe_directory_content", {"path": "dir_out"}),
        ("grep_file_content", {"pattern": "SECRET", "path": "dir_out"}),
        ("edit_file", {"path": "link_out", "search": "TOP", "replace": "x"}),
        ("write_file", {"path": "dir_out/new.txt", "content": "x"}),
        ("write_file", {"path": "dangling_out", "content": "x"}),
        ("delete_file", {"path": "link_out"}),
    ]:
        message = err(fs, tool_name, **args)
        assert "outside the root directory through a symbolic link" in message, (tool_name, message)
        assert "TOP-SECRET" not in message
    assert (tree["outside"] / "secret.txt").read_text() == "TOP-SECRET-VALUE\n"
    assert not (tree["outside"] / "new.txt").exists()
    assert not (tree["outside"] / "not-yet.txt").exists()
    assert (tree["root"] / "link_out").is_symlink()


def test_walks_never_follow_links_out_of_the_root(fs: dict[str, Tool]) -> None:
    grep = ok(fs, "grep_file_content", pattern="SECRET").as_text()
    assert "TOP-SECRET" not in grep and grep.startswith("No match")
    globbed = ok(fs, "glob_path", pattern="**/*").as_text()
    assert "secret" not in globbed and "link_out" not in globbed and "dir_out" not in globbed
    assert "src/app.py" in globbed and "link_in" in globbed
    listing = ok(fs, "describe_directory_content", recursive=True).as_text()
    assert "link_out  [symlink -> (outside the root; not followed)]" in listing
    assert "dir_out/secret.txt" not in listing
    assert "link_in  [symlink -> notes.txt]" in listing


def test_symlink_inside_the_root_is_followed(fs: dict[str, Tool]) -> None:
    assert ok(fs, "read_file", path="link_in").as_text() == "alpha\nBeta line\ngamma\n"
    grep = ok(fs, "grep_file_content", pattern="gamma").as_text()
    assert "notes.txt:3: gamma" in grep and "link_in:3: gamma" in grep


def test_empty_and_nul_paths(fs: dict[str, Tool]) -> None:
    assert "path is empty" in err(fs, "read_file", path="  ")
    assert "NUL byte" in err(fs, "read_file", path="notes\x00.txt")


# ---------------------------------------------------------------- reading


def test_describe_directory_content(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    text = ok(fs, "describe_directory_content").as_text()
    assert "src/  [directory]" in text
    assert "notes.txt  [file, 22 B]" in text
    assert "src/app.py" not in text  # not recursive by default
    deep = ok(fs, "describe_directory_content", path="src", recursive=True).as_text()
    assert "src/pkg/util.py  [file," in deep and "src/app.py" in deep
    capped = ok(fs, "describe_directory_content", max_entries=2).as_text()
    assert "[truncated: showing the first 2 entries" in capped
    assert "is a file, not a directory" in err(fs, "describe_directory_content", path="notes.txt")
    assert "does not exist" in err(fs, "describe_directory_content", path="nope")
    assert "invalid max_entries 0" in err(fs, "describe_directory_content", max_entries=0)
    (tree["root"] / "empty").mkdir()
    assert ok(fs, "describe_directory_content", path="empty").as_text() == "empty is empty."


def test_read_file_truncates_and_continues(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    big = "".join(f"line {i:05d}\n" for i in range(20_000))  # 220 000 bytes
    (tree["root"] / "big.txt").write_text(big)
    first = ok(fs, "read_file", path="big.txt", max_bytes=1000).as_text()
    assert first.startswith("line 00000\n")
    assert "[truncated: showed bytes 0..1000 of 220000; call read_file with offset=1000 to read more]" in first
    second = ok(fs, "read_file", path="big.txt", max_bytes=1000, offset=1000).as_text()
    assert second.startswith(big[1000:1010])
    default = ok(fs, "read_file", path="big.txt").as_text()
    assert "of 220000" in default and len(default) < 100_200
    whole = ok(fs, "read_file", path="big.txt", max_bytes=300_000).as_text()
    assert whole == big
    assert "past the end" in err(fs, "read_file", path="big.txt", offset=10**7)
    assert "invalid max_bytes 0" in err(fs, "read_file", path="big.txt", max_bytes=0)


def test_read_file_never_splits_a_utf8_character(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    (tree["root"] / "utf8.txt").write_text("ab€cd")  # € is 3 bytes: a b [e2 82 ac] c d
    out = ok(fs, "read_file", path="utf8.txt", max_bytes=3).as_text()
    assert out.startswith("ab\n") and "offset=2" in out
    rest = ok(fs, "read_file", path="utf8.txt", offset=2).as_text()
    assert rest == "€cd"


def test_read_file_errors(fs: dict[str, Tool]) -> None:
    assert "does not exist" in err(fs, "read_file", path="missing.txt")
    assert "is a directory" in err(fs, "read_file", path="src")
    assert "binary file" in err(fs, "read_file", path="image.bin")


def test_preview_file(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    data = ok(fs, "preview_file", path="src/app.py", lines=2).data
    assert data["preview"] == "import os\n"
    assert data["line_count"] == 4 and data["size_bytes"] == 37 and data["type"] == "text/x-python"
    assert data["binary"] is False
    binary = ok(fs, "preview_file", path="image.bin").data
    assert binary["binary"] is True and binary["preview"] is None
    assert json.loads(ok(fs, "preview_file", path="notes.txt").as_text())["line_count"] == 3
    assert "invalid lines 0" in err(fs, "preview_file", path="notes.txt", lines=0)


def test_grep_file_content(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    out = ok(fs, "grep_file_content", pattern=r"def \w+").as_text()
    assert "src/app.py:3: def main():" in out and "src/pkg/util.py:1: def helper():" in out
    assert "image.bin" not in out
    case = ok(fs, "grep_file_content", pattern="beta", path="notes.txt", ignore_case=True).as_text()
    assert case == "notes.txt:2: Beta line"
    assert ok(fs, "grep_file_content", pattern="beta", path="notes.txt").as_text().startswith("No match")
    only_pkg = ok(fs, "grep_file_content", pattern="main", file_glob="src/pkg/*.py").as_text()
    assert only_pkg == "src/pkg/util.py:2:     return 'main'"
    (tree["root"] / "many.txt").write_text("hit\n" * 50)
    capped = ok(fs, "grep_file_content", pattern="hit", path="many.txt", max_matches=5).as_text()
    assert capped.count("many.txt:") == 5 and "[truncated: stopped at 5 matches" in capped
    assert "invalid regular expression '(unclosed'" in err(fs, "grep_file_content", pattern="(unclosed")
    assert "does not exist" in err(fs, "grep_file_content", pattern="x", path="nope")


def test_glob_path(fs: dict[str, Tool]) -> None:
    assert ok(fs, "glob_path", pattern="*.txt").as_text() == "notes.txt"
    assert ok(fs, "glob_path", pattern="**/*.py").as_text() == "src/app.py\nsrc/pkg/util.py"
    assert ok(fs, "glob_path", pattern="*.py", path="src/pkg").as_text() == "src/pkg/util.py"
    assert ok(fs, "glob_path", pattern="s?c").as_text() == "src/"
    assert ok(fs, "glob_path", pattern="[!s]*.txt").as_text() == "notes.txt"
    assert ok(fs, "glob_path", pattern="*.md").as_text().startswith("No path matches")
    assert "must be relative" in err(fs, "glob_path", pattern="../*")
    assert "must be relative" in err(fs, "glob_path", pattern="/etc/*")
    assert "[truncated" in ok(fs, "glob_path", pattern="**/*", max_results=2).as_text()


# ---------------------------------------------------------------- parsing HTML and PDF


def test_parse_html(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    (tree["root"] / "page.html").write_text(
        "<!DOCTYPE html><html><head><title>Quarterly Report</title><style>p{color:red}</style>"
        "<script>var secretToken = 'abc';</script></head><body><h1>Results</h1><p>Revenue grew "
        "<b>12%</b>.</p><ul><li>North</li><li>South</li></ul></body></html>"
    )
    text = ok(fs, "parse_file", path="page.html").as_text()
    assert text.startswith("Quarterly Report")
    assert "Results" in text and "Revenue grew" in text and "12%" in text and "South" in text
    assert "secretToken" not in text and "color:red" not in text and "<p>" not in text


def test_parse_pdf(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    (tree["root"] / "one.pdf").write_bytes(make_pdf(["Hello from a real PDF"]))
    assert ok(fs, "parse_file", path="one.pdf").as_text() == "Hello from a real PDF"
    (tree["root"] / "two.pdf").write_bytes(make_pdf(["First page text", "Second page (with parens)"]))
    two = ok(fs, "parse_file", path="two.pdf").as_text()
    assert "--- page 1 ---\nFirst page text" in two and "--- page 2 ---\nSecond page (with parens)" in two
    capped = ok(fs, "parse_file", path="two.pdf", max_chars=10).as_text()
    assert capped.startswith("--- page 1") and "[truncated: showed 10 of" in capped


def test_parse_pdf_failures(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    from pypdf import PdfReader, PdfWriter

    (tree["root"] / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    assert "not a readable PDF" in err(fs, "parse_file", path="broken.pdf")
    writer = PdfWriter(clone_from=PdfReader(_write(tree["root"] / "plain.pdf", make_pdf(["locked text"]))))
    writer.encrypt("pw", algorithm="RC4-128")
    with (tree["root"] / "locked.pdf").open("wb") as handle:
        writer.write(handle)
    assert "encrypted PDF" in err(fs, "parse_file", path="locked.pdf")
    assert "cannot extract text" in err(fs, "parse_file", path="image.bin")
    assert ok(fs, "parse_file", path="notes.txt").as_text() == "alpha\nBeta line\ngamma\n"


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


# ---------------------------------------------------------------- writing


def test_write_file(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    root = tree["root"]
    assert ok(fs, "write_file", path="out/deep/new.txt", content="héllo").as_text() == (
        "created out/deep/new.txt (6 bytes)"
    )
    assert (root / "out/deep/new.txt").read_text() == "héllo"
    assert ok(fs, "write_file", path="notes.txt", content="replaced").as_text().startswith("replaced notes.txt")
    assert (root / "notes.txt").read_text() == "replaced"
    assert "already exists" in err(fs, "write_file", path="notes.txt", content="x", overwrite=False)
    assert (root / "notes.txt").read_text() == "replaced"
    assert "does not exist" in err(fs, "write_file", path="nodir/x.txt", content="x", create_dirs=False)
    assert not (root / "nodir").exists()
    assert "is a directory" in err(fs, "write_file", path="src", content="x")


def test_edit_file(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    path = tree["root"] / "edit.txt"
    path.write_text("one fish two fish red fish\n")
    data = ok(fs, "edit_file", path="edit.txt", search="fish", replace="cat", count=2).data
    assert data == {"path": "edit.txt", "occurrences": 3, "replaced": 2}
    assert path.read_text() == "one cat two cat red fish\n"
    assert ok(fs, "edit_file", path="edit.txt", search="cat", replace="dog").data["replaced"] == 2
    assert path.read_text() == "one dog two dog red fish\n"
    assert "search text not found" in err(fs, "edit_file", path="edit.txt", search="bird", replace="x")
    assert "search text is empty" in err(fs, "edit_file", path="edit.txt", search="", replace="x")
    assert "invalid count 0" in err(fs, "edit_file", path="edit.txt", search="dog", replace="x", count=0)
    assert "does not exist" in err(fs, "edit_file", path="nope.txt", search="a", replace="b")
    assert path.read_text() == "one dog two dog red fish\n"


def test_delete_file(fs: dict[str, Tool], tree: dict[str, Path]) -> None:
    assert ok(fs, "delete_file", path="src/app.py").as_text() == "deleted src/app.py"
    assert not (tree["root"] / "src/app.py").exists()
    assert "is a directory" in err(fs, "delete_file", path="src")
    assert (tree["root"] / "src").is_dir()
    assert "does not exist" in err(fs, "delete_file", path="src/app.py")


def test_read_only_agent_cannot_reach_write_tools(tree: dict[str, Path]) -> None:
    tools = {t.name: t for t in FileSystemToolkit(tree["root"]).exclude(FileSystemToolkit.WRITE_TOOLS).tools()}
    assert not set(WRITE_TOOLS) & set(tools)


# ---------------------------------------------------------------- bash


def test_bash_runs_in_root_and_always_needs_approval(tree: dict[str, Path]) -> None:
    tools = kit_tools(tree["root"], allow_bash=True, bash_timeout=10)
    bash = tools["bash"]
    assert bash.approval_policy is not None
    reason = bash.approval_policy({"command": "rm -rf build"})
    assert isinstance(reason, str) and "rm -rf build" in reason and str(tree["root"]) in reason
    assert bash.timeout is not None and bash.timeout > 10
    out = ok(tools, "bash", command="pwd; ls; echo oops >&2; exit 3").as_text()
    assert out.startswith("exit code: 3")
    assert f"--- stdout ---\n{tree['root']}\n" in out and "notes.txt" in out
    assert "--- stderr ---\noops" in out


def test_bash_environment_does_not_leak_host_secrets(tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-show")
    tools = kit_tools(tree["root"], allow_bash=True)
    out = ok(tools, "bash", command="env").as_text()
    assert "sk-should-never-show" not in out and "PATH=" in out
    custom = kit_tools(tree["root"], allow_bash=True, bash_env={"PATH": os.environ["PATH"], "GREETING": "hi"})
    assert "hi" in ok(custom, "bash", command="echo $GREETING").as_text()


def test_bash_timeout_kills_the_command_and_its_children(tree: dict[str, Path]) -> None:
    tools = kit_tools(tree["root"], allow_bash=True, bash_timeout=5)
    pid_file = tree["root"] / "child.pid"
    message = err(tools, "bash", command=f"sleep 60 & echo $! > {pid_file}; echo started; wait", timeout=0.5)
    assert "timed out after 0.5 s" in message and "started" in message
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child), "the background child of the timed-out command survived"


def test_bash_bad_input(tree: dict[str, Path]) -> None:
    tools = kit_tools(tree["root"], allow_bash=True, bash_timeout=5)
    assert "command is empty" in err(tools, "bash", command="   ")
    assert "timeout must be between 0 and 5" in err(tools, "bash", command="true", timeout=50)
    assert "timeout must be between 0 and 5" in err(tools, "bash", command="true", timeout=0)
    huge = ok(tools, "bash", command="head -c 200000 /dev/zero | tr '\\0' 'x'").as_text()
    assert "[truncated: 200000 bytes in total]" in huge and len(huge) < 60_000
    with pytest.raises(ValueError, match="bash_timeout"):
        FileSystemToolkit(tree["root"], allow_bash=True, bash_timeout=0)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
