"""Glob patterns with ``**``, matched in linear time.

A glob translated to a regular expression (``[^/]*a[^/]*a...``) makes Python's backtracking engine
try every split of the path: a 57-character pattern took seconds on one short path. Here a pattern
is a list of tokens and a path is matched by keeping the set of token positions still possible
(a Thompson-style simulation), so a match costs at most len(pattern) x len(path) steps, whatever
the pattern.

The syntax: ``*`` any run of characters but ``/``; ``?`` one character but ``/``; ``[abc]``,
``[a-z]``, ``[!abc]`` one character of (or not of) a set; ``**/`` any number of whole directories
(zero included); ``**`` elsewhere any run of characters, ``/`` included. Everything else is literal.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import FileSystemError

__all__ = ["MAX_PATTERN_CHARS", "Glob"]

MAX_PATTERN_CHARS = 1000

_LITERAL, _ONE, _SET, _STAR, _ANY, _DIRS = range(6)


@dataclass(frozen=True)
class _Token:
    kind: int
    text: str = ""  # the literal character, or the set's members
    negated: bool = False

    def takes(self, char: str) -> bool:
        """Whether this token consumes ``char`` and moves on (the single-character tokens)."""
        if self.kind == _LITERAL:
            return char == self.text
        if self.kind == _ONE:
            return char != "/"
        if self.kind == _SET:
            return char != "/" and (char in self.text) != self.negated
        return False


def _set_members(body: str) -> str:
    """The characters of a bracket expression's body, ranges (``a-z``) spelled out."""
    out: list[str] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            low, high = body[i], body[i + 2]
            if ord(high) - ord(low) > 0x10000:
                raise FileSystemError(f"character range {low}-{high} in the glob is too wide")
            out.extend(chr(c) for c in range(ord(low), ord(high) + 1))
            i += 3
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def _tokens(pattern: str) -> list[_Token]:
    out: list[_Token] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append(_Token(_DIRS))
            i += 3
        elif pattern.startswith("**", i):
            out.append(_Token(_ANY))
            i += 2
        elif pattern[i] == "*":
            if not out or out[-1].kind != _STAR:  # '***' is '*' twice: one is the same
                out.append(_Token(_STAR))
            i += 1
        elif pattern[i] == "?":
            out.append(_Token(_ONE))
            i += 1
        elif pattern[i] == "[" and (close := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : close]
            negated = body.startswith("!")
            out.append(_Token(_SET, _set_members(body[1:] if negated else body), negated))
            i = close + 1
        else:
            out.append(_Token(_LITERAL, pattern[i]))
            i += 1
    return out


class Glob:
    """A compiled glob; ``match(path)`` says whether a '/'-joined relative path matches it whole."""

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_PATTERN_CHARS:
            raise FileSystemError(
                f"glob pattern is {len(pattern)} characters long; the limit is {MAX_PATTERN_CHARS}"
            )
        self.pattern = pattern
        self._tokens = _tokens(pattern)

    def _closure(self, states: set[int]) -> set[int]:
        """Add the positions reachable without consuming a character (a star may match nothing)."""
        todo = [i for i in states if i >= 0]
        while todo:
            i = todo.pop()
            if i < len(self._tokens) and self._tokens[i].kind in (_STAR, _ANY, _DIRS) and i + 1 not in states:
                states.add(i + 1)
                todo.append(i + 1)
        return states

    def match(self, path: str) -> bool:
        # A state is a token position; ``~i`` (negative) is "inside a directory name of the '**/' at i",
        # from where only a '/' leads back to a position (a '**/' is whole directories or nothing).
        tokens = self._tokens
        end = len(tokens)
        states = self._closure({0})
        for char in path:
            following: set[int] = set()
            for i in states:
                if i < 0:
                    following.add(~i if char == "/" else i)
                    continue
                if i == end:
                    continue
                token = tokens[i]
                if token.kind == _STAR:
                    if char != "/":
                        following.add(i)
                elif token.kind == _ANY:
                    following.add(i)
                elif token.kind == _DIRS:
                    following.add(i if char == "/" else ~i)
                elif token.takes(char):
                    following.add(i + 1)
            if not following:
                return False
            states = self._closure(following)
        return end in states
