"""The control messages between the host and its template, as named types (one pickle per
SOCK_SEQPACKET message on the template's control socket).

Why named types: the template handles each kind in a handler of its own (``fork.template.Template``),
chosen by the message's type, and what a message carries is read by field name on both sides, as
``wire.frames`` does for calls and results; a kind added is a class here and a handler there.

    host (TemplateLink) ──Sentinel──────────────────────> template   (first, once)
                        ──Spawn + 3 fds─────────────────>            fork a worker (or hand a spare its call)
                        ──OpenSession + 4 fds───────────>            to the sessions' supervisor; no reply
                        ──Term───────────────────────────>           SIGTERM a worker's group, SIGKILL later
                        ──AddTools (chunks)──────────────>           tools added later
                        ──Exit───────────────────────────>           let workers go, then exit
                        <──Spawned / Exited─────────────
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from toolfork.governance.limits import Limits


class Sentinel(NamedTuple):
    """The pipe multiprocess watches the template by (its device and inode): the template's children get
    none of its descriptors."""

    dev: int
    ino: int


class Spawn(NamedTuple):
    """Fork worker ``wid`` on the three descriptors that come with it (its call read end, result write end,
    side socket); with ``sandbox`` (a sandboxed call's Limits) the worker enters that sandbox first."""

    wid: int
    sandbox: Limits | None = None


class OpenSession(NamedTuple):
    """Hand the four descriptors that come with it (a worker's three, the session's control socket) to the
    sessions' supervisor, which forks the session's process (see ``fork.session_worker``)."""


class Term(NamedTuple):
    """Stop worker ``pid``: SIGTERM its process group now, SIGKILL after ``grace`` seconds."""

    pid: int
    grace: float


class AddTools(NamedTuple):
    """One chunk of the dill bytes of {name: Tool} for tools added later; ``last`` ends them."""

    seq: int
    last: bool
    chunk: bytes


class Exit(NamedTuple):
    """End: let the workers leave, SIGKILL what is left after ``grace`` seconds, exit."""

    grace: float


class Spawned(NamedTuple):
    """Reply: worker ``wid`` is process ``pid``."""

    wid: int
    pid: int


class Exited(NamedTuple):
    """Reply: worker ``pid`` exited with ``status`` (as ``os.waitpid`` gives it)."""

    pid: int
    status: int


__all__ = ["AddTools", "Exit", "Exited", "OpenSession", "Sentinel", "Spawn", "Spawned", "Term"]
