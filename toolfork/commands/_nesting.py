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

_STRINGS_STR = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_STRINGS_BYTES = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS_STR = re.compile(r"[\[\]{}]")
_BRACKETS_BYTES = re.compile(rb"[\[\]{}]")
_STEP: dict[str | bytes, int] = {"[": 1, "{": 1, "]": -1, "}": -1, b"[": 1, b"{": 1, b"]": -1, b"}": -1}


def nested_deeper_than(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON ``text`` opens more than ``limit`` arrays or objects inside one another (brackets
    inside strings do not count)."""
    if isinstance(text, str):
        if text.count("[") + text.count("{") <= limit:
            return False
        brackets: list[str] | list[bytes] = _BRACKETS_STR.findall(_STRINGS_STR.sub("", text))
    else:
        if text.count(b"[") + text.count(b"{") <= limit:
            return False
        brackets = _BRACKETS_BYTES.findall(_STRINGS_BYTES.sub(b"", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


__all__ = ["MAX_JSON_DEPTH", "nested_deeper_than"]
