"""The 2026-07-28 input-required flow (SEP-2322) for a plain toolfork tool, without re-running it.

On that revision a server cannot send a request to its client mid-call: it answers the call with an
``InputRequiredResult`` (the questions, and an opaque ``request_state``), and the client retries the
call with its answers and that state. A toolfork tool asks with ``ToolRuntime.elicit`` / ``sample``
and waits for the answer in its worker, so the call is not re-run on the retry: it is *parked*. The
first request starts the call; when the tool asks, that request is answered "input required" with the
tool's question and a random ``request_state`` naming the parked call; the retry that carries the state
hands the client's answer to the waiting tool and waits again, for the next question or the result.
The tool's state (its stack, its open files, the work it did before asking) survives the rounds, and
the worker is the same one.

Bounds: the parked call runs on its deadline as any call does (the executor kills it at the timeout,
answer or not); a call left parked for ``PARK_S`` without a retry is cancelled (its worker killed),
whatever its timeout. A call that ended while parked keeps its result for ``KEEP_S``, so a retry that comes late
gets that result (a timeout, say) rather than a state nobody knows. A request of a round that is
cancelled (``notifications/cancelled``, a dropped client) cancels the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from collections.abc import Callable, Iterator
from typing import Any

PARK_S = 300.0  # an unbounded call waits this long for its client's retry, then is cancelled
KEEP_S = 60.0  # a call that ended while parked keeps its result this long for a late retry


class PendingCall:
    """One call of a 2026-07-28 request: its executor task, the questions its tool asked and not yet
    had answered; ``follow(ctx)`` points its log messages and progress at the request of a new round."""

    def __init__(self, task: asyncio.Future[Any], tool: str, arguments: dict[str, Any],
                 follow: Callable[[Any], None]) -> None:
        self.task, self.tool, self.arguments, self._follow = task, tool, arguments, follow
        self.state = secrets.token_urlsafe(24)
        self._open: dict[str, tuple[Any, asyncio.Future[Any]]] = {}
        self._asked = asyncio.Event()
        self._keys = itertools.count(1)

    async def ask(self, request: Any) -> Any:
        """From the tool (through ``ClientOps``): ``request`` (an SDK ``InputRequest``) goes out with
        the next "input required" answer; returns the client's response to it."""
        key = f"{request.method.split('/')[0]}-{next(self._keys)}"
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._open[key] = (request, answer)
        self._asked.set()
        try:
            return await answer
        finally:
            self._open.pop(key, None)

    def resume(self, ctx: Any, responses: dict[str, Any] | None) -> None:
        """A retry (request ``ctx``) with the client's responses, by the keys of the questions they
        answer (others are ignored; a question left unanswered is asked again)."""
        self._follow(ctx)
        for key, response in (responses or {}).items():
            entry = self._open.get(key)
            if entry is not None and not entry[1].done():
                entry[1].set_result(response)

    async def next_round(self) -> dict[str, Any] | None:
        """Wait until the call ends (None: ``task`` has the result) or its tool has asked something
        not yet answered (the questions, by key)."""
        while not self.task.done():
            asked = {key: request for key, (request, answer) in self._open.items() if not answer.done()}
            if asked:
                return asked
            self._asked.clear()
            waiter = asyncio.ensure_future(self._asked.wait())
            try:
                await asyncio.wait({self.task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
        return None

    def cancel(self) -> None:
        self.task.cancel()


class ParkedCalls:
    """The calls waiting for their client's retry, by ``request_state``."""

    def __init__(self) -> None:
        self._parked: dict[str, PendingCall] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def park(self, call: PendingCall) -> None:
        """Keep ``call`` until a retry takes it: at its deadline it ends on its own (then it is kept
        ``KEEP_S`` for a late retry); with no retry in ``PARK_S`` it is cancelled."""
        self._parked[call.state] = call
        self._timers[call.state] = asyncio.get_running_loop().call_later(PARK_S, self._expire, call)
        call.task.add_done_callback(lambda _: self._ended(call))

    def take(self, state: str, tool: str, arguments: dict[str, Any]) -> PendingCall:
        """The parked call a retry names; ``LookupError`` saying why when there is none for it."""
        call = self._parked.get(state)
        if call is None:
            raise LookupError(f"request_state {state[:40]!r} names no call waiting for input on this server "
                              "(it was answered already, or ended and was forgotten, or never was)")
        if call.tool != tool or call.arguments != arguments:
            raise LookupError(f"request_state {state[:40]!r} belongs to a call of {call.tool!r} with other "
                              f"arguments; a retry repeats the call it answers")
        del self._parked[state]
        timer = self._timers.pop(state, None)
        if timer is not None:
            timer.cancel()
        return call

    def _expire(self, call: PendingCall) -> None:
        self._timers.pop(call.state, None)
        call.cancel()

    def _ended(self, call: PendingCall) -> None:
        if self._parked.get(call.state) is call:  # ended while parked: kept a while for a late retry
            timer = self._timers.pop(call.state, None)
            if timer is not None:
                timer.cancel()
            self._timers[call.state] = asyncio.get_running_loop().call_later(KEEP_S, self._forget, call)

    def _forget(self, call: PendingCall) -> None:
        self._timers.pop(call.state, None)
        if self._parked.get(call.state) is call:
            del self._parked[call.state]

    @contextlib.contextmanager
    def cancelling(self, call: PendingCall) -> Iterator[None]:
        """A round's request ending by an exception (cancelled, its client gone) cancels the call."""
        try:
            yield
        except BaseException:
            call.cancel()
            raise


__all__ = ["KEEP_S", "PARK_S", "ParkedCalls", "PendingCall"]
