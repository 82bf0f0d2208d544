"""What crosses a worker's pipes: the frame header and the kinds of frame, each encoder beside its decoder.

A frame is ``header + pickle``. The header is 8 bytes: a fixed tag and the pickle's length. The tag is
there because a worker's pipes are descriptors a tool can reach (a native library with a stale fd, a
tool that writes into every fd it finds): bytes that were not written as a frame must be seen as such
at once, not read as a length that makes the reader wait for gigabytes. The tag holds a NUL and a byte
above 0x7f, so text written by mistake never carries it, and the reader also refuses a length above
its bound (``FrameReader``'s ``max_frame``). A header of length 0 says "this frame is on the side socket,
in a memory file" (see ``oob``).

The frames are tuples whose first item is their kind (one letter, cheap to pickle and compare)::

    host -> worker   CALLS   ("c", [(call_id, name, arguments, timeout, context), ...])
                     LINES   ("l", parse, context, [(call_id, name, raw, arguments, timeout, lineno), ...])
                             the line lane: ``raw`` input lines the worker parses itself
                     TOOLS   ("t", dill bytes of {name: Tool})       tools added after start
    worker -> host   RESULT  ("r", call_id, status, output, error, duration_s, context_updates)
                     TEXT    ("o", call_id, text, data, duration_s)  an ok result of one plain text block
                     ENCODED ("e", call_id, line, duration_s)        an ok result already encoded as bytes
                     PROGRESS ("p", call_id, value)                  while the call runs
                     MISMATCH ("m", call_id)                         a lane line that is not the call the
                                                                     host took it for (not run)
                     LEAVING ("x", call_id, message)                 this call's result is an error: its
                                                                     tool damaged the worker's channels,
                                                                     and the worker leaves after it
    in the host      BAD_FRAME ("!", type name, message)             a frame that could not be rebuilt

A worker that cannot even send LEAVING (its result pipe is gone) exits with ``EXIT_CHANNEL_DAMAGED``,
which the host names in the call's "crashed" result.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

from toolfork.executor.types import ErrorInfo, ToolResult
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
RESULT_KINDS = frozenset((RESULT, TEXT, ENCODED, LEAVING))

_HIGHEST = pickle.HIGHEST_PROTOCOL


# host -> worker: the worker decodes these by unpacking them in place (see fork.worker._serve).

def calls_frame(items: list[tuple[str, str, Any, float | None, dict[str, Any] | None]]) -> tuple[Any, ...]:
    return (CALLS, items)


def lines_frame(parse: Any, context: dict[str, Any] | None, items: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    return (LINES, parse, context, items)


def tools_frame(blob: bytes) -> tuple[Any, ...]:
    return (TOOLS, blob)


# worker -> host

def result_frame(call_id: str, result: ToolResult, encode: Any = None) -> tuple[Any, ...]:
    """The frame of one finished call: ENCODED when ``encode`` made bytes of a clean ok result, TEXT for
    an ok result of one plain text block (half the pickling cost), else RESULT."""
    return (encode is not None and _encoded(encode, call_id, result)) or _text(call_id, result) or (
        RESULT, call_id, result.status, result.output, result.error, result.duration_s, result.context_updates)


def rebuilt_result(f: tuple[Any, ...], name: str, pid: int | None) -> tuple[ToolResult, float]:
    """The result a worker's result frame stands for, and its duration (the decoder of ``result_frame``
    and of ``leaving_frame``)."""
    kind, cid = f[0], f[1]
    if kind == TEXT:
        return ToolResult(cid, name, "ok", output=ToolOutput([ContentBlock("text", f[2])], False, f[3]),
                          duration_s=f[4], worker_pid=pid), f[4]
    if kind == ENCODED:
        return ToolResult(cid, name, "ok", duration_s=f[3], worker_pid=pid, encoded=f[2]), f[3]
    if kind == LEAVING:
        return ToolResult(cid, name, "error", worker_pid=pid, error=ErrorInfo(
            "ChannelDamaged", f"tool '{name}' {f[2]}; its worker was replaced")), 0.0
    _, _, status, output, error, duration, ctx = f
    return ToolResult(cid, name, status, output=output, error=error, duration_s=duration, worker_pid=pid,
                      context_updates=ctx), duration


def leaving_frame(call_id: str, what: str) -> tuple[Any, ...]:
    """The last frame of a worker whose channels the call damaged: ``what`` the tool did."""
    return (LEAVING, call_id, what)


def progress_frame(call_id: str, value: Any) -> tuple[Any, ...]:
    return (PROGRESS, call_id, value)


def mismatch_frame(call_id: str) -> tuple[Any, ...]:
    return (MISMATCH, call_id)


def unreadable_result(call_id: str, name: str, f: tuple[Any, ...], pid: int | None, duration: float) -> ToolResult:
    """The decoder of a ``BAD_FRAME`` marker in place of a result: a value the host could not unpickle."""
    return ToolResult(call_id, name, "error", worker_pid=pid, duration_s=duration, error=ErrorInfo(
        f[1], f"the result of tool '{name}' could not be rebuilt in the host: {f[2]}"))


def damaged_result(call_id: str, name: str, reason: str, pid: int | None, duration: float) -> ToolResult:
    """A call whose worker's pipe or side socket carried something that is not a frame."""
    return ToolResult(call_id, name, "error", worker_pid=pid, duration_s=duration, error=ErrorInfo(
        "ChannelDamaged", f"tool '{name}' failed: its worker's channel to the host carried {reason}; the worker "
        "was replaced"))


def _encoded(encode: Any, call_id: str, result: ToolResult) -> tuple[Any, ...] | None:
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
    return (ENCODED, call_id, line, result.duration_s)


def _text(call_id: str, result: ToolResult) -> tuple[Any, ...] | None:
    """The TEXT frame for an ok result with one plain text block and nothing else, else None."""
    out = result.output
    if result.status != "ok" or out is None or out.is_error or result.context_updates or len(out.content) != 1:
        return None
    block = out.content[0]
    if block.type != "text" or block.data is not None or block.url is not None or block.media_type is not None \
            or block.name is not None:
        return None
    return (TEXT, call_id, block.text, out.data, result.duration_s)


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
           "MAGIC", "MAX_FRAME", "MISMATCH", "OOB_HEADER", "PROGRESS", "RESULT", "RESULT_KINDS", "TEXT", "TOOLS",
           "ChannelDamaged", "FrameTooLarge", "calls_frame", "check_header", "damaged_result", "exit_description",
           "frame", "leaving_frame", "lines_frame", "looks_large", "mismatch_frame", "progress_frame",
           "rebuilt_result", "result_frame", "tools_frame", "unreadable_result"]
