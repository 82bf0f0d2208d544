"""The descriptor limit of the processes that hold a channel per session (the host, the sessions'
supervisor): raised from the soft limit to the hard one, once each.

Why: the host keeps four descriptors a session (its three channels and its control socket) and the
supervisor two or three; at the common soft limit of 1,024 that bounds open sessions near 250, a bound
set by an accident of the machine instead of a setting. A server raises its soft limit to the hard one;
so do these two. What the hard limit allows is the bound.
"""

from __future__ import annotations


def raise_descriptor_limit() -> None:
    """Soft limit on open files up to the hard one (nothing where it cannot be)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


__all__ = ["raise_descriptor_limit"]
