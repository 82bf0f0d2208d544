"""The worker loop: what runs in each forked worker process until the host lets it go.

A worker reads frames of calls from its call pipe, runs them one after the other (hooks around each),
and writes one result frame per call on its result pipe as soon as the call ends. It is the leader of
its own process group, so a timeout kills the tool's own children with it, and it never returns into
the code that forked it: it leaves with ``os._exit`` so no atexit handler inherited from the host runs
twice.

Frames larger than ``oob.LARGE_FRAME`` go both ways by memory file over the worker's side socket (see
``toolfork.executor.oob``); the pipes then carry only a header of length 0 in their place.

Frames in (host -> worker):  ("c", [(call_id, name, arguments, timeout, context), ...])
                             ("l", parse, context, [(call_id, name, raw, arguments, timeout, lineno), ...])
                                 the line lane (``fork_lines``): ``raw`` input lines the worker reads
                                 with ``parse`` itself (``arguments`` None), checking each is the call
                                 the host took it for; or, with ``raw`` None, calls the host read
                             ("t", dill bytes of {name: Tool})      tools added after start
Frames out (worker -> host): ("r", call_id, status, output, error, duration_s, context_updates)
                             ("o", call_id, text, data, duration_s)   the common case, compact: an ok
                                 result whose output is one plain text block (half the pickling cost)
                             ("e", call_id, encoded, duration_s)      a clean ok result as the bytes
                                 ``Executor(encode_results=...)`` made of it here (toolfork run's lines)
                             ("p", call_id, value)                  progress, while the call runs
                             ("m", call_id)                         a lane line that is not the call
                                 the host took it for (not run: the host reads it and decides again)
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import sys
import time
from typing import Any

from toolfork.executor import framing, oob
from toolfork.executor.backends.base import Hooks
from toolfork.executor.invoke import CallInterrupted, error_info, execute_call
from toolfork.executor.types import ErrorInfo, ToolCall, ToolResult
from toolfork.tools.runtime import ToolRuntime


class WorkerRuntime(ToolRuntime):
    """Progress goes straight onto the result pipe so the host sees it while the call runs."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int, call_id: str, tool_name: str, deadline: float | None,
                 context: dict[str, Any] | None) -> None:
        super().__init__(call_id, tool_name, deadline, context)
        self._fd = fd

    def emit_progress(self, value: Any) -> None:
        """Progress must be rebuilt by the host: it is checked here (progress is rare, a round trip is
        cheap), so the tool fails at its ``emit_progress`` line, and an unreadable frame on the host's
        side can only ever be a result frame (see ``ForkBackend._read``)."""
        try:
            frame = framing.encode(("p", self.call_id, value))
            pickle.loads(memoryview(frame)[framing.HEADER_SIZE:])
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | CallInterrupted):
                raise
            raise TypeError(f"progress value of type {type(value).__name__} cannot be sent to the host: "
                            f"{type(exc).__name__}: {exc}") from None
        framing.write_all(self._fd, frame)


def _on_sigterm(signum: int, frame: Any) -> None:
    raise CallInterrupted("the executor stopped this call (deadline passed or executor closing)")


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL us when the template (our parent) dies, so no worker outlives it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except Exception:  # not Linux: the worker still exits on EOF of its call pipe
        pass


PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphans below this process are handed to it instead of init (Linux; elsewhere a no-op)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:
        pass


def worker_main(call_fd: int, result_fd: int, side_fd: int, tools: dict[str, Any], hooks: Hooks,
                parent_pid: int) -> None:
    """Entry point in the freshly forked worker; never returns."""
    code = 0
    try:
        os.setpgid(0, 0)
        _die_with_parent()
        become_subreaper()  # what its calls start stays below it, whatever they do (see fork_template)
        if os.getppid() != parent_pid:  # the template died between fork and prctl
            os._exit(1)
        signal.signal(signal.SIGTERM, _on_sigterm)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _serve(call_fd, result_fd, oob.SidePort(socket.socket(fileno=side_fd)), tools, hooks)
    except (EOFError, CallInterrupted, BrokenPipeError):
        code = 0
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def _serve(call_fd: int, result_fd: int, side: oob.SidePort, tools: dict[str, Any], hooks: Hooks) -> None:
    pid = os.getpid()
    start_error: ErrorInfo | None = None
    if hooks.on_worker_start is not None:
        try:
            hooks.on_worker_start()
        except Exception as exc:
            # A worker whose start hook failed stays up but fails every call, naming the hook: respawning
            # it would only fail again, in a loop.
            start_error = error_info(exc, prefix="on_worker_start hook failed")
    before, after, encode = hooks.before_child, hooks.after_child, hooks.encode_result
    recv, write_all, dumps, to_frame = framing.recv_blocking, framing.write_all, pickle.dumps, framing.frame
    large = oob.LARGE_FRAME if oob.ENABLED else sys.maxsize  # no memory files here: every frame by pipe
    highest = pickle.HIGHEST_PROTOCOL
    monotonic = time.monotonic
    while True:
        msg = recv(call_fd, side)
        if msg[0] == "t":
            import dill

            tools.update(dill.loads(msg[1]))
            continue
        calls = msg[1] if msg[0] == "c" else _lane_calls(msg[1], msg[2], msg[3], result_fd)
        for call_id, name, arguments, timeout, context in calls:
            if start_error is not None:
                result = ToolResult(call_id, name, "error", error=start_error, worker_pid=pid)
            else:
                tool = tools.get(name)
                if tool is None:  # the front checks names; this guards against a lost tools frame
                    result = ToolResult(call_id, name, "error", worker_pid=pid,
                                        error=ErrorInfo("LookupError", f"tool '{name}' is not in this worker"))
                else:
                    runtime = None
                    if tool.uses_runtime:
                        deadline = None if timeout is None else monotonic() + timeout
                        runtime = WorkerRuntime(result_fd, call_id, name, deadline, context)
                    result = execute_call(tool, call_id, arguments, runtime, before, after, pid)
                    if os.getpid() != pid:  # a copy the tool forked came back here: it must not answer
                        os._exit(0)
            out = (encode is not None and _encoded(encode, call_id, result)) or _compact(call_id, result) or (
                "r", call_id, result.status, result.output, result.error, result.duration_s, result.context_updates)
            try:
                if _looks_large(out, large):  # pickled straight into a memory file: one copy, no pipe
                    side.dump(result_fd, out, wait_ack=True)
                    continue
                payload = dumps(out, highest)
                if len(payload) >= large:
                    side.send_payload(result_fd, payload, wait_ack=True)
                    continue
                data = to_frame(payload)
            except (EOFError, BrokenPipeError):
                raise
            except Exception as exc:
                data = to_frame(dumps(("r", call_id, "error", None, error_info(
                    exc, prefix=f"the result of tool '{name}' could not be serialized to send it to the host"),
                    result.duration_s, None), highest))
            write_all(result_fd, data)


def _lane_calls(parse: Any, context: dict[str, Any] | None, items: list[tuple[Any, ...]],
               result_fd: int) -> Any:
    """The calls of a chunk of the line lane. A raw line is parsed here, where the host would pay for it
    per line; the host took its id and tool name from a strict pattern, so a line that parses to
    anything else (another id, a per-line timeout, a bad line) is not run: an "m" frame sends it back
    to the host, in its place in the stream, and the next line starts."""
    for call_id, name, raw, arguments, timeout, lineno in items:
        if raw is not None:
            call = parse(raw, lineno)
            if type(call) is not ToolCall or call.id != call_id or call.name != name or call.timeout is not None:
                framing.write_all(result_fd, framing.frame(pickle.dumps(("m", call_id), pickle.HIGHEST_PROTOCOL)))
                continue
            arguments = call.arguments
        yield call_id, name, arguments, timeout, context


def _looks_large(out: tuple[Any, ...], large: int) -> bool:
    """Whether a result frame holds text or media data of ``large`` characters or more (looked at
    without pickling: the common large results are one big str)."""
    if out[0] == "o" or out[0] == "e":
        return len(out[2]) >= large
    output = out[3]
    if output is None:
        return False
    size = 0
    for block in output.content:
        size += len(block.text or "") + len(block.data or "")
    return size >= large


def _encoded(encode: Any, call_id: str, result: ToolResult) -> tuple[Any, ...] | None:
    """The "e" frame of a clean ok result (no error output, no context updates) that ``encode`` turned
    into bytes, else None: the other results, and any whose encoding failed, cross as themselves."""
    out = result.output
    if result.status != "ok" or out is None or out.is_error or result.context_updates:
        return None
    try:
        line = encode(result)
    except Exception:  # the host encodes it again and reports what is wrong there
        return None
    if type(line) is not bytes:
        return None
    return ("e", call_id, line, result.duration_s)


def _compact(call_id: str, result: ToolResult) -> tuple[Any, ...] | None:
    """The "o" frame for an ok result with one plain text block and nothing else, else None."""
    out = result.output
    if result.status != "ok" or out is None or out.is_error or result.context_updates or len(out.content) != 1:
        return None
    block = out.content[0]
    if block.type != "text" or block.data is not None or block.url is not None or block.media_type is not None \
            or block.name is not None:
        return None
    return ("o", call_id, block.text, out.data, result.duration_s)


__all__ = ["become_subreaper", "worker_main"]
