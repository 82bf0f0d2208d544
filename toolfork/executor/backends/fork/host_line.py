"""A session's call asking the host to run a tool there: ``ToolRuntime.call_host``, in a session's process.

Why: a session's process may be in the sandbox (no network, no files but its own), while some tools must
run where the host's credentials, network and files are: a web search, a database. A session opened
with ``host_tools`` lets its calls ask the host to run those tools, by name, in the Executor's pool, and
wait for the answer. The request and the answer travel on the session's own pipes, inside the call
that asked, so nothing new is reachable from the sandbox; the host decides what runs (only the names
the session was opened with, with the arguments checked as any call's are), and for how long (what is
left of the asking call's timeout)::

    tool code ── runtime.call_host(name, **arguments) ──> HostLine.ask
        ──HOST_CALL (seq, name, arguments)──> host: the session's link (``fork.session_link``)
                                                  └─> Executor.run([ToolCall(name, arguments)]) in the pool
        <──HOST_ANSWER (status, value, message)── on the session's call pipe
    <── the value (the tool's data, else its text) | HostToolError(message)

Only the call that is running may ask, from the thread that runs it (the process's main thread): a
thread it left behind, or a runtime kept after its call, is refused here, before anything is written,
so the host's answer is always read by the one who asked. The line is set once, when the session opens.
"""

from __future__ import annotations

import threading
from typing import Any

from toolfork.executor.wire import frames, framing
from toolfork.executor.wire.frames import ChannelDamaged
from toolfork.tools.runtime import HostToolError


class HostLine:
    """A session process's way to the host, for its calls' host calls (see the module docstring)."""

    def __init__(self, call_fd: int, writer: framing.FrameWriter) -> None:
        self.call_fd = call_fd  # the session's call pipe (a checkpoint that takes over gets the same number)
        self.writer = writer
        self.finished = 0  # calls this process (or the process it is a checkpoint of) finished: the running one's seq

    def ask(self, seq: int, name: str, arguments: dict[str, Any]) -> Any:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(f"call_host({name!r}): only the thread that runs the call may ask the host")
        if seq != self.finished:
            raise RuntimeError(f"call_host({name!r}): the call this runtime was given to has ended")
        if not isinstance(name, str):
            raise TypeError(f"call_host(name, **arguments): name must be a str, got {type(name).__name__}")
        writer = self.writer
        payload = writer.encode(frames.host_call_frame(seq, name, arguments))  # data only in a sandbox
        writer.send_payload(payload)
        answer = framing.recv_blocking(self.call_fd, writer.side, writer.lock)
        if type(answer) is not tuple or len(answer) != 4 or answer[0] != frames.HOST_ANSWER:
            raise ChannelDamaged("the host answered a host call with something else")
        _, status, value, message = answer
        if status != "ok":
            raise HostToolError(str(message))
        return value


LINE: list[HostLine | None] = [None]  # set at a session's OPEN, in its process (and so in its checkpoints)


def ask(seq: int, name: str, arguments: dict[str, Any]) -> Any:
    """``WorkerRuntime.call_host``: ask the host through this process's line, or say there is none."""
    line = LINE[0]
    if line is None:
        raise HostToolError(f"call_host({name!r}): this call does not run in a session opened with host_tools "
                            "(a pool call cannot ask the host to run a tool)")
    return line.ask(seq, name, arguments)


__all__ = ["LINE", "HostLine", "ask"]
