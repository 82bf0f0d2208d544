"""The template's control messages are named types, each with one handler in ``Template``; the real
template process is driven through its ``TemplateLink``. A message of no known type leaves it serving,
and the descriptors that came with it are closed there, not kept for the template's life."""

from __future__ import annotations

import os
import pickle
import select
import socket
import typing
from types import SimpleNamespace

from tests.procs import gone
from toolfork.executor.backends.base import WorkerSetup
from toolfork.executor.backends.fork import template_messages
from toolfork.executor.backends.fork.template import Template
from toolfork.executor.backends.fork.template_link import TemplateLink

REPLIES = {template_messages.Spawned, template_messages.Exited}
FIRST = {template_messages.Sentinel}  # read before the template serves (``_multiprocess_own``)


def test_every_message_the_host_sends_has_exactly_one_handler() -> None:
    kinds = {getattr(template_messages, n) for n in template_messages.__all__}
    assert all(issubclass(k, tuple) and hasattr(k, "_fields") for k in kinds)  # named, as frames.py's
    sent = kinds - REPLIES - FIRST
    assert set(Template.HANDLERS) == sent
    assert len({h.__name__ for h in Template.HANDLERS.values()}) == len(sent)  # one handler each
    for kind, handler in Template.HANDLERS.items():  # and each handler takes its own type
        assert typing.get_type_hints(handler)["msg"] is kind


def _eof_within(fd: int, seconds: float) -> bool:
    if not select.select([fd], [], [], seconds)[0]:
        return False
    return os.read(fd, 1) == b""


def test_an_unknown_message_closes_its_descriptors_and_the_template_still_forks() -> None:
    worker = SimpleNamespace(pid=None)
    link = TemplateLink({}, WorkerSetup(), 1.0, {1: worker})
    ours: tuple[int, int, socket.socket] | None = None
    r, w = os.pipe()
    try:
        socket.send_fds(link.ctrl, [pickle.dumps(("bogus", 1))], [w])
        os.close(w)
        w = -1
        # Only the template held the write end: EOF means it closed its copy.
        assert _eof_within(r, 10.0), "the template kept the descriptors of a message it did not know"
        ours = link.spawn(1)
        assert link.wait_pid(worker) is not None and link.broken is None
    finally:
        pid = worker.pid
        if ours is not None:
            os.close(ours[0])
            os.close(ours[1])
            ours[2].close()
            link.forget_fds([ours[0], ours[1]])
        link.shutdown([pid] if pid is not None else [])
        os.close(r)
        if w >= 0:
            os.close(w)
    assert pid is not None and gone(pid, 5.0)
