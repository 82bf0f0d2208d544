"""Rebuilding a value the other side pickled, without letting it end the reader.

Unpickling runs code from the other side (constructors, ``__setstate__``, ``__reduce__`` callables). A
frame that arrived whole but cannot be rebuilt (an exception class whose ``__init__`` takes other
arguments than its ``args``, a ``__setstate__`` that fails, a class the host cannot import) becomes the
marker ``("!", exception type name, message)`` in its place, and the reader goes on with the frames
after it. The message names the class that could not be rebuilt when it can be found. The caller turns
the marker into an error for the call the frame belonged to.
"""

from __future__ import annotations

import pickle
import pickletools
import re
from typing import Any

# The marker returned in place of a frame that could not be unpickled: ("!", type name, message).
BAD_FRAME = "!"
# A failed frame is scanned for the classes it refers to (to name the one that failed) up to this size.
_SCAN_LIMIT = 16 << 20


def loads_or_marker(data: bytes | bytearray | memoryview) -> Any:
    """``pickle.loads(data)``, or the marker ``("!", type name, message)`` if that raises.

    Unpickling runs code from the other side (constructors, ``__setstate__``, ``__reduce__``
    callables), so anything it raises short of KeyboardInterrupt is caught, ``SystemExit`` included:
    a value must not be able to end the host by being rebuilt."""
    try:
        return pickle.loads(data)
    except (Exception, SystemExit, GeneratorExit) as exc:
        return bad_frame_marker(data, exc)


def bad_frame_marker(data: bytes | bytearray | memoryview, exc: BaseException) -> tuple[str, str, str]:
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    culprit = _culprit(data, text)
    what = f"a value of type {culprit}" if culprit else "a value"
    message = f"{what} sent by the worker could not be rebuilt in the host: {type(exc).__name__}: {text}"
    return (BAD_FRAME, type(exc).__name__, message)


_NAMED = re.compile(r"([A-Za-z_][\w.]*?)(?:\.__init__|\.__new__|\.__setstate__|\.__reduce__)?\(\)")


def _culprit(data: bytes | bytearray | memoryview, text: str) -> str | None:
    """The ``module.qualname`` of the class the failure is about: a class the frame refers to whose
    name the exception text mentions (``E.__init__() missing 1 required positional argument``), else
    the last class of the frame outside the standard containers; None when nothing is found."""
    classes = _classes_in(data)
    mentioned = {m.group(1) for m in _NAMED.finditer(text)}
    mentioned |= set(re.findall(r"'([A-Za-z_][\w.]*)'", text))  # e.g. Can't get attribute 'E' on <module>
    for module, qualname in reversed(classes):
        if qualname in mentioned or qualname.rsplit(".", 1)[-1] in mentioned:
            return f"{module}.{qualname}"
    for module, qualname in reversed(classes):
        if module not in ("builtins", "copyreg", "collections", "_codecs") and not module.startswith("toolfork."):
            return f"{module}.{qualname}"
    return None


def _classes_in(data: bytes | bytearray | memoryview) -> list[tuple[str, str]]:
    """(module, qualname) of every global a pickle refers to, in order; [] if it cannot be scanned."""
    if len(data) > _SCAN_LIMIT:
        return []
    found: list[tuple[str, str]] = []
    strings: list[str] = []  # strings pushed so far (their order is what STACK_GLOBAL needs)
    memo: dict[int, str | None] = {}
    last: str | None = None  # the string on top of the stack, if the last push was one
    try:
        for op, arg, _pos in pickletools.genops(bytes(data)):
            name = op.name
            if name in ("GLOBAL", "INST"):
                module, _, qualname = str(arg).partition(" ")
                found.append((module, qualname))
                last = None
            elif name == "STACK_GLOBAL":
                if len(strings) >= 2:
                    found.append((strings[-2], strings[-1]))
                last = None
            elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
                last = str(arg)
                strings.append(last)
            elif name == "MEMOIZE":
                memo[len(memo)] = last
            elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
                memo[int(arg or 0)] = last
            elif name in ("BINGET", "LONG_BINGET", "GET"):
                last = memo.get(int(arg or 0))
                if last is not None:
                    strings.append(last)
            elif name != "FRAME":
                last = None
    except Exception:  # a truncated or odd pickle: keep what was found
        pass
    return found


__all__ = ["BAD_FRAME", "bad_frame_marker", "loads_or_marker"]
