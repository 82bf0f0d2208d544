"""Tools that misbehave on purpose, for the red-team tests (importable by spec:
``tests/redteam/hostile_tools.py:TOOLS``, and by forked workers)."""

from __future__ import annotations

import sys
from typing import Any

from toolfork import ToolOutput, tool
from toolfork.tools.output import ContentBlock


@tool
def echo(text: str) -> str:
    """Return the text.

    Args:
        text: what to return
    """
    return text


@tool
def leave(code: int = 0) -> str:
    """Call sys.exit(code) in the middle of a call.

    Args:
        code: the exit code
    """
    sys.exit(code)


@tool(inline=True)
def leave_inline(code: int = 0) -> str:
    """The same, as an inline tool (runs in the host process).

    Args:
        code: the exit code
    """
    sys.exit(code)


@tool
def odd_output(kind: str) -> ToolOutput:
    """Return an output JSON has trouble with.

    Args:
        kind: surrogate | nan | bigint | deep | unprintable
    """
    def out(text: str, data: Any) -> ToolOutput:
        return ToolOutput(content=[ContentBlock(type="text", text=text)], data=data)

    if kind == "surrogate":
        return out("k\ud800 and \udfff", data={"key\ud800": "v\udc00"})
    if kind == "nan":
        return out("not a number", data=[float("nan"), float("inf"), 1.5])
    if kind == "bigint":
        return out("big", data=10 ** 5000)
    if kind == "deep":
        data: Any = []
        for _ in range(5000):
            data = [data]
        return out("deep", data=data)
    if kind == "unprintable":
        return out("odd", data=Unprintable())
    raise ValueError(kind)


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


TOOLS = [echo, leave, leave_inline, odd_output]


@tool
def size(text: str) -> int:
    """The length of the text.

    Args:
        text: any text
    """
    return len(text)


TOOLS.append(size)


# ------------------------------------------------------------------ tools that poison their warm worker
# Used by test_warm_worker.py: each leaves its process in a state the next call must not inherit, or
# touches the descriptors its worker talks to the host through.

import os  # noqa: E402
import signal  # noqa: E402
import stat  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from signal import alarm as _bound_alarm  # noqa: E402  (bound before the fork: no wrapper sees it)

from toolfork import ToolRuntime  # noqa: E402

FORGED_HEADER = b"\xff\xff\xff\x7f"  # read as a frame header by a reader that trusts lengths: 2 GiB


def _channel_like(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def fd_inodes() -> list[str]:
    """"dev:inode" of every descriptor this process has open above 2 (a test passes its own as ``skip``:
    a tool then touches only what its worker has that the test process had not, the worker's channels)."""
    out = []
    for fd in _open_fds(skip=()):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        out.append(f"{st.st_dev}:{st.st_ino}")
    return out


def _open_fds(skip: Any) -> list[int]:
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2:
            continue
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if f"{st.st_dev}:{st.st_ino}" not in skip:
            fds.append(fd)
    return sorted(fds)


@tool
def scribble(where: str, data_hex: str = FORGED_HEADER.hex(), skip: list[str] | None = None) -> str:
    """Write bytes into inherited pipes and sockets, as a native library with a stale fd would, then return.

    Args:
        where: "low" (fds 3..20) or "all" (every open fd above 2)
        data_hex: the bytes to write, in hex
        skip: "dev:inode" of descriptors to leave alone (the test process's own, inherited)
    """
    data = bytes.fromhex(data_hex)
    fds = [fd for fd in _open_fds(set(skip or ())) if where != "low" or fd <= 20]
    hit = 0
    for fd in fds:
        if not _channel_like(fd):
            continue
        try:
            os.set_blocking(fd, False)
            os.write(fd, data)
            hit += 1
        except OSError:
            pass
    return f"wrote into {hit} descriptors"


@tool
def close_channels(where: str, kinds: str = "sockets", skip: list[str] | None = None) -> str:
    """Close inherited sockets (or pipes too), as a library that closes "every fd above 2" would.

    Args:
        where: "low" (fds 3..20) or "all" (every open fd above 2)
        kinds: "sockets" or "pipes and sockets"
        skip: "dev:inode" of descriptors to leave alone (the test process's own, inherited)
    """
    fds = [fd for fd in _open_fds(set(skip or ())) if where != "low" or fd <= 20]
    closed = 0
    for fd in fds:
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISSOCK(mode) or (kinds != "sockets" and stat.S_ISFIFO(mode)):
            os.close(fd)
            closed += 1
    return f"closed {closed}"


@tool
def big_text(n: int) -> str:
    """Return n characters (from 256 KiB on, a large frame: by memory file).

    Args:
        n: how many
    """
    return "b" * n


@tool
def progress_from_threads(threads: int, each: int, big_every: int = 0, big_size: int = 300_000,
                          runtime: ToolRuntime | None = None) -> int:
    """Emit progress from many threads at once; every big_every-th value is big_size characters.

    Args:
        threads: how many threads
        each: values per thread
        big_every: every n-th value of a thread is big (0: none)
        big_size: the size of a big value
    """
    assert runtime is not None
    start = threading.Barrier(threads)

    def emit(t: int) -> None:
        start.wait()
        for i in range(each):
            pad = "p" * big_size if big_every and i % big_every == 0 else ""
            runtime.emit_progress({"t": t, "i": i, "pad": pad})

    workers = [threading.Thread(target=emit, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return threads * each


@tool
def mess_signals(what: str) -> str:
    """Leave the process's signal state changed, and return.

    Args:
        what: ignore_term, block_term, swallow_term, alarm, bound_alarm, itimer, prof_timer, pending_alrm or
            unblock_alrm (or nothing)
    """
    if what == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif what == "block_term":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    elif what == "swallow_term":
        signal.signal(signal.SIGTERM, lambda *_: None)
    elif what == "alarm":
        signal.alarm(1)
    elif what == "bound_alarm":
        _bound_alarm(1)
    elif what == "itimer":
        signal.setitimer(signal.ITIMER_REAL, 0.3, 0.3)
    elif what == "prof_timer":
        signal.setitimer(signal.ITIMER_PROF, 0.2, 0.2)
    elif what == "pending_alrm":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        os.kill(os.getpid(), signal.SIGALRM)
    elif what == "unblock_alrm":
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
    elif what != "nothing":
        raise ValueError(what)
    return what


@tool
def hang_then_mark(path: str, hang: bool = True) -> str:
    """Hang until stopped (or return at once); the finally block writes ``path`` (so a test sees
    whether it ran).

    Args:
        path: the file the finally block writes
        hang: False to return at once (a quick call, for the pool's history)
    """
    if not hang:
        return "quick"
    try:
        while True:
            time.sleep(0.05)
    finally:  # written whole, then renamed: a test polling for the file never reads it half-written
        with open(path + ".part", "w") as f:
            f.write("finally ran")
        os.replace(path + ".part", path)


@tool
def busy(seconds: float, cpu: bool = False) -> str:
    """Sleep (or burn CPU time) for a while, then return.

    Args:
        seconds: how long (CPU seconds when cpu)
        cpu: burn CPU instead of sleeping
    """
    if cpu:
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
    else:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(0.02)
    return "done"


@tool
def leave_zombie() -> int:
    """Fork a child that exits at once, and never wait for it."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    return pid


#: Set by a test before it builds the executor whose workers use it: an Executor of the test's process.
OUTER: Any = None


@tool
def use_outer(how: str) -> str:
    """Use the Executor the program built before this worker was forked.

    Args:
        how: run | submit | stream | imap | arun | acall
    """
    import asyncio

    from toolfork.executor import ToolCall

    call = ToolCall("inner", "echo", {"text": "hi"})
    if how == "run":
        return str(OUTER.run([call])[0].status)
    if how == "stream":
        return str([type(e).__name__ for e in OUTER.stream([call])])
    if how == "imap":
        return str([r.status for r in OUTER.imap([call])])
    if how == "arun":
        return str(asyncio.run(OUTER.arun([call]))[0].status)
    if how == "acall":
        return str(asyncio.run(OUTER.acall(call)).status)
    return str(OUTER.submit(call).result(timeout=60).status)


WARM_TOOLS = [echo, scribble, close_channels, big_text, progress_from_threads, mess_signals, hang_then_mark, busy,
              leave_zombie, use_outer]


# ----------------------------------------------------------------------------- the worker's parent

@tool
def signal_parent(sig: str) -> str:
    """Send a signal to this worker's parent (the template that forked it), then return.

    Args:
        sig: the signal's name (SIGKILL, SIGSTOP, SIGTERM)
    """
    os.kill(os.getppid(), getattr(signal, sig))
    if sig != "SIGSTOP":
        time.sleep(0.5)  # a killed template takes its workers with it: this call ends here
    return "sent"


@tool
def nap(seconds: float, text: str) -> str:
    """Sleep, then return the text.

    Args:
        seconds: how long
        text: what to return
    """
    time.sleep(seconds)
    return text


PARENT_TOOLS = [echo, signal_parent, nap]
