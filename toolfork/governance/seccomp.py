"""The sandbox's system call filter: the calls that leave or change namespaces, mount, trace other
processes, load kernel code or reach a host socket fail with EPERM.

Why a filter on top of the namespaces: inside its user namespace a sandboxed call holds every
capability of that namespace, so without a filter it could build new namespaces, mount over paths,
trace processes of its own namespace tree or open a kernel facility (io_uring, bpf, perf events,
keyrings) that is not namespaced at all. The filter is the second wall behind each of those, and the
only one before the host's System V IPC objects and POSIX message queues (the sandbox enters no IPC
namespace: it is the costliest to create, and its calls are few enough to refuse).

How: the filter is written with libseccomp through ``pyseccomp`` (its rules are by name, so syscall
numbers and the architecture check come from the maintained library), exported once per variant as
classic BPF, and loaded in the sandbox with one ``prctl(PR_SET_SECCOMP)``: building a filter with
libseccomp takes about a millisecond, loading the exported program about a tenth of that. Build it
(``prepare``) in the template, before it forks a sandbox, so every sandbox loads the copy it inherits.

    template: prepare(network_off) ──> BPF bytes (cached per variant)
    sandbox:  load(network_off)    ──> prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, program)

Under ``network=False`` it also refuses ``socket`` of every address family (``AF_INET``/``AF_INET6``
with ENETUNREACH, what a call without a network got from ``connect`` before; every other with EPERM)
and ``bind``: a filesystem unix socket and a vsock are not in the network namespace, so the namespace
alone would let a call connect to a server socket of the host; and where calls share one empty network
namespace (the spare maker's, as root: ``netns.Beside``), a port, an abstract name or a netlink socket
would let one call find another. ``socketpair`` stays allowed for streams and sequenced packets
(a connected pair of those cannot be pointed elsewhere: ``connect`` and an address on ``sendto`` fail),
so asyncio and multiprocessing pipes keep working; a datagram pair (``SOCK_DGRAM``, or ``SOCK_RAW``,
which a unix pair takes as a datagram) is refused: its end can send to any address, or be connected
again, and so reach a host's datagram socket by its path (``/dev/log``, journald, ``NOTIFY_SOCKET``).
An ``int`` argument is compared on its low 32 bits (``INT``): the kernel ignores the upper half of its
register, and a rule comparing all 64 bits would let ``AF_UNIX | 1 << 32`` through.
``setpgid(0 or 1, pgid)`` fails for a ``pgid`` other than 0 or 1: the sandbox's first process (PID 1)
must never join another group of its namespace (its exit would hang in the kernel for good, out of
reach of any signal), and a process cannot tell from the filter which one is calling; leading a group
of one's own and ``setsid`` stay.
``ioctl`` ``TIOCSTI`` (push keystrokes into a terminal's input) and ``TIOCLINUX`` (among others, paste a
virtual console's selection) fail with EPERM, behind the sandbox giving up its controlling terminal.
``clone3`` fails with ENOSYS (its flags are behind a pointer a filter cannot read; libc then falls back
to ``clone``, whose namespace flags are refused).
"""

from __future__ import annotations

import ctypes
import errno
import os
import tempfile

from .verdict import libc

PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
AF_INET, AF_INET6 = 2, 10
SOCK_TYPE_MASK = 0xF  # socket types without SOCK_NONBLOCK / SOCK_CLOEXEC
INT = 0xFFFFFFFF  # an int argument's bits: the kernel ignores the upper half of its register, so must we
# Every address family but AF_INET and AF_INET6, as (mask, value) blocks of an int argument: the kernel
# has fewer than 64 families (AF_MAX, 46 in Linux 6.x; a larger one fails with EAFNOSUPPORT).
OTHER_FAMILIES = ((INT & ~1, 0), (INT, 3), (INT & ~3, 4), (INT & ~1, 8), (INT, 11), (INT & ~3, 12),
                  (INT & ~15, 16), (INT & ~31, 32))
SOCK_DGRAM, SOCK_RAW = 2, 3  # the pair types whose end can be pointed at another address
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
# clone's namespace flags: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
CLONE_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000,
                         0x00000080)

DENIED = (
    # leave or change namespaces, mounts and the root
    "setns", "unshare", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr",
    # other processes' memory and tracing
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "pidfd_open", "kcmp",
    # kernel code, kernel facilities that are not namespaced
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf", "perf_event_open",
    "keyctl", "add_key", "request_key", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    # files by handle (bypass path checks), the machine's state
    "open_by_handle_at", "name_to_handle_at", "swapon", "swapoff", "reboot", "syslog", "acct", "quotactl",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm", "vhangup", "fanotify_init",
    # System V IPC and POSIX message queues: the host's objects (the sandbox has no IPC namespace: creating
    # one costs more than the rest of the set-up, and these calls are all it would guard)
    "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget", "msgsnd",
    "msgrcv", "msgctl", "ipc", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify",
    "mq_getsetattr",
)


class SeccompError(OSError):
    """The filter could not be built or loaded; the message says why."""


# The calls a spare makes as it sets itself up after its clone (its mounts: ``sandbox._inside``,
# ``mounts.writable_only``) and the maker's ``setns`` into the empty network namespace and back around a
# clone (``netns.Beside``): the spare maker's base filter leaves them, and the clone into namespaces the
# maker itself makes, to the rest each spare loads once it has made them.
SETUP_CALLS = frozenset({"mount", "mount_setattr", "open_tree", "move_mount", "setns"})
WHOLE, BASE, REST = "whole", "base", "rest"  # the parts a program holds (see ``load_base``)

_PROGRAMS: dict[tuple[bool, str], bytes] = {}
_base_in_place = False  # this process runs under the base filter (the spare maker, and what it clones)


def _build(no_network: bool, part: str = WHOLE) -> bytes:
    try:
        import pyseccomp as sc
    except ImportError as exc:  # a dependency: only a broken install lacks it
        raise SeccompError(errno.ENOSYS, f"pyseccomp is not installed ({exc})") from None
    try:
        flt = sc.SyscallFilter(sc.ALLOW)
        eperm = sc.ERRNO(errno.EPERM)
        for name in DENIED:
            if (part == BASE and name in SETUP_CALLS) or (part == REST and name not in SETUP_CALLS):
                continue
            try:
                flt.add_rule(eperm, name)
            except (ValueError, RuntimeError, OSError):  # a syscall this architecture does not have
                if name in ("setns", "unshare", "mount", "ptrace", "process_vm_readv"):
                    raise
        if part != BASE:  # the maker clones into namespaces
            for flag in CLONE_NAMESPACE_FLAGS:
                flt.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
        if part != REST:
            for request in (TIOCSTI, TIOCLINUX):  # keystrokes into a terminal's input, a console's selection
                flt.add_rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, INT, request))
            flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
            # The sandbox's first process (1 in its PID namespace) may not join another process group:
            # the kernel then never finishes its exit (it waits for that group's pid, which it holds
            # itself), and it outlives everything. So no process here joins a group but its own or PID 1's.
            for target in (0, 1):  # (a pgid with bits above the int's reads as larger: refused too)
                flt.add_rule(eperm, "setpgid", sc.Arg(0, sc.MASKED_EQ, INT, target), sc.Arg(1, sc.GT, 1))
        if no_network and part != BASE:  # the base serves every sandbox: the network's rules are the rest's
            unreachable = sc.ERRNO(errno.ENETUNREACH)
            for family in (AF_INET, AF_INET6):
                flt.add_rule(unreachable, "socket", sc.Arg(0, sc.MASKED_EQ, INT, family))
            for mask, value in OTHER_FAMILIES:
                flt.add_rule(eperm, "socket", sc.Arg(0, sc.MASKED_EQ, mask, value))
            for kind in (SOCK_DGRAM, SOCK_RAW):
                flt.add_rule(eperm, "socketpair", sc.Arg(1, sc.MASKED_EQ, SOCK_TYPE_MASK, kind))
            flt.add_rule(eperm, "bind")
        with tempfile.TemporaryFile() as out:
            flt.export_bpf(out)
            out.seek(0)
            return out.read()
    except SeccompError:
        raise
    except Exception as exc:  # libseccomp missing or refusing: say so, the sandbox is refused
        raise SeccompError(errno.ENOSYS, f"cannot build the seccomp filter with libseccomp: {exc}") from None


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


# Per program: what prctl takes (its buffer kept alive beside it), made with the program.
_LOADABLE: dict[tuple[bool, str], tuple[ctypes.Array[ctypes.c_char], _Fprog]] = {}


def _program(no_network: bool, part: str) -> bytes:
    key = (no_network, part)
    program = _PROGRAMS.get(key)
    if program is None:
        program = _PROGRAMS[key] = _build(no_network, part)
        buf = ctypes.create_string_buffer(program, len(program))
        _LOADABLE[key] = buf, _Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    return program


def prepare(no_network: bool) -> bytes:
    """The BPF program ``load(no_network)`` loads in this process and the ones forked from it (built
    once per process; call it before forking: every process forked after has it, ready to load)."""
    return _program(no_network, REST if _base_in_place else WHOLE)


def _load(key: tuple[bool, str]) -> None:
    _buf, prog = _LOADABLE[key]
    if libc().prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog),
                    ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        code = ctypes.get_errno()
        raise SeccompError(code, f"cannot load the seccomp filter: {os.strerror(code)}")


def load(no_network: bool) -> None:
    """Filter this process (and what it starts) for good. Needs no_new_privs set first. Under the base
    filter (``load_base``) only the rest is loaded: the two stacked hold the same rules as the whole."""
    prepare(no_network)
    _load((no_network, REST if _base_in_place else WHOLE))


def load_base() -> None:
    """In the spare maker: filter it, for good, with every rule but those of the calls a spare still
    makes to set itself up (``SETUP_CALLS``), the clone into namespaces it makes, and the network's.
    Its clones inherit the filter, so each spare loads only the rest (``load``): loading a program
    costs its process about 0.16 ms of CPU here (the kernel checks and compiles it), the rest 0.08,
    and a spare is made per sandboxed call. Sets no_new_privs first (needed
    without CAP_SYS_ADMIN; a spare sets it anyway). Raises SeccompError; then nothing is in place and
    the spares load the whole filter."""
    global _base_in_place
    if _base_in_place:
        return
    _program(False, BASE)
    no_new_privs()
    _load((False, BASE))
    _base_in_place = True


def no_new_privs() -> None:
    """Set no_new_privs for this process and what it starts, for good (a filter or a Landlock domain
    needs it without CAP_SYS_ADMIN: nothing run later can gain privileges through exec). Raises
    OSError naming the step."""
    if libc().prctl(ctypes.c_int(PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                    ctypes.c_ulong(0)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"cannot set no_new_privs: {os.strerror(code)}")


__all__ = ["DENIED", "SETUP_CALLS", "SeccompError", "load", "load_base", "no_new_privs", "prepare"]
