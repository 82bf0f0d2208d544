"""The worker loop: what runs in each forked worker process until the host lets it go.

A worker reads frames of calls from its call pipe, runs them one after the other (hooks around each),
and writes one result frame per call on its result pipe as soon as the call ends. It is the leader of
its own process group, so a timeout kills the tool's own children with it, and it never returns into
the code that forked it: it leaves with ``os._exit`` so no atexit handler inherited from the host runs
twice.

Frames larger than ``oob.LARGE_FRAME`` go both ways by memory file over the worker's side socket (see
``toolfork.executor.wire.oob``); the pipes then carry only a header of length 0 in their place.

The loop is cut where its jobs part: ``worker_main`` sets the process up (group, channels, sandbox) and
leaves with ``os._exit``; ``_serve`` reads the host's messages and runs each call (hooks, limits and
span as layers: ``_run_layered``); ``_send_result`` sends one result, whatever its size or its faults.

The frames both ways are listed in ``toolfork.executor.wire.frames``. Every frame, whatever thread sends
it (a tool's threads may call ``emit_progress`` while the worker sends a result), goes out whole through
one ``framing.FrameWriter``.

The worker's channels (call pipe, result pipe, side socket) are moved to high descriptor numbers, out
of the range a tool's own files take, and are not inherited by what a tool executes. A tool may still
close them (a library that closes "every fd above 2"): after each call the worker looks, and if one is
gone it does not go on poisoned. It sends that call's result as a LEAVING frame (an error naming what
happened) if its result pipe still works, else it exits with ``frames.EXIT_CHANNEL_DAMAGED``; either way
the host fails that call alone and forks a replacement. Between calls it puts signal state back and
reaps exited children (see ``fork.reset``). A call of a tool with ``Limits`` runs under them (see
``fork.limited``); a one-shot forked for a sandboxed call enters its sandbox before anything else.
"""

from __future__ import annotations

import functools
import os
import pickle
import signal
import socket
import time
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from toolfork.executor import tracing
from toolfork.executor.backends.base import WorkerSetup
from toolfork.executor.backends.fork.limited import CallLimits
from toolfork.executor.backends.fork.reset import SignalBaseline
from toolfork.executor.invoke import CallInterrupted, error_info, execute_call
from toolfork.executor.types import ErrorInfo, ToolCall, ToolResult
from toolfork.executor.wire import dataonly, frames, framing, oob
from toolfork.executor.wire.callitem import TraceParent
from toolfork.executor.wire.frames import EXIT_CHANNEL_DAMAGED, ChannelDamaged
from toolfork.executor.wire.pipes import SPIN_S
from toolfork.governance import rlimits
from toolfork.governance import sandbox as sandboxing
from toolfork.governance.forking import set_handler
from toolfork.governance.limits import Limits
from toolfork.governance.verdict import libc
from toolfork.tools.runtime import ToolRuntime

CHANNEL_FD_HEADROOM = 64  # the channels go this far below the descriptor limit (at most 4096)


class WorkerRuntime(ToolRuntime):
    """Progress goes straight onto the result pipe so the host sees it while the call runs."""

    __slots__ = ("_seq", "_writer")

    def __init__(self, writer: framing.FrameWriter, seq: int, call_id: str, tool_name: str, deadline: float | None,
                 context: dict[str, Any] | None, meta: dict[str, str] | None = None) -> None:
        super().__init__(call_id, tool_name, deadline, context, meta)
        self._writer = writer
        self._seq = seq  # the call's place among this worker's calls: what binds its frames to it

    def deliver_progress(self, value: Any) -> None:
        """Progress must be rebuilt by the host: it is checked here (progress is rare, a round trip is
        cheap), so the tool fails at its ``emit_progress`` line, and an unreadable frame on the host's
        side can only ever be a result frame (see ``ForkBackend._read``). Any thread may call it; a
        large value goes by memory file, as a large result does."""
        writer = self._writer
        try:
            payload = writer.encode(frames.progress_frame(self._seq, value))
            writer.decode(payload)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | CallInterrupted):
                raise
            raise TypeError(f"progress value of type {type(value).__name__} cannot be sent to the host: "
                            f"{type(exc).__name__}: {exc}") from None
        writer.send_payload(payload)

    def call_host(self, name: str, /, **arguments: Any) -> Any:
        """See ``ToolRuntime.call_host``: through the session process's line (``fork.host_line``)."""
        from toolfork.executor.backends.fork import host_line

        return host_line.ask(self._seq, name, arguments)


class ServedSession(Protocol):
    """What a session's process adds to the loop (see ``fork.session_worker``): the frames that are not
    calls (open, snapshot), what happens before a call's result goes out (its checkpoint is dropped) and
    after each frame of calls (a new checkpoint)."""

    def handle(self, msg: tuple[Any, ...], channels: Channels, writer: framing.FrameWriter) -> None: ...

    def before_result(self) -> None: ...

    def after_frame(self) -> None: ...

    @property
    def limits(self) -> Limits | None:
        """The sandbox the session's process entered at its OPEN (None: none)."""


class _Leave(BaseException):  # not an error: the worker's way out when its channels are gone
    """The worker's channels are damaged: it leaves with ``EXIT_CHANNEL_DAMAGED``."""


class Channels:
    """The worker's three descriptors: moved out of a tool's way, and looked at after each call (one
    ``poll`` system call: a descriptor a tool closed shows as POLLNVAL)."""

    __slots__ = ("call_fd", "names", "poller", "result_fd", "side_fd")

    def __init__(self, call_fd: int, result_fd: int, side_fd: int) -> None:
        import select

        self.call_fd, self.result_fd, self.side_fd = (_move_high(fd) for fd in (call_fd, result_fd, side_fd))
        self.names = {self.call_fd: "call pipe", self.result_fd: "result pipe", self.side_fd: "side socket"}
        self.poller = select.poll()
        for fd in self.names:
            self.poller.register(fd, 0)  # no events asked for: only POLLNVAL, POLLHUP, POLLERR come back

    def damaged(self) -> list[str]:
        """The channels a tool closed (empty when all are there). ``poller.poll(0)`` alone is the cheap
        look: empty when nothing happened to them."""
        ready = self.poller.poll(0)
        if not ready:
            return []
        import select

        return [self.names[fd] for fd, ev in ready if ev & select.POLLNVAL]


def _move_high(fd: int) -> int:
    """``fd`` moved to a high number (close-on-exec), below the descriptor limit; ``fd`` if it cannot be."""
    try:
        import fcntl
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        top = 4096 if soft == resource.RLIM_INFINITY else min(soft, 4096)
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, max(3, top - CHANNEL_FD_HEADROOM))
    except (ImportError, OSError):
        try:
            os.set_inheritable(fd, False)
        except OSError:
            pass
        return fd
    os.close(fd)
    return moved


def _await_channels(spare: int) -> tuple[int, int, int]:
    """A spare's wait for its call: the three channels, sent by the template over ``spare``. Leaves
    (exit 0) at EOF: the template let the spare go unused (its tools changed, or it is closing)."""
    sock = socket.socket(fileno=spare)
    try:
        _data, fds, _flags, _addr = socket.recv_fds(sock, 16, 3)
    except OSError:
        fds = []
    finally:
        sock.close()
    if len(fds) != 3:
        os._exit(0)
    return fds[0], fds[1], fds[2]


def _own_pid(spare: int) -> int:
    """A cloned spare's pid as its template sees it: the template's first word on ``spare``. Leaves
    (exit 0) at EOF: the template is gone (it died before this process could ask to die with it)."""
    word = b""
    try:
        word = os.read(spare, 16)
    except OSError:
        pass
    if len(word) != 4:
        os._exit(0)
    return int.from_bytes(word, "little")


_DFL = int(signal.SIG_DFL)


def _on_sigterm(signum: int, frame: Any) -> None:
    raise CallInterrupted("the executor stopped this call (deadline passed or executor closing)")


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send us ``sig`` (SIGKILL) when the template (our parent) dies, so no worker outlives it."""
    try:
        pr_set_pdeathsig = 1
        libc().prctl(pr_set_pdeathsig, sig, 0, 0, 0)  # loaded once, in the template: not per fork
    except Exception:  # not Linux: the worker still exits on EOF of its call pipe
        pass


PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphans below this process are handed to it instead of init (Linux; elsewhere a no-op)."""
    try:
        libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:
        pass


def signal_quietly(send: Callable[[int, int], None], pid: int, sig: int) -> bool:
    """``send(pid, sig)`` (``os.kill`` or ``os.killpg``); whether it was sent: a process or group already
    gone (or never there) is no error, since whoever signals it wants it gone."""
    try:
        send(pid, sig)
    except OSError:
        return False
    return True


def lead_group(pid: int) -> None:
    """Make child ``pid`` lead a process group of its own, as it also does itself first thing (whichever
    runs first wins the race; one that has already exec'd or died needs nothing)."""
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass


def kill_group(pid: int) -> None:
    """SIGKILL a process and the group it leads (a session process and its checkpoint lead their own),
    either of which may already be gone."""
    signal_quietly(os.killpg, pid, signal.SIGKILL)
    signal_quietly(os.kill, pid, signal.SIGKILL)


def child_pids() -> list[int]:
    """This process's children, from /proc (a single-threaded process: one task)."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []


def worker_main(call_fd: int, result_fd: int, side_fd: int, tools: dict[str, Any], hooks: WorkerSetup,
                parent_pid: int, sandbox: Limits | None = None, spare: int | None = None,
                session: ServedSession | None = None, cloned: tuple[int, int] | None = None) -> None:
    """Entry point in the freshly forked worker; never returns. With ``sandbox`` (a one-shot for a
    sandboxed call) the sandbox is entered first, before ``on_worker_start`` or any tool code; if it
    cannot be, every call is refused naming why. A spare (``spare``: a unix socket to the template;
    the three channels are then -1) enters its sandbox ahead of its call and waits there for the
    call's channels (see ``fork.template``). ``cloned`` (its uid and gid outside): the spare was cloned
    into its namespaces by the template (``parent_pid``), so it is PID 1 of its own; the template's
    first word on ``spare`` is its pid as the template sees it (``sandbox.settle``)."""
    code = 0
    try:
        os.setpgid(0, 0)
        die_with_parent()
        become_subreaper()  # what its calls start stays below it, whatever they do (see fork.template)
        if cloned is None and os.getppid() != parent_pid:  # the template died between fork and prctl
            os._exit(1)  # (a cloned spare's parent is outside its PID namespace: the template's word below)
        refused: ErrorInfo | None = None
        if sandbox is not None:
            try:
                if cloned is not None and spare is not None:
                    sandboxing.settle(sandbox, (spare,), *cloned, parent_pid, _own_pid(spare))
                else:
                    sandboxing.enter(sandbox, (call_fd, result_fd, side_fd) if spare is None else (spare,))
            except OSError as exc:
                refused = ErrorInfo("LimitsNotEnforceable", f"the call was not run: its sandbox could not be "
                                    f"entered: {exc}")
        set_handler(signal.SIGTERM, _on_sigterm)  # the C setter: no enum members made in every worker
        set_handler(signal.SIGINT, _DFL)
        set_handler(signal.SIGCHLD, _DFL)
        ready = _get_ready(hooks, sandbox, refused)  # a spare: while it waits for its call, off the call's path
        if sandbox is not None and spare is not None:
            if ready.start_error is None:
                ready.limited.ahead(sandbox)  # its call's limits, set while it waits (off the call's path)
            call_fd, result_fd, side_fd = _await_channels(spare)
        _serve(Channels(call_fd, result_fd, side_fd), tools, hooks, ready, sandbox, session)
    # Each leaves here, while the exception still holds the frames it came through: were they let go
    # first, their objects' finalizers would run for nothing (an unclosed socket's formats a warning).
    except (EOFError, CallInterrupted, BrokenPipeError):
        os._exit(0)
    except (_Leave, ChannelDamaged):
        os._exit(EXIT_CHANNEL_DAMAGED)
    except BaseException:
        os._exit(70)
    finally:
        os._exit(code)


class _Ready(NamedTuple):
    """What a worker sets up before its first call that needs none of its channels."""

    start_error: ErrorInfo | None  # on_worker_start's failure (or the sandbox's refusal): every call's error
    baseline: SignalBaseline
    limited: CallLimits  # each tool's limits, worked out once (see fork.limited)


def _get_ready(hooks: WorkerSetup, sandbox: Limits | None, refused: ErrorInfo | None) -> _Ready:
    """``on_worker_start``, then the signal state every call starts with (what the hook installs
    included), and the limits' layer."""
    start_error = refused if refused is not None else hooks.start_worker()
    baseline = SignalBaseline()
    baseline.watch_setters()
    return _Ready(start_error, baseline, CallLimits(hooks.limits, sandbox))


def _serve(channels: Channels, tools: dict[str, Any], hooks: WorkerSetup, ready: _Ready,
           sandbox: Limits | None = None, session: ServedSession | None = None) -> None:
    pid = os.getpid()
    call_fd, result_fd = channels.call_fd, channels.result_fd
    side = oob.SidePort(socket.socket(fileno=channels.side_fd))
    writer = framing.FrameWriter(result_fd, side)
    start_error, baseline, limited = ready
    before, after, encode = hooks.before_child, hooks.after_child, hooks.encode_result
    # A session's process reads each frame exactly: its checkpoint is forked between frames.
    reader = framing.CallReader(call_fd, side, writer.lock, ahead=session is None)
    recv = reader.recv
    dumps: Callable[[Any, int], bytes] = pickle.dumps  # ``_data_only_dumps`` once a sandboxed call came
    # The host reads a sandbox's frames as data only, from the first (a refusal too); a sandboxed call runs
    # nowhere else (fork.limited refuses it in any process that did not enter its sandbox). The host
    # encodes a sandbox's output lines itself: no bytes of the call go out as a line.
    if sandbox is not None:
        writer.use_data_only()
        dumps = _data_only_dumps
        encode = None
    monotonic, getpid, look = time.monotonic, os.getpid, channels.poller.poll
    limits_of = limited.effective.of
    plans: dict[str, tuple[Any, bool, Limits | None]] = {}  # a tool's name: it, whether it takes a runtime, its limits
    release_limits = rlimits.release
    next_seq = 0  # the place of the next call among those this worker was sent (see wire.frames: seq)
    # (a sandboxed call's one-shot never looks for a next frame: it never comes)
    spin_after_one = SPIN_S if sandbox is None else 0.0
    while True:
        msg = recv()
        kind = msg[0]
        if kind == frames.TOOLS:
            import dill

            tools.update(dill.loads(msg[1]))
            limited.effective.forget()
            plans.clear()
            continue
        if session is not None and kind != frames.CALLS:
            session.handle(msg, channels, writer)
            pid = getpid()  # the first checkpoint is forked at OPEN: its copy may come back here
            if session.limits is not None and dumps is not _data_only_dumps:  # it entered its sandbox at OPEN
                dumps, encode = _data_only_dumps, None
                limited = CallLimits(hooks.limits, session.limits, over=session.limits)
                limits_of = limited.effective.of
                plans.clear()
            continue
        items = msg[1] if kind == frames.CALLS else msg[3]
        # A frame of one call: a small batch (its next call comes soon) or a slow tool (a look costs it
        # nothing). Chunks of quick calls come while the host is busy with their results: a worker that
        # looked for the next chunk would take the CPU the host needs, so it sleeps at once.
        reader.spin_s = spin_after_one if len(items) == 1 else 0.0
        last_id = items[-1][0] if items else None
        calls = enumerate(items, next_seq) if kind == frames.CALLS else _lane_calls(
            msg[1], msg[2], items, writer, next_seq)
        next_seq += len(items)
        exposed = False  # a call ran since the real-time timer was last disarmed
        for seq, (call_id, name, arguments, timeout, context, meta, trace) in calls:
            if baseline.touched:  # the call before it in this chunk used the signal module's setters
                baseline.reset()
            if start_error is not None:
                result = ToolResult(call_id, name, "error", error=start_error, worker_pid=pid)
            else:
                plan = plans.get(name)
                if plan is None:  # the first call of this tool here: what its calls need, worked out once
                    plan = _plan(tools.get(name), limits_of)
                    if plan[0] is not None:
                        plans[name] = plan
                tool, uses_runtime, limits = plan
                if tool is None:  # the front checks names; this guards against a lost tools frame
                    result = ToolResult(call_id, name, "error", worker_pid=pid,
                                        error=ErrorInfo("LookupError", f"tool '{name}' is not in this worker"))
                else:
                    runtime = None
                    if uses_runtime:
                        deadline = None if timeout is None else monotonic() + timeout
                        runtime = WorkerRuntime(writer, seq, call_id, name, deadline, context, meta)
                    if limits is None:
                        release_limits()  # limits an earlier call kept in place are not this call's
                    if limits is None and trace is None:
                        result = execute_call(tool, call_id, arguments, runtime, before, after, pid)
                    else:
                        result = _run_layered(limited, limits, trace, writer, seq, call_id, name, pid,
                                              functools.partial(execute_call, tool, call_id, arguments, runtime,
                                                                before, after, pid))
                    if getpid() != pid:  # a copy the tool forked came back here: it must not answer
                        os._exit(0)
                    # The real-time timer: disarmed before this result goes out when this call used a
                    # setter or ends the frame (see fork.reset); otherwise at the frame's end.
                    if call_id == last_id or baseline.touched:
                        baseline.disarm_alarm()
                        exposed = False
                    else:
                        exposed = True
                    if look(0):  # one system call; the names only when something shows
                        gone = channels.damaged()
                        if gone:
                            _leave(writer, seq, gone)
            if session is not None:
                session.before_result()  # the checkpoint from before this call goes (it holds what the call closed)
            _send_result(channels, writer, dumps, seq, name, result, encode)
        if exposed:  # the frame's last call was not run (a lane line sent back): its predecessor's timer
            baseline.disarm_alarm()
        baseline.reset()
        release_limits()  # kept for the calls of one frame: reading the next frame is the worker's own work
        if session is not None:
            session.after_frame()  # a checkpoint: its copy may come back here as the session's process
            pid = getpid()


def _plan(tool: Any, limits_of: Callable[[Any], Limits | None]) -> tuple[Any, bool, Limits | None]:
    """What every call of ``tool`` needs (None: not in this worker), worked out at its first call here:
    the tool, whether its calls get a runtime, its effective limits (``fork.limited``)."""
    if tool is None:
        return None, False, None
    return tool, tool.uses_runtime, limits_of(tool)


def _send_result(channels: Channels, writer: framing.FrameWriter, dumps: Callable[[Any, int], bytes], seq: int,
                 name: str, result: ToolResult, encode: Callable[[ToolResult], bytes | None] | None) -> None:
    """One call's result out, whole: a large one pickled straight into a memory file (one copy, no
    pipe), the rest on the result pipe; a value that cannot be sent becomes an error result naming it,
    unless a channel is what failed (then the worker leaves, see ``_check_sent``)."""
    out = frames.result_frame(seq, result, encode)
    try:
        if frames.looks_large(out, writer.large):
            writer.dump(out)
            return
        payload = dumps(out, pickle.HIGHEST_PROTOCOL)
    except (EOFError, BrokenPipeError):
        raise
    except Exception as exc:  # the value's fault, unless a channel is what failed
        _check_sent(channels, writer, seq, exc)
        payload = dumps(_unserializable(seq, name, result, exc), pickle.HIGHEST_PROTOCOL)
    try:
        writer.send_payload(payload)
    except (EOFError, BrokenPipeError):
        raise
    except Exception as exc:
        _check_sent(channels, writer, seq, exc)
        raise


def _run_layered(limited: CallLimits, limits: Limits | None, trace: TraceParent | None,
                 writer: framing.FrameWriter, seq: int, call_id: str, name: str, pid: int,
                 run: Callable[..., ToolResult]) -> ToolResult:
    """A call with layers around it: its limits (``fork.limited``) and its span (``tracing``: the
    spans its tool finished go to the host in a SPANS frame, before its result)."""
    call: Callable[[], ToolResult] = run if limits is None else functools.partial(
        limited.run, limits, call_id, name, pid, run)
    if trace is None:
        return call()
    result, spans = tracing.run_traced(trace, call)
    if spans:
        try:
            writer.send(frames.spans_frame(seq, spans))
        except (TypeError, ValueError):  # an attribute value the wire cannot carry: the spans are dropped
            pass
    return result


def _data_only_dumps(obj: Any, _protocol: int) -> bytes:
    """``pickle.dumps``' place in a worker that ran a sandboxed call (see ``wire.dataonly``)."""
    return dataonly.encode(obj)


def _unserializable(seq: int, name: str, result: ToolResult, exc: BaseException) -> tuple[Any, ...]:
    return (frames.RESULT, seq, "error", None, error_info(
        exc, prefix=f"the result of tool '{name}' could not be serialized to send it to the host"),
        result.duration_s, None)


def _check_sent(channels: Channels, writer: framing.FrameWriter, seq: int, exc: BaseException) -> None:
    """A result could not be sent: if that is because a channel is gone (or is no longer what it
    was: a closed socket's number now names something else), leave; otherwise it was the value's fault."""
    import errno

    gone = channels.damaged()
    if not gone and isinstance(exc, OSError) and exc.errno in (errno.EBADF, errno.ENOTSOCK, errno.ENOTCONN):
        gone = ["channels"]
    if gone:
        _leave(writer, seq, gone)


def _leave(writer: framing.FrameWriter, seq: int, gone: list[str]) -> None:
    """This call damaged the worker's channels: say so as its result if the result pipe still works,
    then leave (raises ``_Leave``)."""
    what = f"closed or replaced the worker's {' and '.join(gone)} (descriptors it talks to the host through)"
    if "result pipe" not in gone:
        try:
            with writer.lock:
                framing.write_all(writer.fd, frames.frame(writer.encode(frames.leaving_frame(seq, what))))
        except OSError:
            pass
    raise _Leave(what)


def _lane_calls(parse: Any, context: dict[str, Any] | None, items: list[tuple[Any, ...]],
                writer: framing.FrameWriter, first_seq: int) -> Any:
    """The calls of a chunk of the line lane. A raw line is parsed here, where the host would pay for it
    per line; the host took its id and tool name from a strict pattern, so a line that parses to
    anything else (another id, a per-line timeout, a bad line) is not run: a MISMATCH frame sends it
    back to the host, in its place in the stream, and the next line starts."""
    for seq, (call_id, name, raw, arguments, timeout, lineno, meta) in enumerate(items, first_seq):
        if raw is not None:
            call = parse(raw, lineno)
            if type(call) is not ToolCall or call.id != call_id or call.name != name or call.timeout is not None:
                writer.send(frames.mismatch_frame(seq))
                continue
            arguments, meta = call.arguments, call.meta
        yield seq, (call_id, name, arguments, timeout, context, meta, None)  # a CallItem's fields (no trace)


__all__ = ["Channels", "ServedSession", "WorkerRuntime", "become_subreaper", "child_pids", "die_with_parent",
           "worker_main"]
