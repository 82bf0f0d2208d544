"""The escape attempts: each scenario sets up what a host would have (servers, open files, threads),
runs one hostile tool in the sandbox through a real Executor, and returns what the host saw.

Run as root in the test process (``run_here``), or as an unprivileged user in a subprocess
(``python -m tests.redteam.sandbox.scenarios NAME WORKDIR``, printing the evidence as JSON): the same
code both ways. A scenario never decides pass or fail: it reports, and the test asserts.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.raw_syscalls import HIGH, raw_syscall
from toolfork import Limits
from toolfork.executor import Executor
from toolfork.governance import LimitsNotEnforceable
from toolfork.tools.tool import Tool

Evidence = dict[str, Any]
CALL_TIMEOUT = 30.0
CHANNELS_FROM = 1024  # the worker's channels sit at 4096 - 64 (fork.worker): not the host's descriptors


def outcome(tool: Tool, arguments: dict[str, Any], **executor: Any) -> Evidence:
    """Run one call of ``tool`` in a fresh Executor; its status, error and output data. Where the start is
    refused (a limit only a cgroup can bound, and no cgroup here: an unprivileged user without a delegated
    subtree), ``refused`` says why, and the call is attacked again under ``enforce="best-effort"``."""
    try:
        return _outcome(tool, arguments, **executor)
    except LimitsNotEnforceable as exc:
        limits = tool.limits.model_copy(update={"enforce": "best-effort"}) if tool.limits is not None else None
        ev = _outcome(Tool(tool.name, description=tool.description, fn=tool.function, limits=limits), arguments,
                      **executor)
        ev["refused"] = str(exc)
        return ev


def _outcome(tool: Tool, arguments: dict[str, Any], **executor: Any) -> Evidence:
    with Executor([tool], workers=1, timeout=CALL_TIMEOUT, **executor) as ex:
        started = time.monotonic()
        (r,) = ex.run([{"id": "attack", "name": tool.name, "arguments": arguments}])
        took = time.monotonic() - started
    data = None if r.output is None else r.output.data
    if data is None and r.output is not None and r.output.content:
        data = r.output.content[0].text
    return {"status": r.status, "error_type": None if r.error is None else r.error.type,
            "error": None if r.error is None else r.error.message, "output": data, "took_s": took}


class TcpSink:
    """A TCP server of the host on 127.0.0.1: what reached it (connections are left in the backlog, and
    read after the call)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def received(self) -> list[bytes]:
        self.sock.setblocking(False)
        got = []
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                break
            conn.settimeout(0.5)
            try:
                got.append(conn.recv(4096))
            except OSError:
                got.append(b"")
            conn.close()
        self.sock.close()
        return got


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


# ---------------------------------------------------------------- tools (run in the sandbox)

def reach_host_network(host_pid: int, port: int) -> dict[str, Any]:
    """setns() into the host's network namespace (by its /proc), then connect to 127.0.0.1:port."""
    out: dict[str, Any] = {}
    try:
        fd = os.open(f"/proc/{host_pid}/ns/net", os.O_RDONLY)
        rc = _libc().setns(fd, 0x40000000)
        out["setns"] = "ok" if rc == 0 else os.strerror(ctypes.get_errno())
    except OSError as exc:
        out["setns"] = f"open: {exc.strerror}"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"ESCAPED")
        out["connect"] = "ok"
    except OSError as exc:
        out["connect"] = exc.strerror or str(exc)
    return out


def use_inherited_descriptors(port: int) -> dict[str, Any]:
    """Every descriptor above 2 but the call's own channels (kept high, near 4096): send through sockets
    (connect unconnected ones to 127.0.0.1:port), read and append to files."""
    found: dict[str, Any] = {}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2 or fd >= CHANNELS_FROM:
            continue
        try:
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            s = None
        if s is not None:
            try:
                try:
                    s.sendto(b"ESCAPED", ("127.0.0.1", port)) if s.type == socket.SOCK_DGRAM else s.send(b"ESCAPED")
                    found[name] = "sent"
                except OSError:
                    s.settimeout(2)
                    s.connect(("127.0.0.1", port))
                    s.send(b"ESCAPED")
                    found[name] = "connected and sent"
            except OSError as exc:
                found[name] = f"socket: {exc.strerror or exc}"
            finally:
                s.close()
            continue
        try:
            data = os.pread(fd, 4096, 0)
            found[name] = f"read {data[:64]!r}"
        except OSError as exc:
            found[name] = f"read: {exc.strerror}"
        try:
            os.write(fd, b"ESCAPED\n")
            found[name] += "; wrote"
        except OSError as exc:
            found[name] += f"; write: {exc.strerror}"
    return found


def lift_limit(which: str, work: str) -> str:
    """setrlimit back to the hard limit, then go past the call's limit."""
    import resource

    names = {"memory": ("RLIMIT_AS", "RLIMIT_DATA"), "file": ("RLIMIT_FSIZE",), "files": ("RLIMIT_NOFILE",),
             "cpu": ("RLIMIT_CPU",)}[which]
    lifted = []
    for name in names:
        r = getattr(resource, name)
        _soft, hard = resource.getrlimit(r)
        for target in (resource.RLIM_INFINITY, hard, hard):
            try:
                resource.setrlimit(r, (target, target))
                lifted.append(f"{name}={target}")
                break
            except (OSError, ValueError):
                continue
    if which == "memory":
        block = bytearray(300 * 1024 * 1024)
        block[::4096] = b"x" * len(block[::4096])
    elif which == "file":
        with open(os.path.join(work, "big"), "wb") as f:
            for _ in range(40):
                f.write(b"x" * (1024 * 1024))
    elif which == "files":
        held = [open(os.devnull) for _ in range(600)]
        del held
    elif which == "cpu":
        signal.setitimer(signal.ITIMER_PROF, 0)
        for sig in (signal.SIGXCPU, signal.SIGPROF):
            signal.signal(sig, signal.SIG_IGN)
        end = time.process_time() + 6
        while time.process_time() < end:
            try:  # swallow the limit's error, as a hostile tool would
                while time.process_time() < end:
                    pass
            except BaseException:
                continue
    return "went past the limit: " + ", ".join(lifted)


def shared_mmap() -> str:
    """Map 400 MB of shared anonymous memory and touch every page."""
    import mmap

    m = mmap.mmap(-1, 400 * 1024 * 1024)
    for i in range(0, len(m), 4096):
        m[i] = 1
    return f"mapped and touched {len(m)} bytes"


def pbkdf2() -> str:
    """A billion PBKDF2 iterations in one C call."""
    import hashlib

    hashlib.pbkdf2_hmac("sha256", b"password", b"salt", 10**9)
    return "finished 10**9 iterations"


def offline_probe(port: int) -> dict[str, Any]:
    """A plain sandboxed call: its network, its threads."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"ESCAPED")
        net = "connected"
    except OSError as exc:
        net = exc.strerror or str(exc)
    return {"network": net, "threads": len(os.listdir("/proc/self/task"))}


def reach_unix_sockets(path: str, abstract: str) -> dict[str, str]:
    """Connect to a filesystem and an abstract unix socket of the host: with socket(), and with the
    socket system call given AF_UNIX plus a bit above the int (the kernel reads AF_UNIX)."""
    out = {}
    for name, address in (("path", path), ("abstract", "\0" + abstract)):
        for how in ("", "_high_bits"):
            try:
                if how:
                    fd = raw_syscall("socket", socket.AF_UNIX | HIGH, socket.SOCK_STREAM, 0)
                    if fd < 0:
                        raise OSError(-fd, os.strerror(-fd))
                    s = socket.socket(fileno=fd)
                else:
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                with s:
                    s.settimeout(2)
                    s.connect(address)
                    s.sendall(b"ESCAPED")
                out[name + how] = "connected"
            except OSError as exc:
                out[name + how] = exc.strerror or str(exc)
    return out


def reach_dgram_sockets(path: str, abstract: str) -> dict[str, str]:
    """From a socket pair of its own (socketpair needs no socket()): a datagram sent with an address, and
    the pair's end connected again, to a filesystem and an abstract datagram socket of the host; also
    with SOCK_RAW, which a unix socket pair takes as SOCK_DGRAM."""
    out = {}
    for kind, type_ in (("dgram", socket.SOCK_DGRAM), ("raw", socket.SOCK_RAW)):
        for name, address in (("path", path), ("abstract", "\0" + abstract)):
            for how in ("sendto", "connect"):
                key = f"{kind}_{name}_{how}"
                try:
                    a, b = socket.socketpair(socket.AF_UNIX, type_)
                except OSError as exc:
                    out[key] = f"socketpair: {exc.strerror or exc}"
                    continue
                try:
                    if how == "sendto":
                        a.sendto(f"ESCAPED {key}".encode(), address)
                    else:
                        a.connect(address)
                        a.send(f"ESCAPED {key}".encode())
                    out[key] = "sent"
                except OSError as exc:
                    out[key] = exc.strerror or str(exc)
                finally:
                    a.close()
                    b.close()
    return out


AF_NETLINK, NETLINK_USERSOCK = 16, 2
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def _tried(out: dict[str, Any], key: str, attempt: Callable[[], Any]) -> Any:
    """``attempt()``'s value, "ok" in ``out[key]``; or the error's words there and None."""
    try:
        value = attempt()
        out[key] = "ok"
        return value
    except OSError as exc:
        out[key] = exc.strerror or str(exc)
        return None


def _await_file(path: str, limit: float = 20.0) -> bool:
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def meet_another_call(role: str, token: str, port: int, host_port: int, host_path: str,
                      sync: str) -> dict[str, Any]:
    """Two network=False calls of one pool at once. "host" tries every way to be found by another call (a
    TCP and a UDP port on 0.0.0.0, a socket pair's end bound to an abstract name, a NETLINK_USERSOCK
    socket, the loopback brought up) and holds what it got until "guest" has looked for it (connects,
    sends, /proc/net) and for the host's own listeners (a TCP port, a unix socket's path); they take
    turns by files in ``sync``. Both list the namespace descriptors they hold (the process that clones
    them holds two)."""
    out: dict[str, Any] = {"namespace_fds": []}  # the maker holds its own and the empty namespace's
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.split(":")[0] in ("net", "mnt", "user", "pid", "uts", "ipc", "cgroup", "time"):
            out["namespace_fds"].append(target)
    held: list[Any] = []
    if role == "host":
        def listen(kind: int, family: int = socket.AF_INET) -> socket.socket:
            s = socket.socket(family, kind)
            held.append(s)
            s.bind(("::", port + 1) if family == socket.AF_INET6 else ("0.0.0.0", port))
            if kind == socket.SOCK_STREAM:
                s.listen(4)
            return s

        def bind_pair() -> None:
            a, b = socket.socketpair()
            held.extend((a, b))
            a.bind("\0" + token)

        def usersock(family: int) -> None:
            fd = raw_syscall("socket", family, socket.SOCK_RAW, NETLINK_USERSOCK)
            if fd < 0:
                raise OSError(-fd, os.strerror(-fd))
            s = socket.socket(fileno=fd)
            held.append(s)
            s.bind((port, 0))

        def loopback_up() -> None:
            import fcntl
            import struct

            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0)))[1]
                fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))

        _tried(out, "tcp", lambda: listen(socket.SOCK_STREAM))
        _tried(out, "tcp6", lambda: listen(socket.SOCK_STREAM, socket.AF_INET6))
        _tried(out, "udp", lambda: listen(socket.SOCK_DGRAM))
        _tried(out, "abstract", bind_pair)
        _tried(out, "usersock", lambda: usersock(AF_NETLINK))
        _tried(out, "usersock_high_bits", lambda: usersock(AF_NETLINK | HIGH))
        _tried(out, "loopback_up", loopback_up)
        open(os.path.join(sync, "held"), "w").close()
        out["guest_looked"] = _await_file(os.path.join(sync, "looked"))
    else:
        out["host_held"] = _await_file(os.path.join(sync, "held"))

        def connect(address: tuple[str, int]) -> None:
            with socket.create_connection(address, timeout=1) as s:
                s.sendall(token.encode())

        def send_udp() -> None:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(token.encode(), ("127.0.0.1", port))

        def listed() -> list[str]:
            found = []
            for table in ("tcp", "tcp6", "udp", "unix", "netlink"):
                try:
                    with open(f"/proc/net/{table}") as f:
                        text = f.read()
                except OSError:
                    continue
                for what, needle in (("call", token), ("call_port", f":{port:04X} "),
                                     ("call_port", f":{port + 1:04X} "),
                                     ("host_port", f":{host_port:04X} "), ("host_path", host_path)):
                    if needle in text or (what == "call_port" and table == "netlink" and f" {port} " in text):
                        found.append(f"{what} in {table}")
            return found

        _tried(out, "connect", lambda: connect(("127.0.0.1", port)))
        _tried(out, "connect_any", lambda: connect(("0.0.0.0", port)))
        _tried(out, "udp", send_udp)
        out["listed"] = listed()
        open(os.path.join(sync, "looked"), "w").close()
    for s in held:
        s.close()
    return out


def use_terminal(pts: str) -> dict[str, str]:
    """The terminal the host runs on, as its controlling terminal (/dev/tty) and by its path: write an
    escape sequence and a line to it, and push a command into its input (TIOCSTI, also with a bit above
    the int set in the request), for the host's shell to run once the host ends."""
    import fcntl
    import termios

    out: dict[str, str] = {}
    for name, path in (("tty", "/dev/tty"), ("pts", pts)):
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        except OSError as exc:
            out[f"{name}_open"] = exc.strerror or str(exc)
            try:  # TIOCSTI needs no more than a read-only descriptor
                fd = os.open(path, os.O_RDONLY | os.O_NOCTTY)
            except OSError as again:
                out[f"{name}_open"] += f"; read-only: {again.strerror or again}"
                continue
        try:
            os.write(fd, b"\x1b]0;TOOLFORK-TITLE\x07TOOLFORK-WROTE\r\n")
            out[f"{name}_write"] = "wrote"
        except OSError as exc:
            out[f"{name}_write"] = exc.strerror or str(exc)
        try:
            for ch in b"echo TOOLFORK-INJECTED\n":
                fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
            out[f"{name}_tiocsti"] = "pushed"
        except OSError as exc:
            out[f"{name}_tiocsti"] = exc.strerror or str(exc)
        key = ctypes.c_char(b"X")
        code = raw_syscall("ioctl", fd, termios.TIOCSTI | HIGH, ctypes.addressof(key))
        out[f"{name}_tiocsti_high_bits"] = "pushed" if code == 0 else os.strerror(-code)
        os.close(fd)
    return out


def reach_other_processes(pids: list[int]) -> dict[str, Any]:
    """/proc of the host and the template, signals to them, ptrace and process_vm_readv."""
    libc = _libc()
    out: dict[str, Any] = {"visible": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
    for pid in pids:
        seen: dict[str, str] = {}
        for what in ("environ", "cmdline", "mem"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as f:
                    f.read(16)
                seen[what] = "read"
            except OSError as exc:
                seen[what] = exc.strerror or str(exc)
        try:
            os.kill(pid, 0)
            seen["signal"] = "delivered"
        except OSError as exc:
            seen["signal"] = exc.strerror or str(exc)
        rc = libc.ptrace(ctypes.c_long(16), ctypes.c_long(pid), None, None)  # PTRACE_ATTACH
        seen["ptrace"] = "attached" if rc == 0 else os.strerror(ctypes.get_errno())
        if rc == 0:
            libc.ptrace(ctypes.c_long(17), ctypes.c_long(pid), None, None)  # PTRACE_DETACH
        buf = ctypes.create_string_buffer(8)

        class IoVec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

        local = IoVec(ctypes.cast(buf, ctypes.c_void_p), 8)
        remote = IoVec(ctypes.c_void_p(0x400000), 8)  # any address: ESRCH/EPERM is what tells
        n = libc.process_vm_readv(ctypes.c_int(pid), ctypes.byref(local), ctypes.c_ulong(1), ctypes.byref(remote),
                                  ctypes.c_ulong(1), ctypes.c_ulong(0))
        err = ctypes.get_errno()
        seen["process_vm_readv"] = "read" if n >= 0 or err == errno.EFAULT else os.strerror(err)
        out[str(pid)] = seen
    return out


def run_setuid(binary: str) -> dict[str, Any]:
    """Run a set-user-id binary; the euid it ran with, and whether no_new_privs is set."""
    import subprocess

    with open("/proc/self/status") as f:
        nnp = [line.split()[1] for line in f if line.startswith("NoNewPrivs")]
    done = subprocess.run([binary, "-u"], capture_output=True, text=True, check=False)
    return {"own_euid": os.geteuid(), "binary_euid": done.stdout.strip(), "no_new_privs": nnp[0] if nnp else None}


def escape_write_paths(outside: str, inside: str) -> dict[str, str]:
    """Hard link, rename and symlink-write an outside file from inside write_paths."""
    out = {}
    for name, attempt in (
        ("link", lambda: os.link(outside, os.path.join(inside, "linked"))),
        ("rename_out", lambda: os.rename(outside, os.path.join(inside, "moved"))),
        ("rename_in", lambda: os.rename(os.path.join(inside, "mine"), outside + ".planted")),
        ("symlink_write", lambda: (os.symlink(outside, os.path.join(inside, "sym")),
                                   open(os.path.join(inside, "sym"), "a").write("ESCAPED"))),
    ):
        try:
            if name == "rename_in":
                Path(inside, "mine").write_text("planted")
            attempt()
            out[name] = "done"
        except OSError as exc:
            out[name] = exc.strerror or str(exc)
    return out


def start_daemon(marker: str) -> str:
    """Double fork and setsid: a daemon that, 2 s after the call, writes ``marker``."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        time.sleep(2)
        with open(marker, "w") as f:
            f.write("outlived the call")
        os._exit(0)
    os.waitpid(pid, 0)
    return "daemon started"


def strand_init(token: str, high_bits: bool = False) -> str:
    """Name this process ``token``, move it (PID 1 of the sandbox) into a child's process group and let
    that child end, then return: the kernel would never finish this process's exit. ``high_bits``: name
    itself as pid 0 plus a bit above the int (the kernel reads 0: this process)."""
    _libc().prctl(15, token.encode(), 0, 0, 0)  # PR_SET_NAME: found by it in /proc afterwards
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)
        time.sleep(0.2)
        os._exit(0)
    os.setpgid(child, child)
    try:
        if high_bits:
            code = raw_syscall("setpgid", HIGH, child)
            if code < 0:
                raise OSError(-code, os.strerror(-code))
        else:
            os.setpgid(0, child)
    except OSError as exc:
        os.waitpid(child, 0)
        return f"refused: {exc.strerror}"
    os.waitpid(child, 0)
    return "joined the child's group"


def show_environment() -> dict[str, str]:
    """The call's environment."""
    return dict(os.environ)


# ---------------------------------------------------------------- scenarios (run in the host)

def s_setns(work: Path) -> Evidence:
    sink = TcpSink()
    ev = outcome(Tool("attack", fn=reach_host_network, limits=Limits(network=False)),
                 {"host_pid": os.getpid(), "port": sink.port})
    ev["server_got"] = [d.decode(errors="replace") for d in sink.received()]
    return ev


def _inherited(kind: str) -> Evidence:
    sink = TcpSink()
    udp_sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp_sink.bind(("127.0.0.1", 0))
    held: list[Any] = []
    if kind == "tcp":
        held.append(socket.create_connection(("127.0.0.1", sink.port)))  # a keep-alive connection
        port = sink.port
    elif kind == "udp":
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.connect(udp_sink.getsockname())
        held.append(u)
        port = udp_sink.getsockname()[1]
    else:  # an unconnected TCP socket
        held.append(socket.socket())
        port = sink.port
    try:
        ev = outcome(Tool("attack", fn=use_inherited_descriptors, limits=Limits(network=False)), {"port": port})
    finally:
        for s in held:
            s.close()
    udp_sink.setblocking(False)
    got = [d.decode(errors="replace") for d in sink.received()]
    try:
        got.append(udp_sink.recv(4096).decode(errors="replace"))
    except BlockingIOError:
        pass
    udp_sink.close()
    ev["server_got"] = [g for g in got if g]
    return ev


def s_inherited_tcp(work: Path) -> Evidence:
    return _inherited("tcp")


def s_inherited_udp(work: Path) -> Evidence:
    return _inherited("udp")


def s_inherited_unconnected(work: Path) -> Evidence:
    return _inherited("unconnected")


def s_inherited_files(work: Path) -> Evidence:
    secret = work / "secret.txt"
    secret.write_text("hunter2")
    log = work / "host.log"
    log.write_text("host log\n")
    allowed = work / "allowed"
    allowed.mkdir()
    with open(secret) as held_secret, open(log, "a") as held_log:
        ev = outcome(Tool("attack", fn=use_inherited_descriptors,
                          limits=Limits(read_paths=[str(allowed)], write_paths=[str(allowed)])), {"port": 9})
        ev["held"] = [held_secret.fileno(), held_log.fileno()]
    ev["log"] = log.read_text()
    return ev


def _lift(which: str, limits: Limits, work: Path) -> Evidence:
    allowed = work / "allowed"
    allowed.mkdir(exist_ok=True)
    return outcome(Tool("attack", fn=lift_limit, limits=limits), {"which": which, "work": str(allowed)})


def s_lift_memory(work: Path) -> Evidence:
    return _lift("memory", Limits(network=False, memory_mb=32), work)


def s_lift_file_size(work: Path) -> Evidence:
    ev = _lift("file", Limits(network=False, file_size_mb=1), work)
    big = work / "allowed" / "big"
    ev["file_mb"] = big.stat().st_size / 2**20 if big.exists() else 0
    return ev


def s_lift_open_files(work: Path) -> Evidence:
    return _lift("files", Limits(network=False, open_files=16), work)


def s_lift_cpu(work: Path) -> Evidence:
    return _lift("cpu", Limits(network=False, cpu_s=1), work)


def s_shared_mmap(work: Path) -> Evidence:
    return outcome(Tool("attack", fn=shared_mmap, limits=Limits(network=False, memory_mb=64)), {})


def s_pbkdf2(work: Path) -> Evidence:
    return outcome(Tool("attack", fn=pbkdf2, limits=Limits(network=False, cpu_s=1)), {})


def s_thread_in_host(work: Path) -> Evidence:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)  # as an exporter's thread would
    thread.start()
    sink = TcpSink()
    try:
        ev = outcome(Tool("attack", fn=offline_probe, limits=Limits(network=False)), {"port": sink.port})
    finally:
        stop.set()
        thread.join()
    ev["server_got"] = [d.decode(errors="replace") for d in sink.received()]
    return ev


def sandbox_probe(port: int) -> dict[str, Any]:
    """What a sandboxed call runs: its threads, its PID (1 in its own PID namespace), its network."""
    return {**offline_probe(port), "pid": os.getpid()}


def s_otel_in_host(work: Path) -> Evidence:
    """OpenTelemetry's SDK in the host: a BatchSpanProcessor, whose at-fork hook restarts its exporter
    thread in every forked child."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=50))
    tracer = provider.get_tracer("toolfork-redteam")
    sink = TcpSink()
    try:
        with tracer.start_as_current_span("host-before"):
            offline = outcome(Tool("attack", fn=sandbox_probe, limits=Limits(network=False)), {"port": sink.port})
            sandboxed = outcome(Tool("attack", fn=sandbox_probe, limits=Limits(sandbox=True)), {"port": sink.port})
        with tracer.start_as_current_span("host-after"):
            pass
        provider.force_flush()
        exported = sorted(span.name for span in exporter.get_finished_spans())
    finally:
        provider.shutdown()
    return {"offline": offline, "sandboxed": sandboxed, "exported": exported,
            "server_got": [d.decode(errors="replace") for d in sink.received()]}


def s_otel_providers_in_host(work: Path) -> Evidence:
    """OpenTelemetry's SDK providers in the host: their at-fork hooks rebuild the resource in every
    forked child with a thread pool they shut down at once (a joined thread the kernel may still count
    when the hook returns). Many sandboxed calls, so a race between the two would show."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    providers = TracerProvider(), MeterProvider()
    try:
        with Executor([Tool("attack", fn=sandbox_probe, limits=Limits(sandbox=True))], workers=2,
                      timeout=CALL_TIMEOUT) as ex:
            results = ex.run([{"id": str(i), "name": "attack", "arguments": {"port": 9}} for i in range(40)])
    finally:
        for provider in providers:
            provider.shutdown()
    return {"statuses": sorted({r.status for r in results}),
            "errors": sorted({r.error.message for r in results if r.error is not None})[:3]}


IPC_PRIVATE, IPC_RMID = 0, 0


def attach_sysv_shm(shmid: int) -> dict[str, Any]:
    """Attach the host's SysV shared memory segment by its id and read it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    addr = libc.shmat(ctypes.c_int(shmid), None, ctypes.c_int(0))
    if addr in (None, ctypes.c_void_p(-1).value):
        return {"attach": os.strerror(ctypes.get_errno())}
    return {"attach": "ok", "read": ctypes.string_at(addr, 6).decode(errors="replace")}


def s_sysv_shm(work: Path) -> Evidence:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shmid = libc.shmget(ctypes.c_int(IPC_PRIVATE), ctypes.c_size_t(4096), ctypes.c_int(0o1666))
    assert shmid >= 0, os.strerror(ctypes.get_errno())
    try:
        addr = libc.shmat(ctypes.c_int(shmid), None, ctypes.c_int(0))
        ctypes.memmove(addr, b"SECRET", 6)
        libc.shmdt(ctypes.c_void_p(addr))
        host_view = attach_sysv_shm(shmid)
        ev = outcome(Tool("attack", fn=attach_sysv_shm, limits=Limits(sandbox=True)), {"shmid": shmid})
    finally:
        libc.shmctl(ctypes.c_int(shmid), ctypes.c_int(IPC_RMID), None)
    ev["host_view"] = host_view
    return ev


def _start_thread() -> None:
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()


def s_thread_in_worker_start(work: Path) -> Evidence:
    sink = TcpSink()
    ev = outcome(Tool("attack", fn=offline_probe, limits=Limits(network=False)), {"port": sink.port},
                 on_worker_start=_start_thread)
    ev["server_got"] = [d.decode(errors="replace") for d in sink.received()]
    return ev


def _host_unix_servers(work: Path, kind: socket.SocketKind) -> tuple[str, str, list[socket.socket]]:
    """A filesystem and an abstract unix socket of the host (its path, its name, both sockets), that
    anyone may reach (as /dev/log)."""
    tag = "stream" if kind == socket.SOCK_STREAM else "dgram"
    path = str(work / f"host-{tag}.sock")
    abstract = f"toolfork-redteam-{tag}-{os.getpid()}"
    servers = []
    for address in (path, "\0" + abstract):
        s = socket.socket(socket.AF_UNIX, kind)
        s.bind(address)
        if kind == socket.SOCK_STREAM:
            s.listen(4)
        s.setblocking(False)
        servers.append(s)
    os.chmod(path, 0o777)
    return path, abstract, servers


def s_unix_sockets(work: Path) -> Evidence:
    path, abstract, servers = _host_unix_servers(work, socket.SOCK_STREAM)
    try:
        ev = outcome(Tool("attack", fn=reach_unix_sockets, limits=Limits(network=False)),
                     {"path": path, "abstract": abstract})
        accepted = 0
        for s in servers:
            try:
                conn, _ = s.accept()
                conn.close()
                accepted += 1
            except BlockingIOError:
                pass
        ev["accepted"] = accepted
    finally:
        for s in servers:
            s.close()
    return ev


def s_unix_dgram(work: Path) -> Evidence:
    path, abstract, servers = _host_unix_servers(work, socket.SOCK_DGRAM)
    try:
        ev = outcome(Tool("attack", fn=reach_dgram_sockets, limits=Limits(network=False)),
                     {"path": path, "abstract": abstract})
        got = []
        for s in servers:
            while True:
                try:
                    got.append(s.recv(200).decode(errors="replace"))
                except BlockingIOError:
                    break
        ev["server_got"] = got
    finally:
        for s in servers:
            s.close()
    return ev


def s_calls_meet(work: Path) -> Evidence:
    """Two network=False calls at once in one pool (as root they share one empty network namespace)."""
    sink = TcpSink()
    path, _abstract, servers = _host_unix_servers(work, socket.SOCK_STREAM)
    token = f"toolfork-meet-{os.getpid()}"
    port = 20000 + os.getpid() % 20000
    sync = work / "meet"
    sync.mkdir(mode=0o777)
    sync.chmod(0o777)
    args = {"token": token, "port": port, "host_port": sink.port, "host_path": path, "sync": str(sync)}
    try:
        with Executor([Tool("attack", fn=meet_another_call, limits=Limits(network=False))], workers=2,
                      timeout=CALL_TIMEOUT) as ex:
            host, guest = ex.run([{"id": "host", "name": "attack", "arguments": {**args, "role": "host"}},
                                  {"id": "guest", "name": "attack", "arguments": {**args, "role": "guest"}}])
    finally:
        got = sink.received()
        for s in servers:
            s.close()
    return {"status": [host.status, guest.status], "error": [str(host.error), str(guest.error)],
            "host": None if host.output is None else host.output.data,
            "guest": None if guest.output is None else guest.output.data,
            "server_got": [g.decode(errors="replace") for g in got]}


def _on_a_terminal(work: Path, limits: Limits) -> Evidence:
    """A host that runs on a terminal (a pty, its controlling terminal, as ``toolfork run`` in a shell):
    the call's evidence, what the host read from the terminal after it (keystrokes pushed into its
    input), and everything the terminal was sent."""
    import pty
    import select

    pid, master = pty.fork()
    if pid == 0:  # the host, on the terminal
        try:
            ev = outcome(Tool("attack", fn=use_terminal, limits=limits), {"pts": os.ttyname(0)})
            got = b""
            while select.select([0], [], [], 1.0)[0]:
                chunk = os.read(0, 1024)
                if not chunk:
                    break
                got += chunk
            ev["host_read"] = got.decode(errors="replace")
            os.write(1, ("\nEVIDENCE " + json.dumps(ev) + "\n").encode())
        finally:
            os._exit(0)
    shown = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.5)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the host ended and closed the terminal
                break
            if not chunk:
                break
            shown += chunk
    os.waitpid(pid, 0)
    os.close(master)
    text = shown.decode(errors="replace")
    evidence, _, line = text.rpartition("EVIDENCE ")
    ev = json.loads(line.splitlines()[0])
    ev["terminal_shown"] = evidence
    return ev


def s_terminal(work: Path) -> Evidence:
    return _on_a_terminal(work, Limits(sandbox=True))


def s_terminal_write_paths(work: Path) -> Evidence:
    return _on_a_terminal(work, Limits(network=False, write_paths=[str(work)]))


def helpers_of(template: int, but: list[int]) -> list[int]:
    """The template's children in its own PID namespace other than ``but`` (its warm workers): the spare
    maker, the sessions' supervisor. Its sandboxes are in PID namespaces of their own."""
    try:
        with open(f"/proc/{template}/task/{template}/children") as f:
            kids = [int(p) for p in f.read().split()]
    except OSError:
        return []
    own: list[int] = []
    for pid in kids:
        try:
            with open(f"/proc/{pid}/status") as f:
                nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        if len(nspid) == 1 and pid not in but:
            own.append(pid)
    return own


def s_other_processes(work: Path) -> Evidence:
    with Executor([Tool("attack", fn=reach_other_processes, limits=Limits(network=False))], workers=1,
                  timeout=CALL_TIMEOUT) as ex:
        ex.run([{"id": "first", "name": "attack", "arguments": {"pids": []}}])  # the spares are made from now on
        template = ex.backend.template_pid  # type: ignore[attr-defined]
        warm = ex.backend.worker_pids  # type: ignore[attr-defined]
        pids = [os.getpid(), template, *warm, *helpers_of(template, warm)]
        (r,) = ex.run([{"id": "attack", "name": "attack", "arguments": {"pids": pids}}])
    return {"status": r.status, "error_type": None if r.error is None else r.error.type,
            "error": None if r.error is None else r.error.message,
            "output": None if r.output is None else r.output.data, "pids": pids}


def signal_the_spare_maker(sig: str) -> list[int]:
    """A warm tool (the pool's only worker) that signals the template's other children outside any
    sandbox: the spare maker."""
    me = os.getpid()
    hit = helpers_of(os.getppid(), [me])
    for pid in hit:
        os.kill(pid, getattr(signal, sig))
    return hit


def where_and_what() -> dict[str, Any]:
    """A sandboxed call's PID, memory cgroup and NoNewPrivs/Seccomp state."""
    with open("/proc/self/cgroup") as f:
        group = next((line.rstrip("\n").split(":", 2)[2] for line in f if ":memory:" in line), "")
    with open("/proc/self/status") as f:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    return {"pid": os.getpid(), "group": group, "no_new_privs": status.get("NoNewPrivs"),
            "seccomp": status.get("Seccomp")}


def _spare_maker_signalled(sig: str) -> Evidence:
    from toolfork.governance import cgroup

    limits = Limits(network=False, memory_mb=256, processes=8) if cgroup.probe().ok else Limits(network=False)
    tools = [Tool("boxed", fn=where_and_what, limits=limits), Tool("hit", fn=signal_the_spare_maker)]
    with Executor(tools, workers=1, timeout=CALL_TIMEOUT) as ex:
        first = ex.run([{"id": "first", "name": "boxed", "arguments": {}}])  # the maker and spares are made
        (hit,) = ex.run([{"id": "hit", "name": "hit", "arguments": {"sig": sig}}])
        started = time.monotonic()
        after = ex.run([{"id": str(i), "name": "boxed", "arguments": {}} for i in range(4)])
        took = time.monotonic() - started
        template = ex.backend.template_pid  # type: ignore[attr-defined]
        left = helpers_of(template, ex.backend.worker_pids)  # type: ignore[attr-defined]
    return {"hit": None if hit.output is None else hit.output.data, "left": left, "took_s": took,
            "cgroup": cgroup.probe().ok,
            "calls": [{"status": r.status, "error": None if r.error is None else r.error.message,
                       "worker_pid": r.worker_pid, "out": None if r.output is None else r.output.data}
                      for r in [*first, *after]]}


def s_spare_maker_stopped(work: Path) -> Evidence:
    return _spare_maker_signalled("SIGSTOP")


def s_spare_maker_killed(work: Path) -> Evidence:
    return _spare_maker_signalled("SIGKILL")


def s_setuid(work: Path) -> Evidence:
    """A set-user-id copy of ``id`` owned by a user the caller is not: root's copy belongs to nobody,
    nobody's to root (made by the test, as root, before: ``work/suid-id``)."""
    return outcome(Tool("attack", fn=run_setuid, limits=Limits(network=False)), {"binary": str(work / "suid-id")})


def s_write_paths(work: Path) -> Evidence:
    outside = work / "outside.txt"
    outside.write_text("host file")
    inside = work / "inside"
    inside.mkdir()
    ev = outcome(Tool("attack", fn=escape_write_paths, limits=Limits(write_paths=[str(inside)])),
                 {"outside": str(outside), "inside": str(inside)})
    ev["outside_now"] = outside.read_text() if outside.exists() else None
    ev["planted"] = (work / "outside.txt.planted").exists()
    return ev


def s_daemon(work: Path) -> Evidence:
    marker = work / "daemon-was-here"
    ev = outcome(Tool("attack", fn=start_daemon, limits=Limits(write_paths=[str(work)])), {"marker": str(marker)})
    time.sleep(4)
    ev["marker"] = marker.exists()
    return ev


def s_strand_init(work: Path) -> Evidence:
    return _strand(high_bits=False)


def s_strand_init_high_bits(work: Path) -> Evidence:
    return _strand(high_bits=True)


def _strand(high_bits: bool) -> Evidence:
    token = f"tfstrand{os.getpid() % 100000}"
    ev = outcome(Tool("attack", fn=strand_init, limits=Limits(network=False)),
                 {"token": token, "high_bits": high_bits})
    deadline = time.monotonic() + 3  # the call's process has been killed (close()): it must be gone
    while True:
        ev["left"] = [pid for pid in os.listdir("/proc") if pid.isdigit() and _comm(pid) == token]
        if not ev["left"] or time.monotonic() > deadline:
            return ev
        time.sleep(0.1)


def _comm(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def s_environment(work: Path) -> Evidence:
    os.environ["TOOLFORK_REDTEAM_SECRET"] = "hunter2"
    os.environ["TOOLFORK_REDTEAM_PASSED"] = "yes"
    try:
        return outcome(Tool("attack", fn=show_environment,
                            limits=Limits(network=False, env=["TOOLFORK_REDTEAM_PASSED"])), {})
    finally:
        del os.environ["TOOLFORK_REDTEAM_SECRET"], os.environ["TOOLFORK_REDTEAM_PASSED"]


SCENARIOS: dict[str, Callable[[Path], Evidence]] = {
    name.removeprefix("s_"): fn for name, fn in list(globals().items()) if name.startswith("s_") and callable(fn)
}


if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]](Path(sys.argv[2]))))
