"""The Ray connection the Ray backends of this process share: who started it, who stops it.

Ray is one global runtime per process. A ``RayBackend`` starts it (``ray.init``) only when the program
has not; the backends then count themselves in and out, and the last one to close shuts Ray down, but
only if a backend started it. A program that called ``ray.init`` itself keeps its Ray.

The ``Sink`` actor (progress and start messages, see ``ray_task``) is one per driver connection: made
with the first backend and kept for the next ones, so an agent that makes an Executor per turn pays its
process's start (about a CPU-second) once. It goes with the driver's job (``ray.shutdown()``, the
driver's exit); a backend that finds Ray connected anew (another job or node) makes another.
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
_sink_connection: tuple[str, str] | None = None  # (job, node) of the driver connection the sink belongs to
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
        if _sink is not None and not _users and _connection(ray) != _sink_connection:
            _forget_sink()  # made on an earlier connection of this process (ray.shutdown, then ray.init)
        _users += 1


def release(ray: Any) -> None:
    """Count a backend out; the last one shuts Ray down if toolfork started it (the sink with it). On a
    Ray the program started or joined, the sink stays for the next backend of this connection."""
    global _started_by_toolfork, _users
    with _LOCK:
        _users = max(0, _users - 1)
        if _users:
            return
        if _sink is not None and _sink_connection is None and ray.is_initialized():
            try:  # a connection that cannot be told from the next one: its sink is not kept
                ray.kill(_sink)
            except Exception:
                pass
            _forget_sink()
        if not _started_by_toolfork:
            return
        _forget_sink()
        _started_by_toolfork = False
        ray.shutdown()
        _close_watchdog()


def _connection(ray: Any) -> tuple[str, str] | None:
    """The driver's connection to Ray: its job and node (a new ``ray.init`` is a new job, a new local
    instance a new node); None when it cannot be told."""
    try:
        context = ray.get_runtime_context()
        return str(context.get_job_id()), str(context.get_node_id())
    except Exception:  # Ray Client, or not connected: no sink is kept from an unknown connection
        return None


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
    global _sink, _sink_ready, _sink_connection
    with _LOCK:
        if _sink is None:
            _sink = sink_class.options(num_cpus=0, max_restarts=0).remote()
            _sink_ready = False
            _sink_connection = _connection(ray)
        sink = _sink
        if not wait or _sink_ready:
            return sink
    ray.get(sink.ping.remote(), timeout=SINK_READY_TIMEOUT_S)
    with _LOCK:
        if _sink is sink:
            _sink_ready = True
    return sink


def first_line(exc: BaseException) -> str:
    """What Ray raised, in one line (its messages run to a page of diagnostics)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def drop_sink(sink: Any) -> None:
    """The sink died (its node was lost): the next ``shared_sink`` makes another."""
    with _LOCK:
        if _sink is sink:
            _forget_sink()


def _forget_sink() -> None:
    global _sink, _sink_ready, _sink_connection
    _sink = None
    _sink_ready = False
    _sink_connection = None


__all__ = ["acquire", "drop_sink", "first_line", "import_ray", "init_kwargs", "release", "shared_sink",
           "started_by_toolfork"]
