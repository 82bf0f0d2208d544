"""Red team #1, the reading half: a frame that pickled in the worker but cannot be rebuilt in the host
is returned by ``FrameReader.read`` as a marker in its place; the frames around it are unaffected."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import pytest

from toolfork.executor.wire import framing


class TwoArgError(Exception):  # pickles as (cls, (message,)) and cannot be rebuilt from one argument
    def __init__(self, a: Any, b: Any) -> None:
        super().__init__(f"{a}-{b}")


class BadState:
    def __init__(self) -> None:
        self.x = 1

    def __setstate__(self, state: Any) -> None:
        raise ValueError("this state is refused")


class Vanishing:
    pass


class ExitsOnLoad:
    def __reduce__(self) -> Any:
        return (sys.exit, (0,))


def _read_all(frames: list[bytes]) -> list[Any]:
    """Write the frames on a real pipe (in a thread: they exceed the pipe's buffer) and read them back
    with a non-blocking FrameReader until the writer closes."""
    r, w = os.pipe()
    os.set_blocking(r, False)

    def write() -> None:
        try:
            for frame in frames:
                framing.write_all(w, frame)
        finally:
            os.close(w)

    writer = threading.Thread(target=write)
    writer.start()
    reader = framing.FrameReader(r)
    out: list[Any] = []
    try:
        import select

        while not reader.eof:
            select.select([r], [], [], 5)
            out.extend(reader.read())
    finally:
        writer.join()
        os.close(r)
    return out


def test_bad_frames_become_markers_between_good_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    big = "x" * (3 * framing.READ_CHUNK)  # goes through the preallocated-body path of the reader
    frames = [framing.encode(obj) for obj in [
        ("o", "c1", "first", None, 0.1),
        ("r", "c2", "ok", TwoArgError(1, 2)),
        ("p", "c3", [BadState()]),
        ("r", "c4", Vanishing()),
        ("p", "c5", ExitsOnLoad()),
        ("p", "c6", big, TwoArgError("a", "b")),
        ("o", "c7", "last", None, 0.2),
    ]]
    monkeypatch.delattr(sys.modules[__name__], "Vanishing")  # pickled by reference, gone when read back
    out = _read_all(frames)
    assert len(out) == 7
    assert out[0] == ("o", "c1", "first", None, 0.1) and out[6] == ("o", "c7", "last", None, 0.2)
    markers = out[1:6]
    assert all(m[0] == framing.BAD_FRAME and len(m) == 3 for m in markers)
    assert [m[1] for m in markers] == ["TypeError", "ValueError", "AttributeError", "SystemExit", "TypeError"]
    here = __name__
    assert f"{here}.TwoArgError" in markers[0][2] and "could not be rebuilt" in markers[0][2]
    assert f"{here}.BadState" in markers[1][2] and "this state is refused" in markers[1][2]
    assert f"{here}.Vanishing" in markers[2][2]
    assert f"{here}.TwoArgError" in markers[4][2]


def test_a_bad_frame_split_across_reads_is_a_marker_too() -> None:
    frame = framing.encode(("r", "c1", TwoArgError(3, 4)))
    r, w = os.pipe()
    os.set_blocking(r, False)
    try:
        reader = framing.FrameReader(r)
        os.write(w, frame[:7])
        assert reader.read() == []
        os.write(w, frame[7:] + framing.encode(("o", "c2", "fine", None, 0.0)))
        out = reader.read()
    finally:
        os.close(r)
        os.close(w)
    assert out[0][:2] == ("!", "TypeError") and "TwoArgError" in out[0][2]
    assert out[1] == ("o", "c2", "fine", None, 0.0)


# ----------------------------------------------------------------------------- end to end, through ex.run
# The host half: the marker fails the call it belongs to, and nothing else.

from toolfork.executor import Executor, ToolCall  # noqa: E402
from toolfork.tools import ToolOutput, ToolRuntime, tool  # noqa: E402


@tool
def returns_unbuildable_data() -> ToolOutput:
    """Return data the host cannot rebuild."""
    return ToolOutput(content=[], data={"e": TwoArgError(1, 2)})


@tool
def sets_unbuildable_context(runtime: ToolRuntime) -> str:
    """Ask the host to merge a value it could not rebuild: the values rule makes it its text."""
    runtime.set_context({"k": TwoArgError(1, 2)})
    return "done"


@tool
def emits_unbuildable_progress(runtime: ToolRuntime) -> str:
    """Report progress the host cannot rebuild."""
    runtime.emit_progress(BadState())
    return "done"


@tool
def plain(x: int) -> int:
    """Return x."""
    return x


def test_values_the_host_cannot_rebuild_fail_their_call_only():
    tools = [returns_unbuildable_data, sets_unbuildable_context, emits_unbuildable_progress, plain]
    with Executor(tools, mode="fork", workers=2) as ex:
        calls = [ToolCall("data", "returns_unbuildable_data"), ToolCall("p1", "plain", {"x": 1}),
                 ToolCall("ctx", "sets_unbuildable_context"), ToolCall("p2", "plain", {"x": 2}),
                 ToolCall("prog", "emits_unbuildable_progress"), ToolCall("p3", "plain", {"x": 3})]
        results = ex.run(calls)
        by_id = {r.call_id: r for r in results}
        assert [r.call_id for r in results] == [c.id for c in calls]
        assert by_id["data"].status == "error"  # a ToolOutput built by the tool crosses as built
        assert "TwoArgError" in by_id["data"].error.message and "rebuilt" in by_id["data"].error.message
        assert by_id["ctx"].status == "ok"  # a context value becomes data by the values rule: str()
        assert by_id["prog"].status == "error"  # refused in the worker, at the emit_progress line
        assert "BadState" in by_id["prog"].error.message
        assert [by_id[f"p{i}"].output.data for i in (1, 2, 3)] == [1, 2, 3]
        assert ex.context["k"] == "1-2"
        # the workers and the next batch are unaffected
        again = ex.run([*[ToolCall(f"n{i}", "plain", {"x": i}) for i in range(8)],
                        ToolCall("d2", "returns_unbuildable_data")])
        assert [r.output.data for r in again[:8]] == list(range(8)) and again[8].status == "error"
