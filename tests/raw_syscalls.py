"""System calls made directly, each argument a full 64-bit register: the way to test a seccomp rule on an
``int`` argument, which the kernel reads from the low 32 bits (libc's wrappers would drop the upper ones).
"""

from __future__ import annotations

import ctypes
import os

# The numbers of the calls the tests make (x86-64, arm64).
SYSCALLS = {"x86_64": {"socket": 41, "setpgid": 109, "ioctl": 16},
            "aarch64": {"socket": 198, "setpgid": 154, "ioctl": 29}}
HIGH = 1 << 32  # set in an int argument's register: the kernel drops it, a filter comparing 64 bits does not


def raw_syscall(name: str, *args: int) -> int:
    """``name``'s system call with ``args`` as full 64-bit registers; its result, or -errno."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(ctypes.c_long(SYSCALLS[os.uname().machine][name]), *map(ctypes.c_long, args)))
    return result if result >= 0 else -ctypes.get_errno()
