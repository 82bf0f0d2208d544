"""Tools and states for the session tests (a module of their own: a session's process gets them by name)."""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolfork import tool
from toolfork.executor import ToolCall
from toolfork.tools.runtime import ToolRuntime


class Account:
    """A session's state: a balance and the history of what happened to it."""

    def __init__(self, owner: str, balance: int = 0) -> None:
        self.owner = owner
        self.balance = balance
        self.history: list[int] = []

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Account) and (self.owner, self.balance, self.history) == (
            other.owner, other.balance, other.history)


def logged_factory(owner: str, log: str) -> Account:
    """An account whose factory appends its owner to ``log`` each time it runs."""
    with open(log, "a") as f:
        f.write(f"{owner}\n")
    return Account(owner)


def broken_factory(owner: str) -> Account:
    raise ValueError(f"no account for {owner}")


def stuck_factory(pid_file: str) -> Account:
    """Write this process's pid, then never return."""
    with open(pid_file, "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(1)


class Unsendable:
    def __init__(self) -> None:
        self.lock = __import__("threading").Lock()  # cannot be pickled


@tool
def deposit(amount: int, runtime: ToolRuntime) -> int:
    """Add to the balance.

    Args:
        amount: how much
    """
    runtime.state.balance += amount
    runtime.state.history.append(amount)
    return int(runtime.state.balance)


@tool
def where(runtime: ToolRuntime) -> list[int]:
    """The pid running this call, and whether it has a state (1) or not (0)."""
    return [os.getpid(), 0 if runtime.state is None else 1]


@tool
def spoil_then(how: str, runtime: ToolRuntime) -> int:
    """Change the state, then fail the way ``how`` says: exit, segv, hang, hang_in_c, raise.

    Args:
        how: exit | segv | hang | hang_in_c | raise | kill_children
    """
    runtime.state.balance += 1000
    runtime.state.history.append(1000)
    if how == "exit":
        os._exit(7)
    if how == "segv":
        ctypes.string_at(0)
    if how == "hang":
        while True:
            time.sleep(0.05)
    if how == "hang_in_c":
        hashlib.pbkdf2_hmac("sha256", b"x", b"y", 2**31 - 1)  # minutes in C: no Python code runs meanwhile
    if how == "kill_children":  # the checkpoint is a child of the session's process: take it away, then die
        for pid in _children():
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        os._exit(9)
    raise RuntimeError("refused")


def _children() -> list[int]:
    me = os.getpid()
    with open(f"/proc/{me}/task/{me}/children") as f:
        return [int(p) for p in f.read().split()]



@tool
def tagged(runtime: ToolRuntime) -> str:
    """The owner of the session's account and the call's meta tag."""
    return f"{runtime.state.owner}:{runtime.meta.get('tag', '-')}"

SESSION_TOOLS = [deposit, where, spoil_then, tagged]


@tool
def mark(path: str) -> str:
    """A host tool no session may ask for unless named: the file it creates proves it ran.

    Args:
        path: the file it creates
    """
    Path(path).write_text("ran")
    return "marked"


@tool(max_concurrency=1)
def one_at_a_time(log: str, runtime: ToolRuntime) -> str:
    """Write start and end marks around a pause; with the cap, marks never interleave.

    Args:
        log: the file the marks go to
    """
    with open(log, "a") as f:
        f.write(f"start {runtime.state.owner}\n")
    time.sleep(0.1)
    with open(log, "a") as f:
        f.write(f"end {runtime.state.owner}\n")
    return "done"


@tool(limits=__import__("toolfork").Limits(file_size_mb=1))
def write_mb(path: str, mb: int, runtime: ToolRuntime) -> int:
    """Write ``mb`` MiB to ``path`` and count it in the state.

    Args:
        path: the file
        mb: how many MiB
    """
    with open(path, "wb") as f:
        for _ in range(mb):
            f.write(b"x" * (1 << 20))
    runtime.state.balance += mb
    return int(runtime.state.balance)


@tool
def start_daemon(runtime: ToolRuntime) -> int:
    """Start a process that leaves its session and process group and would outlive everything."""
    import subprocess

    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    runtime.state.history.append(proc.pid)
    return proc.pid


class DiesWhenSent:
    """A state whose pickling ends the process that pickles it."""

    def __init__(self) -> None:
        self.owner = "ada"
        self.balance = 0
        self.history: list[int] = []

    def __reduce__(self) -> tuple[object, ...]:
        os._exit(3)


@tool
def slow_effect(path: str, seconds: float, runtime: ToolRuntime) -> str:
    """After ``seconds``, write ``path`` (an effect outside the state) and count it in the state.

    Args:
        path: the file written
        seconds: how long before
    """
    time.sleep(seconds)
    with open(path, "w") as f:
        f.write("done")
    runtime.state.balance += 1
    return "written"


class Listening:
    """A state holding a listening socket and an exclusive file lock (flock: shared with fork copies)."""

    def __init__(self, lock_path: str) -> None:
        import fcntl
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.file = open(lock_path, "w")  # the state holds it open
        fcntl.flock(self.file, fcntl.LOCK_EX)
        self.owner, self.balance, self.history = "ada", 0, []


@tool
def take_back(port: int, lock_path: str, runtime: ToolRuntime) -> str:
    """Bind ``port`` and take the exclusive lock of ``lock_path`` at once (nothing may hold them).

    Args:
        port: the port a call before released
        lock_path: the file whose lock it released
    """
    take_port_and_lock(port, lock_path)
    return "free"


def take_port_and_lock(port: int, lock_path: str) -> None:
    """Bind ``port`` and take the exclusive lock of ``lock_path`` at once; raises if anything holds either."""
    import fcntl
    import socket

    probe = socket.socket()
    try:
        probe.bind(("127.0.0.1", port))
    finally:
        probe.close()
    with open(lock_path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


class Locked(Account):
    """An account with a lock in it: fork copies it, ``copy.deepcopy`` cannot."""

    def __init__(self, owner: str) -> None:
        super().__init__(owner)
        import threading

        self.lock = threading.Lock()


@tool
def release(runtime: ToolRuntime) -> int:
    """Close the state's socket and file (its lock goes with it); the port it had."""
    runtime.state.sock.close()
    runtime.state.file.close()
    return int(runtime.state.port)


class WithDaemon(Account):
    """An account whose factory starts a daemon (it leaves the session's process group and session), its
    pid in ``pid_file``."""

    def __init__(self, owner: str, pid_file: str) -> None:
        super().__init__(owner)
        import subprocess

        proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
        with open(pid_file, "w") as f:
            f.write(str(proc.pid))


def dep(i: int, amount: int) -> ToolCall:
    """A deposit call (``deposit``), the sessions' tests' usual call."""
    return ToolCall(f"d{i}", "deposit", {"amount": amount})


def spoil(how: str, timeout: float | None = None) -> ToolCall:
    return ToolCall(f"spoil-{how}", "spoil_then", {"how": how}, timeout=timeout)


def values(results: list[Any]) -> list[Any]:
    """Each result's value, or its status where it is not ok."""
    return [r.output.data if r.status == "ok" else r.status for r in results]


def every_kind_of_factory() -> list[tuple[Callable[..., Account], tuple[Any, ...]]]:
    """A factory of each kind a user can write, with its arguments: a lambda, a local function, a
    partial and a class (accounts starting at 1, 5, 2 and 3)."""
    def local(owner: str) -> Account:
        return Account(owner, 5)

    return [(lambda: Account("lam", 1), ()), (local, ("loc",)), (functools.partial(Account, "par", 2), ()),
            (Account, ("cls", 3))]
