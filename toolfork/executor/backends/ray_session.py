"""The Ray connection the Ray backends of this process share: who started it, who stops it.

Ray is one global runtime per process. A ``RayBackend`` starts it (``ray.init``) only when the program
has not; the backends then count themselves in and out, and the last one to close shuts Ray down, but
only if a backend started it. A program that called ``ray.init`` itself keeps its Ray.

The ``Sink`` actor (progress and start messages, see ``ray_task``) is shared the same way: one per
process and Ray session, created with the first backend and killed with the last.
"""

from __future__ import annotations

import os
import threading
from typing import Any

SINK_READY_TIMEOUT_S = 60.0  # a cluster may have to start a node for the actor

_LOCK = threading.Lock()
_started_by_toolfork = False
_users = 0
_sink: Any = None
_sink_ready = False
_watchdog: Any = None  # ray_watchdog.Watchdog of a local Ray toolfork started


def import_ray() -> Any:
    """``ray``, or an ImportError that says which extra provides it."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(
            "mode='ray' needs the 'ray' package, which is not installed: pip install 'toolfork[ray]' "
            f"({exc})"
        ) from exc
    return ray


def init_kwargs(address: str | None) -> dict[str, Any]:
    """What ``ray.init`` gets when a backend has to start or join Ray itself."""
    if address is None:
        return {"num_cpus": os.cpu_count() or 1, "include_dashboard": False, "log_to_driver": False,
                "ignore_reinit_error": True}
    if address.startswith("ray://"):  # Ray Client forwards every non-default argument to the server
        return {"address": address}
    return {"address": address, "log_to_driver": False, "ignore_reinit_error": True}


def acquire(ray: Any, address: str | None) -> None:
    """Count a backend in, starting (address None) or joining Ray if nobody did yet."""
    global _started_by_toolfork, _users, _watchdog
    if address is not None and (not isinstance(address, str) or not address.strip()):
        raise ValueError(f"address must be None, 'auto', 'host:port' or 'ray://host:port'; got {address!r}")
    with _LOCK:
        if not ray.is_initialized():
            _forget_sink()  # it belonged to a Ray session that is gone
            try:
                if address is None:  # a local instance is ours to clean up, even if the host dies
                    from toolfork.executor.backends.ray_watchdog import Watchdog

                    _watchdog = Watchdog()
                    with _watchdog.marking():
                        ray.init(**init_kwargs(address))
                    _watchdog.tell_session(_session_dir(ray))
                else:
                    ray.init(**init_kwargs(address))
            except Exception as exc:
                _close_watchdog()
                where = "a local Ray instance" if address is None else f"the Ray cluster at {address!r}"
                raise RuntimeError(f"could not start or join {where}: {type(exc).__name__}: {exc}") from exc
            _started_by_toolfork = True
        _users += 1


def release(ray: Any) -> None:
    """Count a backend out; the last one kills the sink, and shuts Ray down if toolfork started it."""
    global _started_by_toolfork, _users
    with _LOCK:
        _users = max(0, _users - 1)
        if _users:
            return
        if _sink is not None and ray.is_initialized():
            try:
                ray.kill(_sink)
            except Exception:
                pass
        _forget_sink()
        if _started_by_toolfork:
            _started_by_toolfork = False
            ray.shutdown()
            _close_watchdog()


def _session_dir(ray: Any) -> str:
    try:
        return str(ray._private.worker._global_node.get_session_dir_path())
    except Exception:  # a private API: without it the watchdog still finds the marked processes
        return ""


def _close_watchdog() -> None:
    global _watchdog
    if _watchdog is not None:
        _watchdog.close()
        _watchdog = None


def started_by_toolfork() -> bool:
    """Whether the Ray this process uses was started by toolfork (and will be shut down by it)."""
    return _started_by_toolfork


def shared_sink(ray: Any, sink_class: Any, *, wait: bool) -> Any:
    """The process's sink actor, created on first use; with ``wait``, only once it answers.

    Waiting matters for deadlines: a call's deadline starts when its "started" message reaches the
    host, and the first messages would otherwise wait for the actor's process to start.
    """
    global _sink, _sink_ready
    with _LOCK:
        if _sink is None:
            _sink = sink_class.options(num_cpus=0, max_restarts=0).remote()
            _sink_ready = False
        sink = _sink
        if not wait or _sink_ready:
            return sink
    ray.get(sink.ping.remote(), timeout=SINK_READY_TIMEOUT_S)
    with _LOCK:
        if _sink is sink:
            _sink_ready = True
    return sink


def drop_sink(sink: Any) -> None:
    """The sink died (its node was lost): the next ``shared_sink`` makes another."""
    with _LOCK:
        if _sink is sink:
            _forget_sink()


def _forget_sink() -> None:
    global _sink, _sink_ready
    _sink = None
    _sink_ready = False


__all__ = ["acquire", "drop_sink", "import_ray", "init_kwargs", "release", "shared_sink", "started_by_toolfork"]
