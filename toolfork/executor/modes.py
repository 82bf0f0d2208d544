"""Which backend "auto" gets, and why it fell back when it could not fork."""

from __future__ import annotations

import os

MODES = ("auto", "fork", "sequential", "ray")
ENV_VAR = "TOOLFORK_MODE"


def fork_unavailable_reason() -> str | None:
    """Why this process cannot run a fork pool, or None when it can."""
    import multiprocess

    if not hasattr(os, "fork") or "fork" not in multiprocess.get_all_start_methods():
        return "no fork start method on this platform"
    if multiprocess.current_process().daemon:
        return "running inside a daemonic process, which may not have children"
    return None


def resolve_mode(requested: str) -> tuple[str, str | None]:
    """(effective mode, fallback reason) for what the user asked for."""
    if requested not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {requested!r}")
    if requested != "auto":
        if requested == "fork":
            reason = fork_unavailable_reason()
            if reason is not None:
                raise RuntimeError(f"mode='fork' is not possible here: {reason} (use mode='auto')")
        return requested, None
    override = os.environ.get(ENV_VAR, "").strip().lower()
    if override and override != "auto":
        if override not in MODES:
            raise ValueError(f"{ENV_VAR} must be one of {', '.join(MODES)}; got {override!r}")
        if override == "sequential":
            return "sequential", f"fork disabled by the user ({ENV_VAR}=sequential)"
        if override == "fork":
            reason = fork_unavailable_reason()
            if reason is not None:
                return "sequential", reason
        return override, None
    reason = fork_unavailable_reason()
    if reason is not None:
        return "sequential", reason
    return "fork", None


__all__ = ["ENV_VAR", "MODES", "fork_unavailable_reason", "resolve_mode"]
