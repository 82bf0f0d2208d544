"""The one place an effective mode picks its backend class.

Why: the Executor (and anything else that starts a backend) must not import a backend's modules: the
fork pool and Ray are imported here, and only when their mode is chosen (Ray takes seconds to import)::

    resolve_mode(mode) ──> backend_class("fork" | "ray" | "sequential") ──> ForkBackend | RayBackend
                                                                            | SequentialBackend
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolfork.executor.backends.base import Backend


def backend_class(mode: str) -> type[Backend]:
    """The backend an effective mode names (``modes.resolve_mode``)."""
    if mode == "fork":
        from toolfork.executor.backends.fork.pool import ForkBackend

        return ForkBackend
    if mode == "ray":
        from toolfork.executor.backends.ray import RayBackend

        return RayBackend
    from toolfork.executor.backends.sequential import SequentialBackend

    return SequentialBackend


__all__ = ["backend_class"]
