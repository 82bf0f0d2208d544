"""The sandbox's system call filter in two parts: the spare maker's base and each spare's rest.

A spare is cloned by the spare maker, which runs under the base filter (``seccomp.load_base``); the
spare loads only the rest (``seccomp.load``). The two stacked must refuse what the whole filter refuses,
and the base alone must leave the spare's set-up (its mounts) and the maker's clone into namespaces
possible. Each check runs in a forked child: a filter is for good.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import socket
import sys
from collections.abc import Callable

import pytest

from tests.procs import in_forked_child
from tests.raw_syscalls import HIGH, SYSCALLS, raw_syscall
from toolfork.governance import seccomp

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="seccomp filters are Linux's (the sandbox is Linux only)")

CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
_libc = ctypes.CDLL(None, use_errno=True)


def _errno_of(call: Callable[[], int]) -> int:
    """0 when ``call()`` (a libc call) succeeded, else its errno."""
    return 0 if call() == 0 else ctypes.get_errno()


def _unshare_user() -> int:
    return _errno_of(lambda: _libc.unshare(CLONE_NEWUSER))


def _setns() -> int:
    return _errno_of(lambda: _libc.setns(-1, 0))  # EPERM if filtered, EBADF otherwise


def _mount() -> int:  # EPERM if filtered; otherwise the kernel's own answer (not EPERM as root: ENOENT)
    return _errno_of(lambda: _libc.mount(b"none", b"/nonexistent-toolfork-test", b"tmpfs", 0, None))


def _socket_unix() -> int:
    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    except OSError as exc:
        return exc.errno or -1
    return 0


def _dgram_pair() -> int:
    try:
        for end in socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM):
            end.close()
    except OSError as exc:
        return exc.errno or -1
    return 0


def _raw(name: str, *args: int) -> int:
    """0 when the system call succeeded (a descriptor it made is closed), else its errno."""
    result = raw_syscall(name, *args)
    if result < 0:
        return -result
    if name == "socket":
        os.close(result)
    return 0


def _socket(family: int, kind: int = socket.SOCK_STREAM) -> Callable[[], int]:
    def check() -> int:
        try:
            socket.socket(family, kind).close()
        except OSError as exc:
            return exc.errno or -1
        return 0
    return check


def _bind_pair() -> int:
    """Bind a stream pair's end to an abstract name (where another call could see or find it)."""
    a, b = socket.socketpair()
    try:
        a.bind(f"\0toolfork-seccomp-test-{os.getpid()}")
    except OSError as exc:
        return exc.errno or -1
    finally:
        a.close()
        b.close()
    return 0


def _tiocsti(high: int = 0) -> int:
    """Push a keystroke through /dev/null: ENOTTY from the kernel, EPERM from the filter."""
    import termios

    key = ctypes.c_char(b"x")
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        return _raw("ioctl", fd, termios.TIOCSTI | high, ctypes.addressof(key))
    finally:
        os.close(fd)


CHECKS = {"unshare": _unshare_user, "tiocsti": _tiocsti, "tiocsti_high": lambda: _tiocsti(HIGH),
          "setns": _setns, "mount": _mount, "socket_unix": _socket_unix,
          "dgram_pair": _dgram_pair, "socket_inet": _socket(socket.AF_INET),
          "socket_inet6": _socket(socket.AF_INET6, socket.SOCK_DGRAM),
          "socket_netlink": _socket(socket.AF_NETLINK, socket.SOCK_RAW), "bind_pair": _bind_pair,
          "socket_unix_high": lambda: _raw("socket", socket.AF_UNIX | HIGH, socket.SOCK_STREAM, 0),
          # pid 0 (this process) into its own group: this process is not PID 1, so its own pid is above 1 and
          # the filter refuses (it cannot tell the sandbox's first process from another)
          "setpgid_high": lambda: _raw("setpgid", HIGH, os.getpid())}


def _in_child(setup: Callable[[], None]) -> dict[str, int]:
    """Each check's errno in a forked child after ``setup()`` (its filters)."""
    def body() -> dict[str, int]:
        setup()
        return {name: check() for name, check in CHECKS.items()}
    seen = in_forked_child(body)
    assert isinstance(seen, dict), seen
    return seen


def _no_new_privs() -> None:
    assert _libc.prctl(38, 1, 0, 0, 0) == 0


def test_the_base_leaves_the_mounts_setns_and_the_network_rules_to_the_rest() -> None:
    """setns: the maker moves between its own network namespace and the empty one it clones spares into."""
    base = _in_child(seccomp.load_base)
    assert base["unshare"] == errno.EPERM, base
    assert base["setns"] == errno.EBADF, base
    assert base["mount"] != errno.EPERM or os.geteuid() != 0, base  # as root: the kernel's ENOENT
    assert base["socket_unix"] == 0 and base["dgram_pair"] == 0 and base["socket_inet"] == 0, base
    assert base["setpgid_high"] == errno.EPERM, base
    assert base["tiocsti"] == errno.EPERM and base["tiocsti_high"] == errno.EPERM, base


def test_without_network_no_socket_can_be_made_and_nothing_bound() -> None:
    """Internet sockets fail as an unreachable network would; every other family, a datagram pair and a
    bind with EPERM; a family with a bit above the int set is read as the kernel reads it."""
    def whole() -> None:
        _no_new_privs()
        seccomp.load(True)

    seen = _in_child(whole)
    assert seen["socket_inet"] == errno.ENETUNREACH and seen["socket_inet6"] == errno.ENETUNREACH, seen
    for name in ("socket_unix", "socket_netlink", "dgram_pair", "bind_pair", "socket_unix_high"):
        assert seen[name] == errno.EPERM, (name, seen)


def test_every_family_but_the_internets_is_in_one_refused_block() -> None:
    def blocks(family: int) -> int:
        return sum(family & mask == value for mask, value in seccomp.OTHER_FAMILIES)

    assert [f for f in range(64) if blocks(f) != 1] == [socket.AF_INET, socket.AF_INET6]
    assert all(blocks(f) == 0 for f in (socket.AF_INET, socket.AF_INET6))


@pytest.mark.parametrize("no_network", [True, False])
def test_base_and_rest_refuse_what_the_whole_filter_refuses(no_network: bool) -> None:
    def whole() -> None:
        _no_new_privs()
        seccomp.load(no_network)

    def stacked() -> None:
        seccomp.load_base()
        assert seccomp.prepare(no_network) != seccomp._build(no_network)  # the rest, not the whole
        seccomp.load(no_network)

    refused_whole = {name for name, code in _in_child(whole).items() if code == errno.EPERM}
    refused_stacked = {name for name, code in _in_child(stacked).items() if code == errno.EPERM}
    assert refused_stacked == refused_whole, (refused_whole, refused_stacked)
    assert {"unshare", "setns", "mount", "setpgid_high", "tiocsti", "tiocsti_high"} <= refused_whole
    network = {"socket_unix", "dgram_pair", "socket_netlink", "bind_pair", "socket_unix_high"}
    if no_network:
        assert network <= refused_whole, refused_whole
    else:
        assert not network & refused_whole, refused_whole


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the x32 system call ABI is x86-64's")
def test_an_x32_system_call_ends_the_process() -> None:
    """x32 numbers (bit 30 set) share x86-64's audit architecture: a rule written for socket's x86-64
    number would not see them. libseccomp's filter ends a process that makes one (where the kernel has
    x32 at all), so it cannot make an AF_UNIX socket that way."""
    pid = os.fork()
    if pid == 0:
        try:
            _no_new_privs()
            seccomp.load(True)
            _libc.syscall.restype = ctypes.c_long
            _libc.syscall(ctypes.c_long(0x40000000 | SYSCALLS['x86_64']['socket']), ctypes.c_long(socket.AF_UNIX),
                          ctypes.c_long(socket.SOCK_STREAM), ctypes.c_long(0))
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS, status
