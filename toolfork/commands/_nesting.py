"""How deeply a JSON text nests, decided the same way on every Python.

Whether ``json.loads`` or ``json.dumps`` manage a deeply nested value depends on the interpreter (3.13
copes with thousands of levels where 3.11 raises ``RecursionError`` near a thousand), so a limit left
to the interpreter would make the same input line a refused line on one Python and a call on another,
and would let one Python write an output line that a reader on another cannot parse. The run command
therefore sets the limit itself and checks it here, before parsing a line and after writing a record.

The check is cheap where it matters: two ``count`` calls rule out almost every text, and only a text
with more opening brackets than the limit is scanned (strings skipped, in C where it can be).
"""

from __future__ import annotations

import re
from itertools import accumulate

MAX_JSON_DEPTH = 512  # deeper than any real call or result, well inside every interpreter's own limit

_STRINGS = {str: re.compile(r'"(?:[^"\\]|\\.)*"', re.S), bytes: re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)}
_BRACKETS = {str: re.compile(r"[\[\]{}]"), bytes: re.compile(rb"[\[\]{}]")}
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1, b"[": 1, b"{": 1, b"]": -1, b"}": -1}


def nested_deeper_than(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON ``text`` opens more than ``limit`` arrays or objects inside one another (brackets
    inside strings do not count)."""
    if isinstance(text, str):
        opening = text.count("[") + text.count("{")
    else:
        opening = text.count(b"[") + text.count(b"{")
    if opening <= limit:
        return False
    kind = type(text)
    brackets = _BRACKETS[kind].findall(_STRINGS[kind].sub(b"" if kind is bytes else "", text))  # type: ignore[arg-type]
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


__all__ = ["MAX_JSON_DEPTH", "nested_deeper_than"]
