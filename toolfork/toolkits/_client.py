"""One pooled ``httpx.Client`` per process for the web toolkits, never carried across ``fork()``.

Why: building an ``httpx.Client`` costs ~20 ms (most of it loading the CA bundle into a new SSL
context), and a client used for one request also throws away its TCP (and TLS) connection. A worker
that makes many web calls should pay that once and keep its connections alive.

Why per process: tools run in forked workers. A client inherited across ``fork()`` shares its pooled
sockets (and their TLS session state) with the parent; two processes writing to one connection mix
their requests, and one side's close would cut the other's. So:

- a client is created lazily, in the process that uses it, and remembers that pid;
- ``os.register_at_fork(after_in_child=...)`` forgets, in the child, every client the parent held.
  The child only drops its references: it never closes them, because closing would act on
  connections the parent still uses (a TLS close_notify on a shared socket). The descriptors close
  with the child;
- as a second guard, ``shared_client()`` compares the recorded pid with ``os.getpid()`` on every
  call, so a process forked without the at-fork hooks (a raw ``os.fork`` from C) still builds its own;
- the clients of this process are closed at interpreter exit.

The pool is keyed by the settings a client is built with (``ClientSettings``); per-request settings
(timeout, headers, auth) are passed per request, so every toolkit instance shares one client.
"""

from __future__ import annotations

import atexit
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

__all__ = ["ClientSettings", "client_pid", "close_clients", "shared_client"]


@dataclass(frozen=True)
class ClientSettings:
    """What a pooled client is built with; each distinct value gets its own client in a process.

    Redirects are never followed by the web toolkits (a key header would follow them to another
    host), so that is fixed here rather than a per-call choice.
    """

    follow_redirects: bool = False
    # httpx's own defaults: a process running many tool calls in threads (thread mode) must not
    # queue for a connection slot, which would surface as a timeout.
    max_connections: int = 100
    max_keepalive_connections: int = 20
    keepalive_expiry: float = 5.0


DEFAULT_SETTINGS = ClientSettings()

_lock = threading.Lock()
_clients: dict[ClientSettings, httpx.Client] = {}
_owner_pid = os.getpid()  # the process _clients belongs to
_created_in: dict[int, int] = {}  # id(client) -> pid that built it (for tests and diagnostics)
# Clients a forked child inherited: kept referenced, never used or closed, so that not even garbage
# collection acts on the parent's connections from the child.
_inherited: list[httpx.Client] = []


def shared_client(settings: ClientSettings = DEFAULT_SETTINGS) -> httpx.Client:
    """This process's client for ``settings``, built on first use (imports httpx then)."""
    global _owner_pid
    pid = os.getpid()
    with _lock:
        if _owner_pid != pid:  # forked without the at-fork hook having run: start over
            _forget_locked(pid)
        client = _clients.get(settings)
        if client is not None and not client.is_closed:
            return client
        import httpx

        client = httpx.Client(
            follow_redirects=settings.follow_redirects,
            limits=httpx.Limits(
                max_connections=settings.max_connections,
                max_keepalive_connections=settings.max_keepalive_connections,
                keepalive_expiry=settings.keepalive_expiry,
            ),
        )
        _clients[settings] = client
        _created_in[id(client)] = pid
        return client


def client_pid(client: httpx.Client) -> int | None:
    """The pid of the process that built ``client`` through ``shared_client``, else None."""
    return _created_in.get(id(client))


def close_clients() -> None:
    """Close this process's clients (their pooled connections); the next call builds a new one."""
    with _lock:
        if _owner_pid != os.getpid():
            _forget_locked(os.getpid())
            return
        clients = list(_clients.values())
        _clients.clear()
        for client in clients:
            _created_in.pop(id(client), None)
    for client in clients:
        try:
            client.close()
        except Exception:  # pragma: no cover - closing at exit must not raise
            pass


def _forget_locked(pid: int) -> None:
    """Drop (never close) clients that belong to another process; caller holds ``_lock``."""
    global _owner_pid
    _inherited.extend(_clients.values())
    _clients.clear()
    _created_in.clear()
    _owner_pid = pid


def _after_fork_in_child() -> None:
    # The lock may have been held by another thread of the parent at fork time: replace it.
    global _lock
    _lock = threading.Lock()
    _forget_locked(os.getpid())


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(close_clients)
