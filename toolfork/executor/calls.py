"""How a call comes in and how it goes out: one admission rule and one finishing rule for every call.

Why: what happens to a call before it reaches a backend (its tool looked up, its timeout resolved and
checked, its start journaled, its span opened) and after its result comes back (``started_at``, the
counts of ``Executor.stats()``, the metrics, the span's end, the journal's record) is the same whoever
runs it: ``Executor.run``/``stream``/``imap``/``submit`` through the Hub, a session's ``run`` on its state,
or ``toolfork run``'s line lane.
Written once here, a new concern (a counter, a span attribute, a key) is a change to this module.

Data flow (one ``CallBook`` per batch; the lane's job holds one for the whole job)::

    ToolCall ──> CallBook.admit(call, tool) ──> Dispatch (to the backend, or the lane's Line)
                     │                      └─> ToolResult at once: unknown tool, a bad timeout,
                     │                          an answer from the journal, a sandbox refused
                     └─ opens the call's span; writes the journal's start (or leaves it to the sender)
    backend ── ToolResult ──> CallBook.finish(result) ──> started_at, counts, metrics, span end,
                                                          journal record ──> the consumer

Contracts (what every path keeps to, and a new one must):

* The book is built with the context every call of the batch gets (``Executor.dispatch_context``: the
  executor's context and the job key behind ``ToolRuntime.idempotency_key``).
* ``admit(call, tool)`` is called once per call, in the thread that feeds the backend, before the call
  can act. ``tool`` is the caller's look-up (None: unknown). It returns a ``Dispatch`` to run, or the
  call's ``ToolResult`` when it must not run; either way the call is now in the book and its result
  must go through ``finish`` exactly once (a retried call's earlier results do not). A call whose
  place cannot give it a process of its own (``one_process``) and whose tool needs the sandbox is
  refused here, naming why.
* ``finish(result)`` is called once per admitted call, in the thread that consumes the results, with
  the result the user gets. ``finish_line(name)`` is the same for an ok call whose worker wrote its
  record itself (the lane: no result object in the host). ``close()`` ends the spans of calls that
  never finished (the consumer left).
* ``effective_timeout`` is the one timeout rule (the call's, else its tool's, else the default;
  infinity: none); ``admit`` also refuses a timeout that is not a positive number.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from toolfork.executor.backends.dispatch import Dispatch
from toolfork.executor.stats import UNKNOWN_TOOL
from toolfork.executor.types import ErrorInfo, ToolCall, ToolResult

if TYPE_CHECKING:
    from toolfork.executor.journal import Journal
    from toolfork.executor.metering import Recorder
    from toolfork.executor.tracing import CallSpans
    from toolfork.tools.tool import Tool

Counts = dict[tuple[str, str], int]
_wall = time.time  # ``finish`` reads the clock for every call


def effective_timeout(call_timeout: float | None, tool_timeout: float | None,
                      default: float | None) -> float | None:
    """The one timeout rule: the call's, else its tool's, else the executor's; infinity means none.
    (``admit`` checks that a call's own value is a positive number; tools and executors check theirs.)"""
    timeout = call_timeout if call_timeout is not None else tool_timeout
    if timeout is None:
        timeout = default
    return None if timeout == math.inf else timeout


def unknown_tool(call: ToolCall, known: Iterable[str]) -> ToolResult:
    """The error result of a call to a tool that is not there, naming the ones that are."""
    names = ", ".join(sorted(known)) or "(none)"
    return ToolResult(call.id, call.name, "error", error=ErrorInfo(
        "UnknownToolError", f"unknown tool {call.name!r}; the available tools are: {names}"))


def stamp(result: ToolResult) -> None:
    """``started_at``, from now and how long the call ran: set by ``finish``, or where a result arrives
    when its consumer takes it later (the line lane, which writes its records in input order)."""
    result.started_at = time.time() - result.duration_s


class CallBook:
    """One batch's calls between ``admit`` and ``finish`` (see the module docstring).

    ``known`` names the tools there are (asked only for an unknown tool's message); ``journal`` the
    batch's journal (``journal_on_send``: the sender writes the starts, a chunk at a time, as the lane
    does; admission only asks whether the call may start); ``spans`` and ``parent_of`` trace the calls
    (a captured context per call, None: untraced); ``recorder`` records the metrics; ``counts`` is the
    batch's dict of finished calls by (tool, status) in ``Executor.stats()``; ``one_process`` says
    which tools need a process of their own the caller cannot give (a session's calls share one).
    """

    __slots__ = ("_unknown", "context", "counts", "default_timeout", "journal", "journal_on_send", "known",
                 "one_process", "parent_of", "plain", "recorder", "spans", "unset_timeout", "waited")

    def __init__(self, default_timeout: float | None, context: dict[str, Any], counts: Counts,
                 known: Callable[[], Iterable[str]], *, journal: Journal | None = None,
                 journal_on_send: bool = False, spans: CallSpans | None = None,
                 parent_of: Callable[[ToolCall], Any] | None = None, recorder: Recorder | None = None,
                 one_process: Callable[[str], bool | str | None] | None = None) -> None:
        self.default_timeout = default_timeout
        self.unset_timeout = effective_timeout(None, None, default_timeout)  # a call and tool that set none
        self.context = context
        self.counts = counts
        self.known = known
        self.journal = journal
        self.journal_on_send = journal_on_send
        self.spans = spans
        self.parent_of = parent_of
        self.recorder = recorder
        self.waited: dict[str, float] = {}  # call id -> when its backend pulled it (only with a recorder)
        self.one_process = one_process
        self._unknown: set[str] = set()  # ids of admitted calls whose tool was not there (counted apart)
        # Nothing but the rule itself: no span, journal, recorder nor refusal to ask about (most batches).
        # Read first by ``admit`` and ``finish``, it spares every call the look-ups of what is not there.
        self.plain = spans is None and journal is None and recorder is None and one_process is None and (
            self.unset_timeout is None or _positive_finite(self.unset_timeout))

    # ------------------------------------------------------------------ admission

    def admit(self, call: ToolCall, tool: Tool | None) -> Dispatch | ToolResult:
        """The call as its backend runs it, or its result when it must not run (see the contract)."""
        if self.plain and tool is not None and call.timeout is None and tool.timeout is None:
            return Dispatch(call, tool, self.unset_timeout, self.context)  # checked when the book was made
        trace = None
        if self.spans is not None and self.parent_of is not None:  # even an unknown tool's call gets a span
            parent = self.parent_of(call)
            if parent is not None:
                trace = self.spans.start(call.id, call.name, parent, call.meta)
        if tool is None:
            self._unknown.add(call.id)
            return unknown_tool(call, self.known())
        timeout = self.unset_timeout if call.timeout is None and tool.timeout is None else \
            effective_timeout(call.timeout, tool.timeout, self.default_timeout)
        if timeout is not None and not _positive_finite(timeout):
            return ToolResult(call.id, call.name, "error", error=ErrorInfo(
                "ValueError", f"call {call.id!r}: timeout must be a positive number of seconds, got {timeout!r}"))
        refused = self.one_process(call.name) if self.one_process is not None else None
        if refused:  # True, or why (a sandboxed session: a sandbox other than its own)
            return ToolResult(call.id, call.name, "error", error=ErrorInfo(
                "LimitsNotEnforceable", refused if isinstance(refused, str) else
                f"tool '{call.name}' was not run: its Limits need the sandbox, a process of its own for each "
                "call, and this place runs its calls in one process"))
        journal = self.journal
        if journal is not None:
            if self.journal_on_send:
                if not journal.should_run(call.id, tool):
                    from toolfork.executor.journal import outcome_unknown

                    return outcome_unknown(call.id, call.name)
            else:
                answer = journal.admit(call.id, call.name, tool, call.arguments)  # None: its start is journaled
                if answer is not None:
                    return answer
        d = Dispatch(call, tool, timeout, self.context if journal is None else
                     journal.call_context(call.id, self.context))
        if trace is not None:  # set apart: a keyword costs every call
            d.trace = trace
        return d

    def pulled(self, d: Dispatch) -> None:
        """Its backend took the call (only with a recorder: the start of its wait for a worker or a cap)."""
        self.waited[d.call.id] = time.monotonic()

    def started(self, call_id: str, name: str) -> None:
        """The call started where it runs (only with a recorder: the end of its wait)."""
        assert self.recorder is not None
        self.recorder.started(name, self.waited.pop(call_id, None))

    # ------------------------------------------------------------------ finishing

    def finish(self, result: ToolResult) -> None:
        """The call's final result (see the contract): stamped, counted, measured, its span ended and
        its record journaled."""
        if result.started_at is None:  # ``stamp``, written out: every call passes here
            result.started_at = _wall() - result.duration_s
        plain = self.plain  # no journal, recorder nor spans: counting is all
        if not plain and self.journal is not None:
            self.journal.finish(result)
        name = result.name
        unknown = self._unknown
        if unknown and result.call_id in unknown:
            unknown.discard(result.call_id)
            name = UNKNOWN_TOOL
        key = (name, result.status)
        counts = self.counts
        counts[key] = counts.get(key, 0) + 1
        if plain:
            return
        if self.recorder is not None:
            self.waited.pop(result.call_id, None)
            self.recorder.finished(name, result)
        if self.spans is not None:
            self.spans.finish(result)

    def finish_line(self, name: str) -> None:
        """An ok call whose worker wrote its record (``started_at`` inside): counted. A job that is
        traced or measured does not take the lane, so it has no span nor measure to end."""
        key = (name, "ok")
        counts = self.counts
        counts[key] = counts.get(key, 0) + 1

    def close(self) -> None:
        """The batch ended with calls still open (its consumer left): their spans end "cancelled"."""
        if self.spans is not None:
            self.spans.close()


def _positive_finite(value: Any) -> bool:
    try:
        return bool(0 < value < math.inf)
    except TypeError:
        return False


__all__ = ["CallBook", "Counts", "effective_timeout", "stamp", "unknown_tool"]
