"""``@tool`` keeps the function's signature for type checkers: mypy, run on a user's snippet in a
subprocess, sees a decorated function as a Tool that is callable with the original parameters.

mypy follows only toolfork's modules (and the standard library's stubs); other packages' modules are
skipped, i.e. Any. What is revealed here is built from toolfork's classes and ``typing`` alone, so it
is the same either way, at about a tenth of the time; and a plain function assigned to ``Tool`` must
still be an error (it would not be if ``Tool`` itself had become Any).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SNIPPET = '''
from toolfork import Tool, tool


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool(timeout=5)
def greet(name: str, excited: bool = False) -> str:
    """Greet."""
    return name


@tool("lookup")
async def lookup(key: str) -> bytes:
    """Look up."""
    return b""


as_tool: Tool = add
reveal_type(add)
reveal_type(add(1, 2))
reveal_type(greet(name="x"))
reveal_type(lookup)
reveal_type(add.name)
add("x", 2)
greet(1)
not_a_tool: Tool = len
'''
# Only toolfork is followed (silently: its own errors are the package's mypy run's business).
MYPY_CONFIG = """\
[mypy]
follow_imports = skip
follow_imports_for_stubs = False
[mypy-toolfork.*]
follow_imports = silent
"""


def test_mypy_sees_the_decorated_functions_signature(tmp_path: Path) -> None:
    (tmp_path / "snippet.py").write_text(SNIPPET)
    (tmp_path / "mypy.ini").write_text(MYPY_CONFIG)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--no-incremental", "--show-error-codes",
         "--cache-dir", str(tmp_path / "cache"), "snippet.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO), "MYPYPATH": str(REPO)})
    notes = re.findall(r'snippet\.py:(\d+): note: Revealed type is "(.*)"', done.stdout)
    errors = re.findall(r"snippet\.py:(\d+): error: (.*)", done.stdout)
    lines = SNIPPET.splitlines()
    reveals = [str(n) for n, text in enumerate(lines, 1) if text.startswith("reveal_type(")]
    wrong = ('add("x", 2)', "greet(1)", "not_a_tool: Tool = len")
    misuses = [str(n) for n, text in enumerate(lines, 1) if text in wrong]
    assert [line for line, _ in notes] == reveals and len(reveals) == 5, done.stdout + done.stderr
    revealed = [text.replace("builtins.", "") for _, text in notes]  # older mypy names builtins in full
    assert re.fullmatch(r"toolfork\.tools\.decorator\.FunctionTool\[\[a: int, b: int\], int\]", revealed[0])
    assert revealed[1:3] == ["int", "str"]
    assert re.fullmatch(r"toolfork\.tools\.decorator\.FunctionTool\[\[key: str\], "
                        r"typing\.Coroutine\[Any, Any, bytes\]\]", revealed[3])
    assert revealed[4] == "str"
    # wrong arguments are caught, and nothing else is an error (Tool-ness kept: `as_tool: Tool = add`)
    assert [line for line, _ in errors] == misuses, done.stdout
    assert 'incompatible type "str"; expected "int"' in errors[0][1]
    assert 'incompatible type "int"; expected "str"' in errors[1][1]
    assert errors[2][1].startswith("Incompatible types in assignment") and '"Tool"' in errors[2][1], errors[2][1]
