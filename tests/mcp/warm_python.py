"""Start a Python script many times without paying its imports each time: a "zygote" process imports
what the scripts import once, and forks one child per start that runs the script as ``__main__``.

The conformance suite starts its client command once per scenario; the command's own work is a second
or so, and importing toolfork and the MCP SDK is half of it again. With the zygote, the command the suite
starts is a small shim (``python -S warm_python.py SOCKET SCRIPT ARGS...``, standard library only)::

    suite --starts--> shim --(argv, env, cwd + its stdin/stdout/stderr fds)--> zygote (imports done)
                       ^                                                         | fork
                       +------------- exit status <--- child: runs SCRIPT as __main__ on those fds

The child is a fresh process of its own, as ``python SCRIPT`` would be: its own environment, working
directory, argv and standard streams (the shim's own descriptors), ``sys.path[0]`` the script's folder,
the script's module-level code run anew, a normal interpreter exit (atexit, threads joined). Only the
imports were done before the fork. The child leads a process group of its own: when the shim is
killed (the suite's timeout), the zygote kills that group; when the child exits and something of its
group is still there ``grace_s`` later, the zygote kills it, and the exit status is 97 with a line on
the script's stderr (a client that leaves a process behind fails its scenario).

    with warm_starter([script]) as command:      # command: the shim's argv up to SCRIPT
        subprocess.run([*command, script, url])  # as [sys.executable, script, url] would
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence

LEFT_BEHIND_STATUS = 97
_LEN = struct.Struct("!I")


def imported_modules(script: str) -> list[str]:
    """The absolute imports anywhere in ``script`` (top level or in a function), in order."""
    tree = ast.parse(open(script).read(), script)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return list(dict.fromkeys(names))


@contextlib.contextmanager
def warm_starter(scripts: Sequence[str], env: dict[str, str] | None = None,
                 grace_s: float = 5.0) -> Iterator[list[str]]:
    """A zygote that has imported what ``scripts`` import; yields the shim command to put before a
    script and its arguments. A script's processes left ``grace_s`` after it exits are killed and fail
    it. The zygote is stopped (and its children killed) on leaving."""
    with tempfile.TemporaryDirectory(prefix="toolfork-warm-") as folder:
        path = os.path.join(folder, "zygote.sock")
        zygote = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--zygote", path, str(grace_s),
                                   *scripts], env=env, stdin=subprocess.PIPE, start_new_session=True)
        try:
            assert zygote.stdin is not None
            end = time.monotonic() + 120
            while not os.path.exists(path):
                if zygote.poll() is not None or time.monotonic() > end:
                    raise RuntimeError(f"the zygote did not start (exit {zygote.poll()})")
                time.sleep(0.02)
            yield [sys.executable, "-S", os.path.abspath(__file__), path]
        finally:
            _stop(zygote)


def _stop(zygote: subprocess.Popen[bytes]) -> None:
    """End of file on its stdin stops the zygote between two starts; whatever it still runs then (a
    start cut short) is killed with it."""
    import psutil

    try:
        forked = psutil.Process(zygote.pid).children(recursive=True)
    except psutil.Error:
        forked = []
    if zygote.stdin is not None:
        zygote.stdin.close()
    try:
        zygote.wait(timeout=10)
    except subprocess.TimeoutExpired:
        zygote.kill()
        zygote.wait()
    for process in forked:
        with contextlib.suppress(psutil.Error):
            process.kill()


# --- the shim ------------------------------------------------------------------------------------------


def _send(sock: socket.socket, data: bytes, fds: list[int] | None = None) -> None:
    if fds:
        socket.send_fds(sock, [_LEN.pack(len(data))], fds)
    else:
        sock.sendall(_LEN.pack(len(data)))
    sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def shim(path: str, argv: list[str]) -> int:
    """Hand ``argv`` (SCRIPT ARGS...), the environment, the working directory and the standard streams to
    the zygote at ``path``; its exit status is the child's."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
        _send(sock, json.dumps(request).encode(), [0, 1, 2])
        try:
            return int(_recv_exact(sock, 4).decode())
        except EOFError:
            return 1


# --- the zygote ----------------------------------------------------------------------------------------


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _serve_one(conn: socket.socket, listener: socket.socket, grace_s: float) -> None:
    header, fds, _, _ = socket.recv_fds(conn, _LEN.size, 3)
    request = json.loads(_recv_exact(conn, _LEN.unpack(header)[0]))
    pid = os.fork()
    if pid == 0:
        _become_child(request, fds, conn, listener)  # never returns: raises SystemExit
    with contextlib.suppress(OSError):  # in the parent too, so that no kill can come before it
        os.setpgid(pid, pid)
    stderr = fds.pop()
    for fd in fds:
        os.close(fd)
    try:
        status = _wait_child(pid, conn)
        if status is None:  # the shim is gone: so is the child's group
            return
        end = time.monotonic() + grace_s
        while _group_alive(pid) and time.monotonic() < end:
            time.sleep(0.05)
        if _group_alive(pid):
            _kill_group(pid)
            status = LEFT_BEHIND_STATUS
            with contextlib.suppress(OSError):
                os.write(stderr, f"warm_python: {request['argv'][0]} left processes behind "
                                 f"{grace_s:g} s after it exited; killed\n".encode())
        with contextlib.suppress(OSError):
            conn.sendall(f"{status:4d}".encode())
    finally:
        os.close(stderr)


def _wait_child(pid: int, conn: socket.socket) -> int | None:
    """The child's exit status (128 + signal if killed), or None when the shim went first."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        readable, _, _ = select.select([conn], [], [], 0.02)
        if readable and not conn.recv(1):
            _kill_group(pid)
            os.waitpid(pid, 0)
            return None


def _become_child(request: dict, fds: list[int], conn: socket.socket, listener: socket.socket) -> None:
    import random

    os.setpgid(0, 0)
    conn.close()
    listener.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    random.seed()
    script = request["argv"][0]
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    import runpy

    runpy.run_path(script, run_name="__main__")
    raise SystemExit(0)


def zygote(path: str, grace_s: float, scripts: list[str]) -> None:
    """Import what ``scripts`` import, then serve starts at ``path`` one at a time until stdin ends."""
    import importlib

    for script in scripts:
        for name in imported_modules(script):
            with contextlib.suppress(Exception):
                importlib.import_module(name)
    me = os.getpid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path + ".tmp")
        listener.listen()
        os.rename(path + ".tmp", path)  # there only once it accepts
        while True:
            readable, _, _ = select.select([listener, sys.stdin], [], [])
            if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
                return
            if listener in readable:
                conn, _ = listener.accept()
                with conn:
                    _serve_one(conn, listener, grace_s)
    finally:
        if os.getpid() == me:
            listener.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--zygote"]:
        zygote(sys.argv[2], float(sys.argv[3]), sys.argv[4:])
    else:
        sys.exit(shim(sys.argv[1], sys.argv[2:]))
