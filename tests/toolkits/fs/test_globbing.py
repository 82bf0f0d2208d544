"""toolkits/fs/globbing: the linear-time matcher agrees with a backtracking reference on every
pattern it shares with it, and stays linear on patterns that make backtracking explode."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfork.toolkits.fs.errors import FileSystemError
from toolfork.toolkits.fs.globbing import Glob


def reference(pattern: str) -> re.Pattern[str]:
    """The translation the toolkit used before (correct, but exponential on some patterns)."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


@settings(max_examples=400, deadline=None)
@given(st.text("ab/*?", max_size=9), st.text("ab/", max_size=9))
def test_agrees_with_the_backtracking_reference(pattern: str, path: str) -> None:
    assert Glob(pattern).match(path) == bool(reference(pattern).match(path)), (pattern, path)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "app.py", True),
        ("*.py", "src/app.py", False),
        ("**/*.py", "app.py", True),
        ("**/*.py", "src/pkg/app.py", True),
        ("src/**", "src/a/b", True),
        ("s?c", "src", True),
        ("s?c", "s/c", False),
        ("[!s]*.txt", "notes.txt", True),
        ("[!s]*.txt", "secret.txt", False),
        ("[a-c]x", "bx", True),
        ("[a-c]x", "dx", False),
        ("[/]x", "/x", False),  # a set never matches the separator
        ("[unclosed", "[unclosed", True),
        ("***", "abc", True),
    ],
)
def test_syntax(pattern: str, path: str, expected: bool) -> None:
    assert Glob(pattern).match(path) is expected


def test_patterns_that_explode_a_backtracking_engine_stay_linear() -> None:
    # With the regex translation the first of these took seconds, the others far longer; here each is
    # at most len(pattern) x len(path) steps. Asserted by outcome: they finish and do not match.
    path = "/".join(["a" * 60] * 3 + ["a" * 200])
    for pattern in ["*a" * 28 + "*b", "**/" + "*a" * 200 + "*b", "?*" * 300 + "b"]:
        assert Glob(pattern).match(path) is False


def test_limits() -> None:
    with pytest.raises(FileSystemError, match="the limit is 1000"):
        Glob("*" * 1001)
    with pytest.raises(FileSystemError, match="too wide"):
        Glob("[\x00-\U0010ffff]")
