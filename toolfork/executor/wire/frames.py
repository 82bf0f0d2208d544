"""What crosses a worker's pipes: the frame header and the kinds of frame, each encoder beside its decoder.

A frame is ``header + pickle``. The header is 8 bytes: a fixed tag and the pickle's length. The tag is
there because a worker's pipes are descriptors a tool can reach (a native library with a stale fd, a
tool that writes into every fd it finds): bytes that were not written as a frame must be seen as such
at once, not read as a length that makes the reader wait for gigabytes. The tag holds a NUL and a byte
above 0x7f, so text written by mistake never carries it, and the reader also refuses a length above
its bound (``FrameReader``'s ``max_frame``). A header of length 0 says "this frame is on the side socket,
in a memory file" (see ``oob``).

The frames are tuples whose first item is their kind (one letter, cheap to pickle and compare)::

    host -> worker   CALLS   ("c", [CallItem, ...])                  see ``wire.callitem``
                     LINES   ("l", parse, context, [(call_id, name, raw, arguments, timeout, lineno, meta), ...])
                             the line lane: ``raw`` input lines the worker parses itself
                     TOOLS   ("t", dill bytes of {name: Tool})       tools added after start
                     HOST_ANSWER ("a", status, value, message)       a session's host call answered
                                                                     (see ``fork.host_line``)
    worker -> host   RESULT  ("r", seq, status, output, error, duration_s, context_updates)
                     TEXT    ("o", seq, text, data, duration_s)      an ok result of one plain text block
                     ENCODED ("e", seq, line, duration_s)            an ok result already encoded as bytes
                     PROGRESS ("p", seq, value)                      while the call runs
                     SPANS   ("s", seq, [span data, ...])            the spans the traced call's tool
                                                                     finished (``tracing.spandata``),
                                                                     right before its result
                     MISMATCH ("m", seq)                             a lane line that is not the call the
                                                                     host took it for (not run)
                     LEAVING ("x", seq, message)                     this call's result is an error: its
                                                                     tool damaged the worker's channels,
                                                                     and the worker leaves after it
                     HOST_CALL ("h", seq, name, arguments)           a session's call asks the host to run
                                                                     one of its host tools, and waits
    in the host      BAD_FRAME ("!", type name, message)             a frame that could not be rebuilt

Every frame a worker sends is bound to one call by ``seq``: the call's place among the calls that worker
was sent (0 for its first; both sides count, so nothing is added to the calls' frames). The host takes a
worker's frames with ``decode``, which checks each one's shape and returns one of the named messages
below (``Progress``, ``Result``, ``TextResult``, ``EncodedResult``, ``Mismatch``, ``Leaving``), or None;
the worker core then checks ``seq`` against the worker's calls in flight, in order (see
``fork.core.WorkerCore.read``). The wire stays compact tuples: a named tuple would pickle its class's
name into every frame. A tool can read its worker's memory, so nothing here is a secret: ``seq`` binds a
frame to a call, it does not prove who wrote it.

A worker that cannot even send LEAVING (its result pipe is gone) exits with ``EXIT_CHANNEL_DAMAGED``,
which the host names in the call's "crashed" result.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, NamedTuple

from toolfork.executor.types import STATUSES, ErrorInfo, ToolResult
from toolfork.executor.wire.callitem import CallItem
from toolfork.executor.wire.markers import BAD_FRAME
from toolfork.tools.output import ContentBlock, ToolOutput

# -------------------------------------------------------------------------------------------- header

MAGIC = 0x00_66_74_F7  # on the wire (little-endian): F7 74 66 00
HEADER = struct.Struct("<II")  # tag, length
HEADER_SIZE = HEADER.size
MAX_FRAME = 0xFFFF_FFFF  # 4 GiB minus one: larger payloads are refused with a clear error
OOB_HEADER = HEADER.pack(MAGIC, 0)  # "the frame is on the side socket"

EXIT_CHANNEL_DAMAGED = 75  # a worker whose result pipe a tool closed or replaced exits with this


class FrameTooLarge(ValueError):
    pass


class ChannelDamaged(OSError):
    """Bytes on a worker's pipe or side socket that are not a frame (or a frame that is not there)."""


def frame(payload: bytes | bytearray) -> bytes:
    """Header and pickle: one frame for the pipe; raises FrameTooLarge without side effects."""
    if len(payload) > MAX_FRAME:
        raise FrameTooLarge(f"a frame of {len(payload)} bytes exceeds the {MAX_FRAME}-byte limit")
    return HEADER.pack(MAGIC, len(payload)) + payload


def check_header(tag: int, length: int, max_frame: int) -> None:
    """Raise ChannelDamaged unless ``tag``/``length`` (unpacked from a header) can start a frame."""
    if tag != MAGIC:
        raise ChannelDamaged(f"bytes that are not a toolfork frame (header {HEADER.pack(tag, length)!r}): "
                             "something other than the worker wrote into its pipe")
    if length > max_frame:
        raise ChannelDamaged(f"a frame header announced {length} bytes, over this pipe's bound of {max_frame}")


def exit_description(code: int) -> str | None:
    """What a worker's exit code says about its channels, if it says anything (see ``describe_exit``)."""
    if code == EXIT_CHANNEL_DAMAGED:
        return ("the tool closed or replaced the descriptors the worker talks to the host through, so "
                "the worker could not send its result and left")
    return None


# ---------------------------------------------------------------------------------------- frame kinds

CALLS = "c"
LINES = "l"
TOOLS = "t"
RESULT = "r"
TEXT = "o"
ENCODED = "e"
PROGRESS = "p"
MISMATCH = "m"
LEAVING = "x"
SPANS = "s"
HOST_CALL = "h"
HOST_ANSWER = "a"
RESULT_KINDS = frozenset((RESULT, TEXT, ENCODED, LEAVING))

_HIGHEST = pickle.HIGHEST_PROTOCOL


# host -> worker: the worker decodes these by unpacking them in place (see fork.worker._serve).

def calls_frame(items: list[CallItem]) -> tuple[Any, ...]:
    return (CALLS, items)


def lines_frame(parse: Any, context: dict[str, Any] | None, items: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    return (LINES, parse, context, items)


def tools_frame(blob: bytes) -> tuple[Any, ...]:
    return (TOOLS, blob)


# worker -> host: the worker builds the compact tuples; the host decodes each into its named message.

def result_frame(seq: int, result: ToolResult, encode: Any = None) -> tuple[Any, ...]:
    """The frame of one finished call: ENCODED when ``encode`` made bytes of a clean ok result, TEXT for
    an ok result with one plain text block and nothing else (half the pickling cost), else RESULT."""
    if encode is not None:
        encoded = _encoded(encode, seq, result)
        if encoded is not None:
            return encoded
    out = result.output
    if result.status == "ok" and out is not None and not out.is_error and not result.context_updates \
            and len(out.content) == 1:
        block = out.content[0]
        if block.type == "text" and block.data is None and block.url is None and block.media_type is None \
                and block.name is None and type(block.text) is str:  # a str subclass crosses in a RESULT
            return (TEXT, seq, block.text, out.data, result.duration_s)
    return (RESULT, seq, result.status, result.output, result.error, result.duration_s, result.context_updates)


def leaving_frame(seq: int, what: str) -> tuple[Any, ...]:
    """The last frame of a worker whose channels the call damaged: ``what`` the tool did."""
    return (LEAVING, seq, what)


def progress_frame(seq: int, value: Any) -> tuple[Any, ...]:
    return (PROGRESS, seq, value)


def mismatch_frame(seq: int) -> tuple[Any, ...]:
    return (MISMATCH, seq)


def spans_frame(seq: int, spans: list[Any]) -> tuple[Any, ...]:
    return (SPANS, seq, spans)


def host_call_frame(seq: int, name: str, arguments: dict[str, Any]) -> tuple[Any, ...]:
    return (HOST_CALL, seq, name, arguments)


def host_answer_frame(status: str, value: Any, message: str | None) -> tuple[Any, ...]:
    return (HOST_ANSWER, status, value, message)


class Progress(NamedTuple):
    """PROGRESS: a value the running call emitted."""

    seq: int
    value: Any


class Spans(NamedTuple):
    """SPANS: the spans a traced call's tool finished, as plain data (sent right before its result)."""

    seq: int
    spans: list[Any]


class Result(NamedTuple):
    """RESULT: a finished call's result, field by field."""

    seq: int
    status: str
    output: ToolOutput | None
    error: ErrorInfo | None
    duration_s: float
    context_updates: dict[str, Any] | None

    def rebuilt(self, call_id: str, name: str, pid: int | None) -> ToolResult:
        return ToolResult(call_id, name, self.status, self.output, self.error,  # type: ignore[arg-type]
                          self.duration_s, pid, self.context_updates)


class TextResult(NamedTuple):
    """TEXT: an ok result of one plain text block (and the output's data)."""

    seq: int
    text: str
    data: Any
    duration_s: float

    def rebuilt(self, call_id: str, name: str, pid: int | None) -> ToolResult:
        return ToolResult(call_id, name, "ok", ToolOutput([ContentBlock("text", self.text)], False, self.data),
                          None, self.duration_s, pid)


class EncodedResult(NamedTuple):
    """ENCODED: an ok result the worker already encoded as an output line."""

    seq: int
    line: bytes
    duration_s: float

    def rebuilt(self, call_id: str, name: str, pid: int | None) -> ToolResult:
        return ToolResult(call_id, name, "ok", None, None, self.duration_s, pid, None, self.line)


class Mismatch(NamedTuple):
    """MISMATCH: a lane line that is not the call the host took it for; it was not run."""

    seq: int

    def rebuilt(self, call_id: str, name: str, pid: int | None) -> ToolResult:
        """Only the line lane sends lines: to any other client this is a frame its call did not ask for."""
        return ToolResult(call_id, name, "error", worker_pid=pid, error=ErrorInfo(
            "ChannelDamaged", f"tool '{name}' failed: its worker answered that it was sent another call"))


class HostCall(NamedTuple):
    """HOST_CALL: the running call of a session asks the host to run its tool ``name`` (a host tool)."""

    seq: int
    name: str
    arguments: dict[str, Any]

    def rebuilt(self, call_id: str, name: str, pid: int | None) -> ToolResult:
        """Only a session's link answers host calls: to the pool it is a frame its call did not ask for."""
        return ToolResult(call_id, name, "error", worker_pid=pid, error=ErrorInfo(
            "ChannelDamaged", f"tool '{name}' failed: it asked the host to run tool {self.name!r}, which only a "
                              "call of a session opened with host_tools may; its worker was replaced"))


class Leaving(NamedTuple):
    """LEAVING: the call's result is an error (its tool damaged the worker's channels); the worker goes."""

    seq: int
    message: str

    def rebuilt(self, call_id: str, name: str, pid: int | None) -> ToolResult:
        return ToolResult(call_id, name, "error", worker_pid=pid, error=ErrorInfo(
            "ChannelDamaged", f"tool '{name}' {self.message}; its worker was replaced"))


Message = Progress | Spans | Result | TextResult | EncodedResult | Mismatch | Leaving | HostCall
ResultMessage = Result | TextResult | EncodedResult | Mismatch | Leaving | HostCall
# A worker whose call sent one of these is replaced after the call's result: LEAVING (its channels are
# damaged), HOST_CALL to the pool (only a session's link answers one; the worker would wait for an answer).
WORKER_GOES = frozenset((Leaving, HostCall))
_NUMBER = (float, int)
_STATUSES = frozenset(STATUSES)


# A message's fields are its frame's after the kind, in order: a result's message is made from the checked
# frame in one step (a NamedTuple's own ``__new__`` is a Python function: a frame more per result). A
# result's ``rebuilt`` passes ToolResult's fields by position, in their declared order (call_id, name,
# status, output, error, duration_s, worker_pid, context_updates, encoded): a keyword costs every result.
_new = tuple.__new__


def decode(f: Any) -> Message | None:
    """The named message a worker's frame stands for, or None when it is not the shape of one (not a
    tuple, an unknown kind, a field of the wrong type or number): one branch per kind, each checking
    the fields it reads, the kinds every call sends first."""
    if type(f) is not tuple or len(f) < 2 or type(f[1]) is not int:
        return None
    kind = f[0]
    if type(kind) is not str:
        return None
    n = len(f)
    if kind == TEXT:
        if n == 5 and type(f[2]) is str and type(f[4]) in _NUMBER:
            return _new(TextResult, f[1:])  # type: ignore[no-any-return]
    elif kind == RESULT:
        if n == 7 and type(f[2]) is str and f[2] in _STATUSES and (f[3] is None or isinstance(f[3], ToolOutput)) \
                and (f[4] is None or isinstance(f[4], ErrorInfo)) and type(f[5]) in _NUMBER \
                and (f[6] is None or type(f[6]) is dict):
            return _new(Result, f[1:])  # type: ignore[no-any-return]
    elif kind == ENCODED:
        if n == 4 and type(f[2]) is bytes and type(f[3]) in _NUMBER:
            return _new(EncodedResult, f[1:])  # type: ignore[no-any-return]
    elif kind == PROGRESS:
        if n == 3:
            return Progress(f[1], f[2])
    elif kind == SPANS:
        if n == 3 and type(f[2]) is list:
            return Spans(f[1], f[2])
    elif kind == MISMATCH:
        if n == 2:
            return Mismatch(f[1])
    elif kind == LEAVING:
        if n == 3 and type(f[2]) is str:
            return Leaving(f[1], f[2])
    elif kind == HOST_CALL:
        if n == 4 and type(f[2]) is str and type(f[3]) is dict:
            return HostCall(f[1], f[2], f[3])
    return None


def describe_shape(f: Any) -> str:
    """A short description of a frame ``decode`` refused (for the error it becomes)."""
    text = repr(f)
    return f"a frame of the wrong shape ({text[:80] + '...' if len(text) > 80 else text})"


def unreadable_result(call_id: str, name: str, f: tuple[Any, ...], pid: int | None, duration: float) -> ToolResult:
    """The decoder of a ``BAD_FRAME`` marker in place of a result: a value the host could not unpickle."""
    return ToolResult(call_id, name, "error", worker_pid=pid, duration_s=duration, error=ErrorInfo(
        f[1], f"the result of tool '{name}' could not be rebuilt in the host: {f[2]}"))


def damaged_result(call_id: str, name: str, reason: str, pid: int | None, duration: float) -> ToolResult:
    """A call whose worker's pipe or side socket carried something that is not a frame."""
    return ToolResult(call_id, name, "error", worker_pid=pid, duration_s=duration, error=ErrorInfo(
        "ChannelDamaged", f"tool '{name}' failed: its worker's channel to the host carried {reason}; the worker "
        "was replaced"))


def _encoded(encode: Any, seq: int, result: ToolResult) -> tuple[Any, ...] | None:
    """The ENCODED frame of a clean ok result (no error output, no context updates) that ``encode``
    turned into bytes, else None: the other results, and any whose encoding failed, cross as themselves."""
    out = result.output
    if result.status != "ok" or out is None or out.is_error or result.context_updates:
        return None
    try:
        line = encode(result)
    except Exception:  # the host encodes it again and reports what is wrong there
        return None
    if type(line) is not bytes:
        return None
    return (ENCODED, seq, line, result.duration_s)


def looks_large(out: tuple[Any, ...], large: int) -> bool:
    """Whether a result frame holds text or media data of ``large`` characters or more (looked at
    without pickling: the common large results are one big str)."""
    kind = out[0]
    if kind == TEXT or kind == ENCODED:
        return len(out[2]) >= large
    if kind != RESULT:
        return False
    output = out[3]
    if output is None:
        return False
    size = 0
    for block in output.content:
        size += len(block.text or "") + len(block.data or "")
    return size >= large


__all__ = ["BAD_FRAME", "CALLS", "ENCODED", "EXIT_CHANNEL_DAMAGED", "HEADER", "HEADER_SIZE", "LEAVING", "LINES",
           "MAGIC", "MAX_FRAME", "MISMATCH", "OOB_HEADER", "PROGRESS", "RESULT", "RESULT_KINDS", "SPANS", "TEXT",
           "TOOLS", "ChannelDamaged", "EncodedResult", "FrameTooLarge", "Leaving", "Message", "Mismatch", "Progress",
           "Result", "ResultMessage", "Spans", "TextResult", "calls_frame", "check_header", "damaged_result",
           "decode", "describe_shape", "exit_description", "frame", "leaving_frame", "lines_frame", "looks_large",
           "mismatch_frame", "progress_frame", "result_frame", "spans_frame", "tools_frame", "unreadable_result"]
