"""Which backend "auto" gets, and why it fell back when it could not fork.

"auto" runs sequentially, with a reason that says what was found, when:

* the platform has no ``os.fork``, or the ``multiprocess`` package offers no "fork" start method;
* this process is a daemonic process of the standard library's ``multiprocessing`` or of the
  ``multiprocess`` package (the two keep separate process objects, so both are checked): a daemonic
  process may not have children, and its parent terminates it without waiting for any it has;
* the user disabled fork (``TOOLFORK_MODE=sequential``).

Each fallback is logged on the ``toolfork.executor`` logger: at WARNING when something about the
process or the platform forced it, at INFO when the user asked for it.
"""

from __future__ import annotations

import logging
import os

MODES = ("auto", "fork", "sequential", "ray")
ENV_VAR = "TOOLFORK_MODE"

log = logging.getLogger("toolfork.executor")


def _daemon_reason(package: str, process: object) -> str:
    name = getattr(process, "name", "?")
    return (f"running inside a daemonic {package} process ({name!r}, pid {os.getpid()}), which may not "
            "have children")


def fork_unavailable_reason() -> str | None:
    """Why this process cannot run a fork pool, or None when it can."""
    if not hasattr(os, "fork"):
        return "no fork start method on this platform (os.fork does not exist)"
    import multiprocess

    methods = multiprocess.get_all_start_methods()
    if "fork" not in methods:
        return (f"no fork start method on this platform (the multiprocess package offers only "
                f"{', '.join(methods) or 'none'})")
    import multiprocessing

    stdlib = multiprocessing.current_process()
    if stdlib.daemon:
        return _daemon_reason("multiprocessing (standard library)", stdlib)
    other = multiprocess.current_process()
    if other.daemon:
        return _daemon_reason("multiprocess (package)", other)
    return None


def resolve_mode(requested: str) -> tuple[str, str | None]:
    """(effective mode, fallback reason) for what the user asked for; a fallback is logged."""
    mode, reason, forced = _resolve(requested)
    if reason is not None:
        log.log(logging.WARNING if forced else logging.INFO,
                "toolfork executor: mode %r runs sequentially: %s", requested, reason)
    return mode, reason


def _resolve(requested: str) -> tuple[str, str | None, bool]:
    """(effective mode, fallback reason, whether the fallback was forced rather than asked for)."""
    if requested not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {requested!r}")
    if requested != "auto":
        if requested == "fork":
            reason = fork_unavailable_reason()
            if reason is not None:
                raise RuntimeError(f"mode='fork' is not possible here: {reason} (use mode='auto')")
        return requested, None, False
    override = os.environ.get(ENV_VAR, "").strip().lower()
    if override and override != "auto":
        if override not in MODES:
            raise ValueError(f"{ENV_VAR} must be one of {', '.join(MODES)}; got {override!r}")
        if override == "sequential":
            return "sequential", f"fork disabled by the user ({ENV_VAR}=sequential)", False
        if override == "fork":
            reason = fork_unavailable_reason()
            if reason is not None:
                return "sequential", reason, True
        return override, None, False
    reason = fork_unavailable_reason()
    if reason is not None:
        return "sequential", reason, True
    return "fork", None, False


__all__ = ["ENV_VAR", "MODES", "fork_unavailable_reason", "resolve_mode"]
