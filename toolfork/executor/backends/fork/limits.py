"""The descriptor limit of the processes that hold a channel per session (the host, the sessions'
supervisor): raised from the soft limit to the hard one, once each; and, where even the hard one leaves
no room for another session, a refusal that names the limit instead of EMFILE from deep inside.

Why: the host keeps four descriptors a session (its three channels and its control socket) and the
supervisor two or three; at the common soft limit of 1,024 that bounds open sessions near 250, a bound
set by an accident of the machine instead of a setting. A server raises its soft limit to the hard one;
so do these two. What the hard limit allows is the bound: past it, opening a session says so (with
``RESERVE`` descriptors kept for the host's other work: a batch, a restored checkpoint, the user's files).
"""

from __future__ import annotations

import errno
import os

SESSION_FDS = 4  # the host's descriptors a session holds: call pipe, result pipe, side socket, control socket
RESERVE = 32  # descriptors a session never takes: the host's batches, restores and files need some


def raise_descriptor_limit() -> None:
    """Soft limit on open files up to the hard one (nothing where it cannot be)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


def no_room_for_sessions(sessions: int) -> str | None:
    """Why the host cannot open the descriptors of ``sessions`` more sessions and keep ``RESERVE`` free,
    or None when it can (or cannot tell). One probe: the lowest free descriptor number, which every
    number below is taken at; a hole below a full table passes here and is caught as EMFILE by the caller."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, ValueError, OSError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        lowest = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.EMFILE:
            return None
        lowest = soft
    else:
        os.close(lowest)
    if lowest + SESSION_FDS * sessions + RESERVE <= soft:
        return None
    return descriptors_exhausted(soft, hard)


def descriptors_exhausted(soft: int, hard: int) -> str:
    """The refusal of a session the host has no descriptors for, naming the limit and how to raise it."""
    import resource

    hard_text = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    return (f"no room for another session: this process may have {soft} open files (RLIMIT_NOFILE, hard limit "
            f"{hard_text}; the soft one is raised to the hard one already), each session holds {SESSION_FDS} of "
            f"them here and {RESERVE} are kept for other work; close a session, or raise the limit before "
            f"starting Python: `ulimit -n {max(2 * soft, 4096)}` in the shell (raising the hard limit, "
            "`ulimit -Hn`, needs root or CAP_SYS_RESOURCE; systemd: LimitNOFILE=; docker: --ulimit nofile=)")


__all__ = ["RESERVE", "SESSION_FDS", "descriptors_exhausted", "no_room_for_sessions", "raise_descriptor_limit"]
