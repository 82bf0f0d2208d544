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
import socket
import sys
from collections.abc import Callable

import pytest

from tests.procs import in_forked_child
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


CHECKS = {"unshare": _unshare_user, "setns": _setns, "mount": _mount, "socket_unix": _socket_unix,
          "dgram_pair": _dgram_pair}


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


def test_the_base_leaves_the_mounts_and_the_network_rules_to_the_rest() -> None:
    base = _in_child(seccomp.load_base)
    assert base["unshare"] == errno.EPERM and base["setns"] == errno.EPERM, base
    assert base["mount"] != errno.EPERM or os.geteuid() != 0, base  # as root: the kernel's ENOENT
    assert base["socket_unix"] == 0 and base["dgram_pair"] == 0, base


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
    assert {"unshare", "setns", "mount"} <= refused_whole
    assert ({"socket_unix", "dgram_pair"} <= refused_whole) is no_network
