"""Attacks on a sandboxed session, each run in a fresh interpreter as root or as nobody:
``python -m tests.redteam.sandbox.session_attacks NAME WORKDIR`` prints one JSON line of what it saw.

The tools run in a session opened with ``Limits(network=False, write_paths=[WORKDIR/ws])`` (and the
cgroup's limits where a scenario asks for them); what each attack did is judged here, in the host, by
its effect: a file that is or is not there, a listener that did or did not get a connection, a process
that is or is not alive."""

from __future__ import annotations

import errno
import json
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolfork import Limits, ToolRuntime, tool
from toolfork.executor import Executor, ToolCall
from toolfork.governance.enforceable import LimitsNotEnforceable

SECRET = "TOOLFORK_SESSION_SECRET"


@tool
def cell(code: str, runtime: ToolRuntime) -> Any:
    """Run Python against the session's namespace; the value of ``out`` is the result.

    Args:
        code: Python source
    """
    return _exec(code, runtime.state)


def _exec(code: str, state: Any) -> Any:
    space = state if state is not None else {}
    space.pop("out", None)
    exec(code, space)  # the point: unrestricted code, contained by the sandbox alone
    return space.get("out")


class Evil:
    """A value whose unpickling runs a command (``touch`` of its marker)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (os.system, (f"touch {self.marker}",))


@tool
def plant(marker: str, runtime: ToolRuntime) -> str:
    """Keep a value whose unpickling runs a command in the session's state (nothing else there).

    Args:
        marker: the file its command touches
    """
    runtime.state["keep"] = Evil(marker)
    return "planted"


@tool
def exec_cell(code: str, runtime: ToolRuntime) -> Any:
    """Run a cell of Python in the session's namespace (as a code agent's interpreter does); the value
    of ``out`` is the result.

    Args:
        code: Python source
    """
    return _exec(code, runtime.state)


def _open(ex: Executor, work: Path, **limits: Any) -> Any:
    ws = work / "ws"
    ws.mkdir(exist_ok=True)
    ws.chmod(0o777)
    return ex.session(dict, limits=Limits(network=False, write_paths=[str(ws)], **limits), checkpoint=True)


def interpreter_reads() -> list[str]:
    """What a session reading only its own paths needs besides: the interpreter, toolfork, the system."""
    return sorted({sys.prefix, sys.base_prefix, str(Path(__file__).resolve().parents[3]), "/usr", "/lib", "/lib64",
                   "/etc", "/dev/null"})


def workspaces(work: Path, *names: str) -> list[Path]:
    """Directories under ``work`` that root and nobody can both write (a session's workspaces)."""
    made = [work / name for name in names]
    for ws in made:
        ws.mkdir()
        ws.chmod(0o777)
    return made


def _run(s: Any, code: str, timeout: float | None = 20) -> Any:
    if s.lost is not None:  # an attacking session may break itself: it alone
        return {"status": "lost", "data": None, "error": str(s.lost)}
    r = s.run([ToolCall(f"c{time.monotonic_ns()}", "cell", {"code": code}, timeout=timeout)])[0]
    data = None if r.output is None else r.output.data if r.output.data is not None else r.output.as_text()
    return {"status": r.status, "data": data,
            "error": None if r.error is None else f"{r.error.type}: {r.error.message}"}


# ---------------------------------------------------------------------------------------------- scenarios

def basics(ex: Executor, work: Path) -> dict[str, Any]:
    """State persists; the factory and every cell run inside (own pid namespace, minimal environment);
    a crash, a timeout and a raise leave the state as before the failed cell."""
    seen: dict[str, Any] = {}
    with _open(ex, work) as s:
        seen["pid_outside"] = s.pid
        seen["first"] = _run(s, "import os\nn = 1\nout = [n, os.getpid(), sorted(os.environ)]")
        seen["second"] = _run(s, "n += 1\nout = n")
        seen["crash"] = _run(s, "n = -1\nos._exit(3)")
        seen["after_crash"] = _run(s, "out = n")
        seen["timeout"] = _run(s, "n = -2\nwhile True: pass", timeout=0.5)
        seen["after_timeout"] = _run(s, "out = n")
        seen["snapshot_n"] = s.snapshot().get("n")
        seen["restores"] = s.restores
    return seen


def budgets(ex: Executor, work: Path) -> dict[str, Any]:
    """cpu_s per call over every process of the call; memory_mb held across cells for the session;
    processes for the session. As nobody (no cgroup here) the session is refused at open, naming why."""
    seen: dict[str, Any] = {}
    try:
        s = _open(ex, work, cpu_s=1.0, memory_mb=150, processes=6)
    except LimitsNotEnforceable as exc:
        return {"refused": str(exc)}
    with s:
        _run(s, "n = 1")
        seen["spin_children"] = _run(s, "import os\nn = 2\nfor _ in range(2):\n    if os.fork() == 0:\n"
                                        "        while True: pass\nwhile True: pass", timeout=30)
        seen["after_spin"] = _run(s, "out = n")
        grow = "chunks = globals().setdefault('chunks', [])\nchunks.append(b'1' * (45 * 2**20))\nout = len(chunks)"
        seen["grow"] = [_run(s, grow) for _ in range(4)]
        seen["after_grow"] = _run(s, "out = len(chunks)")
        _run(s, "chunks.clear()")
        seen["bomb"] = _run(s, "import os, time\nmade = 0\nout = None\ntry:\n    while made < 200:\n"
                               "        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n"
                               "        made += 1\nexcept OSError as exc:\n    out = [made, exc.errno]", timeout=30)
        seen["after_bomb"] = _run(s, "out = len(chunks)")
    return seen


def descriptors(ex: Executor, work: Path) -> dict[str, Any]:
    """Session B writes frames and junk into every descriptor it has, signals every pid it can name
    (its parent, -1, the host's, the template's, session A's outer) and looks for A's state; A's calls
    stay A's own and the host and template live on."""
    from toolfork.executor.wire import frames, framing

    seen: dict[str, Any] = {}
    a = _open(ex, work)
    b = _open(ex, work)
    c = _open(ex, work)
    with a, b, c:
        seen["a1"] = _run(a, "secret = 'a-state-123'\nout = secret")
        frame = frames.frame(framing.encode(frames.result_frame(1, _fake_result(), None)))
        code = ("import os\nwritten = []\nfor name in os.listdir('/proc/self/fd'):\n    fd = int(name)\n"
                "    for data in (FRAME, b'junk' * 100):\n        try:\n            os.write(fd, data)\n"
                "            written.append(fd)\n        except OSError:\n            pass\nout = sorted(set(written))")
        seen["b_wrote"] = _run(b, f"FRAME = {frame!r}\n{code}")
        pids = [os.getpid(), ex.backend.template_pid, a.pid]
        seen["c_signals"] = _run(c, f"import os, signal\nsent = []\nfor p in {pids!r} + [os.getppid(), -1, 1]:\n"
                                    "    try:\n        os.kill(p, signal.SIGSTOP)\n        sent.append(p)\n"
                                    "    except OSError:\n        pass\nout = sent")
        seen["c_reads"] = _run(c, f"import os\nfound = []\nfor p in ['{a.pid}', '1', '2', '3']:\n    for f in "
                                  "('environ', 'cmdline', 'mem'):\n        try:\n"
                                  "            found.append(open(f'/proc/{p}/{f}', 'rb').read(4096).hex())\n"
                                  "        except OSError:\n            pass\nout = found")
        seen["secret_hex"] = b"a-state-123".hex()
        seen["a2"] = _run(a, "out = secret")
        seen["host_state"] = _state(os.getpid())
        seen["template_state"] = _state(ex.backend.template_pid)
        seen["a_state"] = _state(a.pid)
        seen["pool"] = ex.run([ToolCall("p", "cell", {"code": "out = 7"})])[0].status
        seen["c_after"] = _run(c, "out = 'c goes on'")
    return seen


def outside(ex: Executor, work: Path) -> dict[str, Any]:
    """A listener on 127.0.0.1 and a unix socket in the host; a file outside the workspace to write,
    chmod, utime; a daemon (double fork, setsid) and a program started in its own session, which must
    be gone after close(); an object whose unpickling runs a command, as a result and in the state."""
    seen: dict[str, Any] = {}
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    unix_path = str(work / "host.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(unix_path)
    unix.listen()
    unix.settimeout(0.2)
    dgram_path = str(work / "host-dgram.sock")  # a datagram socket anyone may send to, as /dev/log
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dgram.bind(dgram_path)
    os.chmod(dgram_path, 0o777)
    dgram.settimeout(0.2)
    victim = work / "victim.txt"
    victim.write_text("host")
    victim.chmod(0o644)
    marker = work / "unpickled"
    beat = work / "ws" / "beat"
    # the daemon's mark: its own per run (the root and nobody runs of this scenario run side by side)
    mark = f"61.{os.getpid()}{secrets.randbelow(10**6):06d}"
    with _open(ex, work) as s:
        seen["tcp"] = _run(s, f"import socket\nc = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
                              "out = 'connected'")
        seen["unix"] = _run(s, f"import socket\nc = socket.socket(socket.AF_UNIX)\nc.connect({unix_path!r})\n"
                               "out = 'connected'")
        seen["dgram"] = _run(s, f"import socket\na, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
                                f"a.sendto(b'ESCAPED', {dgram_path!r})\nout = 'sent'")
        seen["write"] = _run(s, f"open({str(work / 'outside.txt')!r}, 'w').write('x')\nout = 'wrote'")
        seen["chmod"] = _run(s, f"import os\nos.chmod({str(victim)!r}, 0o777)\nout = 'chmod'")
        seen["utime"] = _run(s, f"import os\nos.utime({str(victim)!r}, (0, 0))\nout = 'utime'")
        seen["append"] = _run(s, f"open({str(victim)!r}, 'a').write('sandbox')\nout = 'appended'")
        seen["inside"] = _run(s, f"open({str(work / 'ws' / 'in.txt')!r}, 'w').write('ok')\nout = 'ok'")
        seen["daemon"] = _run(s, f"import os, time, subprocess\nsubprocess.Popen(['sleep', '{mark}'], "
                                 "start_new_session=True)\nif os.fork() == 0:\n    os.setsid()\n"
                                 "    if os.fork() == 0:\n        while True:\n"
                                 f"            open({str(beat)!r}, 'a').write('.')\n            time.sleep(0.05)\n"
                                 "    os._exit(0)\nos.wait()\nout = 'started'")
        evil = (f"import os\nclass Evil:\n    def __reduce__(self):\n        return (os.system, "
                f"('touch {marker}',))\n")
        seen["evil_result"] = _run(s, f"{evil}out = Evil()")
        with _open(ex, work) as planted:  # a state that is all pickle: nothing but the planted value
            seen["planted"] = planted.run([ToolCall("p", "plant", {"marker": str(marker)})])[0].status
            try:
                seen["evil_snapshot"] = repr(planted.snapshot())
            except Exception as exc:  # failing cleanly is allowed: running the command is not
                seen["evil_snapshot"] = f"{type(exc).__name__}: {exc}"
        _until(lambda: _size(beat) > 0 and _alive_with(mark))  # both started, under load too
        seen["beats_open"] = _size(beat)
    _until(lambda: not _alive_with(mark))  # the sandbox is killed after close() returns
    time.sleep(0.3)
    before = _size(beat)
    time.sleep(0.5)
    seen["beats_after_close"] = [before, _size(beat)]
    seen["sleep_alive"] = _alive_with(mark)
    seen["tcp_accepted"] = _accepted(listener)
    seen["unix_accepted"] = _accepted(unix)
    try:
        seen["dgram_got"] = dgram.recv(100).decode(errors="replace")
    except (TimeoutError, OSError):
        seen["dgram_got"] = None
    seen["outside_exists"] = (work / "outside.txt").exists()
    st = victim.stat()
    seen["victim"] = [oct(st.st_mode & 0o7777), st.st_mtime > 1000, victim.read_text()]
    seen["unpickled"] = marker.exists()
    return seen


ESCAPES = {
    # CVE-2025-5120: getattr reaching a restricted module (posix, os) through builtins
    "getattr_to_posix": "import builtins\nposix = getattr(builtins, '__import__')('posix')\n"
                        "out = posix.system('touch {ws}/ran_getattr; touch {marker}')",
    # CVE-2025-9959: the class hierarchy walked to subprocess.Popen
    "subclasses_to_popen": "__import__('subprocess')\n"
                           "popen = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'Popen'][0]\n"
                           "out = popen(['sh', '-c', 'touch {ws}/ran_popen; touch {marker}']).wait()",
    "ctypes_libc_system": "import ctypes\nout = ctypes.CDLL(None).system(b'touch {ws}/ran_ctypes; touch {marker}')",
    "os_system": "import os\nout = os.system('touch {ws}/ran_os_system; touch {marker}')",
    "write_outside": "open('{ws}/ran_write', 'w').write('x')\nopen('{marker}', 'w').write('escaped')",
    "connect_127": "import socket\nopen('{ws}/ran_connect', 'w').write('x')\n"
                   "socket.create_connection(('127.0.0.1', {port}), timeout=2)\nout = 'connected'",
    "daemons": "import os, subprocess\nopen('{ws}/ran_daemons', 'w').write('x')\n"
               "subprocess.Popen(['sleep', '{mark1}'], start_new_session=True)\n"
               "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
               "        os.execvp('sleep', ['sleep', '{mark2}'])\n    os._exit(0)\nout = os.wait()[1]",
    "host_environment": "import os, ctypes\nopen('{ws}/ran_env', 'w').write('x')\n"
                        "libc = ctypes.CDLL(None)\nlibc.getenv.restype = ctypes.c_char_p\n"
                        "out = [os.environ.get('{secret}'), os.getenv('{secret}'), libc.getenv(b'{secret}'),\n"
                        "       open('/proc/self/environ', 'rb').read().decode(errors='replace'), sorted(os.environ)]",
}


def escapes(ex: Executor, work: Path) -> dict[str, Any]:
    """The published escapes of smolagents' local executor, as ordinary Python in a sandboxed session's
    interpreter cell; each judged in the host by its effect (a marker outside the workspace, a
    connection to a host listener, a process alive after close, the host's secret seen)."""
    seen: dict[str, Any] = {}
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    ws = work / "ws"
    # the daemons' marks: this run's own (the root and nobody runs of this scenario run side by side)
    mark1, mark2 = (f"61.{os.getpid()}{secrets.randbelow(10**6):06d}" for _ in range(2))
    with _open(ex, work) as s:
        for name, code in ESCAPES.items():
            marker = work / f"escaped_{name}"
            text = code.format(ws=ws, marker=marker, port=listener.getsockname()[1], secret=SECRET, mark1=mark1,
                               mark2=mark2)
            r = s.run([ToolCall(name, "exec_cell", {"code": text}, timeout=20)])[0]
            seen[name] = {"status": r.status, "out": None if r.output is None else r.output.data,
                          "error": None if r.error is None else r.error.message, "marker": marker.exists()}
        _until(lambda: _alive_with(mark1) and _alive_with(mark2))  # exec'd by now, under load too
        seen["daemons_alive_open"] = [_alive_with(mark1), _alive_with(mark2)]
    _until(lambda: not _alive_with(mark1) and not _alive_with(mark2))  # the kill is asynchronous
    seen["daemons_alive_after_close"] = _alive_with(mark1) or _alive_with(mark2)
    seen["accepted"] = _accepted(listener)
    seen["ran"] = sorted(p.name for p in ws.glob("ran_*"))
    seen["secret"] = os.environ[SECRET]
    return seen


def spare_paths(ex: Executor, work: Path) -> dict[str, Any]:
    """A spare enters the sandbox ahead without its paths, so the session that takes it may have other
    read_paths/write_paths than the one before (each episode its own workspace): its OPEN locks them.
    Session B, opened on a spare entered after session A (workspace a), writes only its own workspace b
    and reads neither a nor a file beside them; its process started before B's open was called."""
    seen: dict[str, Any] = {}
    reads = interpreter_reads()
    a, b = workspaces(work, "a", "b")
    (a / "a_secret.txt").write_text("episode a")
    (work / "beside.txt").write_text("host")

    def limits(ws: Path) -> Limits:
        return Limits(network=False, read_paths=[*reads, str(ws)], write_paths=[str(ws)])

    with ex.session(dict, limits=limits(a), checkpoint=True) as s:
        seen["a_write"] = _run(s, f"open({str(a / 'in_a.txt')!r}, 'w').write('a')\nout = 'wrote'")
    time.sleep(1.0)  # the spares enter meanwhile (ahead of any session of this sandbox, whatever its paths)
    with ex.session(dict, limits=limits(b), checkpoint=True) as s:
        seen["b_from_spare"] = s.pid is not None and _spare_age(s.pid) >= 0.5
        seen["b_write"] = _run(s, f"open({str(b / 'in_b.txt')!r}, 'w').write('b')\nout = 'wrote'")
        seen["b_write_a"] = _run(s, f"open({str(a / 'from_b.txt')!r}, 'w').write('b')\nout = 'wrote'")
        seen["b_read_a"] = _run(s, f"out = open({str(a / 'a_secret.txt')!r}).read()")
        seen["b_read_beside"] = _run(s, f"out = open({str(work / 'beside.txt')!r}).read()")
        seen["b_pid"] = _run(s, "import os\nout = os.getpid()")
        seen["b_after_timeout"] = _run(s, "while True: pass", timeout=0.5)
        seen["b_write_a_after_rollback"] = _run(s, f"open({str(a / 'from_b2.txt')!r}, 'w').write('b')\nout = 'x'")
    seen["a_files"] = sorted(p.name for p in a.iterdir())
    seen["b_files"] = sorted(p.name for p in b.iterdir())
    return seen


def locked_state(beside: str) -> dict[str, Any]:
    """A session's factory that records, as it runs, how locked its process already is: no_new_privs,
    its seccomp mode, whether it can read or write ``beside`` (a file outside its read_paths and
    write_paths), and when it ran. Its namespace is the session's state (``cell`` runs in it)."""
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    seen: dict[str, Any] = {"no_new_privs": status.get("NoNewPrivs", "").strip(),
                            "seccomp": status.get("Seccomp", "").strip(), "built": time.time()}
    for what, mode in (("read_beside", "r"), ("write_beside", "a")):
        try:
            with open(beside, mode):
                seen[what] = "opened"
        except OSError as exc:
            seen[what] = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    return seen


def ahead(ex: Executor, work: Path) -> dict[str, Any]:
    """A session opened ahead (``Executor.session_ahead``) ran its factory before its open was called:
    it must have run it locked (no_new_privs, seccomp, Landlock: ``beside`` neither readable nor
    writable), with the paths of its own Limits. A session whose Limits differ from those opened ahead
    (another workspace) is never handed that one: its factory runs at its own open, with its own paths."""
    seen: dict[str, Any] = {"discarded": 0}
    reads = interpreter_reads()
    a, b = workspaces(work, "a", "b")
    beside = str(work / "beside.txt")
    Path(beside).write_text("host")

    def limits(ws: Path) -> Limits:
        return Limits(network=False, read_paths=[*reads, str(ws)], write_paths=[str(ws)])

    def discarded() -> None:
        seen["discarded"] += 1

    with ex.session(dict, limits=limits(a), checkpoint=True):
        pass  # the spares a sandbox of these Limits uses are made
    seen["kept"] = ex.session_ahead(locked_state, beside, limits=limits(a), checkpoint=True, on_discard=discarded)
    time.sleep(1.0)  # it opens meanwhile
    asked = time.time()
    with ex.session(locked_state, beside, limits=limits(a), checkpoint=True) as s:
        seen["a_built_before_open"] = _run(s, "out = built")["data"] < asked
        seen["a_factory"] = _run(s, "out = [no_new_privs, seccomp, read_beside, write_beside]")
        seen["a_write_a"] = _run(s, f"open({str(a / 'in_a.txt')!r}, 'w').write('a')\nout = 'wrote'")
        seen["a_write_b"] = _run(s, f"open({str(b / 'from_a.txt')!r}, 'w').write('a')\nout = 'wrote'")
        seen["a_read_beside"] = _run(s, f"out = open({beside!r}).read()")
    ex.session_ahead(locked_state, beside, limits=limits(a), checkpoint=True, on_discard=discarded)
    time.sleep(1.0)
    asked = time.time()
    with ex.session(locked_state, beside, limits=limits(b), checkpoint=True) as s:  # another workspace
        seen["b_built_before_open"] = _run(s, "out = built")["data"] < asked
        seen["b_factory"] = _run(s, "out = [no_new_privs, seccomp, read_beside, write_beside]")
        seen["b_write_a"] = _run(s, f"open({str(a / 'from_b.txt')!r}, 'w').write('b')\nout = 'wrote'")
        seen["b_write_b"] = _run(s, f"open({str(b / 'in_b.txt')!r}, 'w').write('b')\nout = 'wrote'")
    seen["discarded_before_close"] = seen["discarded"]
    ex.close()  # the one opened ahead for a, never taken, goes now
    seen["a_files"] = sorted(p.name for p in a.iterdir())
    seen["b_files"] = sorted(p.name for p in b.iterdir())
    return seen


def _spare_age(pid: int) -> float:
    """Seconds since process ``pid`` started (from /proc: its start in clock ticks since boot)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        started = int(f.read().rsplit(b")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime") as f:
        return float(f.read().split()[0]) - started


def spans(ex: Executor, work: Path) -> dict[str, Any]:
    """A sandboxed session's tool forges spans (another trace and parent, toolfork's scope, a start 5 ns
    before the epoch, a self-parent) under a host that traces with the real SDK: they are data about its
    call, as a sandboxed call's are."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.redteam.sandbox.telemetry import _ids

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    try:
        with _open(ex, work) as s, trace.get_tracer("tests.redteam.host").start_as_current_span("batch"):
            status = s.run([ToolCall("h", "hostile", {})])[0].status
        finished = exporter.get_finished_spans()
    finally:
        provider.shutdown()
    return {"status": status, "spans": [_ids(x) for x in finished]}


# ---------------------------------------------------------------------------------------------- helpers

def _until(done: Callable[[], bool], within: float = 5.0) -> None:
    end = time.monotonic() + within
    while not done() and time.monotonic() < end:
        time.sleep(0.05)


def _fake_result() -> Any:
    from toolfork.executor.types import ToolResult
    from toolfork.tools.output import ToolOutput

    return ToolResult("forged", "cell", "ok", output=ToolOutput(data="forged by B"))


def _state(pid: int | None) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3].decode()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _alive_with(word: str) -> bool:
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if word.encode() in f.read():
                        return True
            except OSError:
                pass
    return False


def _accepted(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except (TimeoutError, OSError):
        return False
    conn.close()
    return True


SCENARIOS = {"basics": basics, "budgets": budgets, "descriptors": descriptors, "outside": outside,
             "escapes": escapes, "spans": spans, "spare_paths": spare_paths, "ahead": ahead}


def main() -> None:
    name, work = sys.argv[1], Path(sys.argv[2])
    os.environ[SECRET] = "host-secret-42"  # before the executor starts: a session must not see it
    from tests.redteam.sandbox.telemetry import forge_spans
    from toolfork.tools.tool import Tool

    with Executor([cell, exec_cell, plant, Tool("hostile", fn=forge_spans)], mode="fork", workers=1, timeout=60) as ex:
        seen = SCENARIOS[name](ex, work)
    seen["leftover_children"] = [p for p in _children() if p]
    print(json.dumps(seen, default=str))


def _children() -> list[int]:
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, lambda *_: os._exit(9))
    signal.alarm(150)
    main()
