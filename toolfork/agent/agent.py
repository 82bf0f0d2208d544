"""``Agent``: configuration, the public calls (chat / stream / async twins / resume), and the two
drivers that perform the loop's operations.

The loop (``loop.py``) decides; the drivers talk to the provider and the executor. The executor
is created on the first batch that has something to run, reused across turns and closed by
``close()``, the context manager, or at interpreter exit.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
import weakref
from collections.abc import AsyncGenerator, Callable, Generator, Iterable, Iterator, Mapping
from typing import Any

from toolfork.agent.errors import AgentConfigError, ResumeError, describe
from toolfork.agent.events import (
    AgentEvent,
    Callback,
    EventBus,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
)
from toolfork.agent.gate import not_executed, supplied_output
from toolfork.agent.history import ChatHistory, InMemoryChatHistory
from toolfork.agent.loop import CallModel, Emit, Execute, Loop, LoopGen
from toolfork.agent.messages import AssistantMessage, ToolResultItem, UserMessage, as_user_message
from toolfork.agent.output_limit import limit_output
from toolfork.agent.policy import error_output
from toolfork.agent.providers.base import ModelRequest, Provider
from toolfork.agent.runs import DEFAULT_MAX_RUNS, RunCounter
from toolfork.agent.state import (
    APPROVAL,
    RUN,
    SUPPLIED,
    ApprovalRequest,
    RunPaused,
    RunState,
    ToolResultsRequest,
)
from toolfork.agent.telemetry import Telemetry
from toolfork.agent.telemetry import available as telemetry_available
from toolfork.agent.timeouts import can_preempt_in_host, lift_unenforceable, note_overrun
from toolfork.agent.toolset import Toolset
from toolfork.executor.types import CallProgress, CallStarted, Event, ToolCall, ToolResult
from toolfork.governance.limits import Limits
from toolfork.tools.output import ToolOutput
from toolfork.tools.runtime import AGENT_CONTEXT_KEY, NEXT_TURN_KEY

DEFAULT_MAX_STEPS = 20
DEFAULT_MAX_OUTPUT_CHARS = 100_000
_APPROVE = ("approve", "approved", "yes")
_REJECT = ("reject", "rejected", "no")


class _hybridmethod:
    """A method that works on the class (building an instance) and on an instance."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        functools.update_wrapper(self, func)  # type: ignore[arg-type]

    def __get__(self, obj: Any, cls: type) -> Callable[..., Any]:
        return functools.partial(self.func, obj if obj is not None else cls)


def _close_quietly(executor: Any) -> None:
    try:
        executor.close()
    except Exception:
        pass


class _LoopPort:
    """The agent as its loop sees it (``LoopHost``): the loop reads and writes the agent only through
    these names, so it needs neither the Agent class nor its private fields."""

    __slots__ = ("_agent",)

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    @property
    def agent_id(self) -> str:
        return self._agent.agent_id

    @property
    def thread_id(self) -> str | None:
        return self._agent.thread_id

    @property
    def max_steps(self) -> int:
        return self._agent.max_steps

    @property
    def max_output_chars(self) -> int | None:
        return self._agent.max_output_chars

    @property
    def approval_policy(self) -> Any:
        return self._agent.approval_policy

    @property
    def history(self) -> ChatHistory:
        return self._agent.history

    def tool_error_handler(self, exc: BaseException, tool: Any) -> Any:
        return self._agent.tool_error_handler(exc, tool)

    def provider(self) -> Provider:
        return self._agent._get_provider()

    def toolset(self) -> Toolset:
        return self._agent._get_toolset()

    def discovered(self) -> set[str]:
        return self._agent._discovered

    def model_request(self) -> ModelRequest:
        return self._agent._model_request()

    def pause(self, paused: RunPaused) -> None:
        self._agent._paused = paused

class Agent:
    """An LLM agent whose tool calls run through the toolfork executor.

    Configure by arguments, or subclass and override ``provider()``, ``instructions()``, ``tools()``
    (and ``chat_history()``, ``tool_error_handler()``). Not thread-safe: one run at a time.
    """

    def __init__(
        self,
        provider: Provider | None = None,
        instructions: str | None = None,
        tools: Iterable[Any] | None = None,
        *,
        history: ChatHistory | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        tool_max_runs: int = DEFAULT_MAX_RUNS,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
        tool_error_handler: Callable[[BaseException, Any], Any] | None = None,
        tool_timeout: float | None = None,
        parallel: bool = False,
        before_child: Callable[[], Any] | None = None,
        after_child: Callable[[], Any] | None = None,
        workers: int | None = None,
        callbacks: Iterable[Callback] = (),
        telemetry: bool = True,
        thread_id: str | None = None,
        approval_policy: Any = None,
        agent_id: str | None = None,
        limits: Limits | None = None,
        concurrency: Mapping[str, int] | None = None,
        max_calls_per_worker: int | None = None,
        max_worker_memory_mb: int | None = None,
    ) -> None:
        if max_steps < 1:
            raise AgentConfigError(f"max_steps must be at least 1, got {max_steps}")
        if max_output_chars is not None and max_output_chars < 1:
            raise AgentConfigError(f"max_output_chars must be positive or None, got {max_output_chars}")
        if tool_timeout is not None and tool_timeout <= 0:
            raise AgentConfigError(f"tool_timeout must be positive or None, got {tool_timeout}")
        if approval_policy is not None and not isinstance(approval_policy, bool) and not callable(approval_policy):
            raise AgentConfigError("approval_policy must be True (ask for every call), False or None (ask for none), "
                                   f"or a callable (inputs) -> bool | str; got {approval_policy!r}")
        #: Applies to every tool whose own ``approval_policy`` is None (a tool's True / False / callable wins).
        self.approval_policy: Any = approval_policy
        #: Identifies this agent to its tools (``ToolRuntime.agent_id``); a fresh id unless given.
        self.agent_id: str = agent_id if agent_id is not None else uuid.uuid4().hex
        self._provider_arg = provider
        self._instructions_arg = instructions
        self._tools_arg = list(tools) if tools is not None else None
        if self._tools_arg:
            Toolset(self._tools_arg)  # refuse what cannot work now (duplicates, tools with nothing to run)
        self._history_arg = history
        self.max_steps = max_steps
        self.max_output_chars = max_output_chars
        self.tool_timeout = tool_timeout
        self._error_handler = tool_error_handler
        self._max_runs = DEFAULT_MAX_RUNS
        self.tool_max_runs(tool_max_runs)
        self._parallel = parallel
        self._before_child = before_child
        self._after_child = after_child
        self._workers = workers
        self._thread_id = thread_id
        # Resource governance for the agent's Executor (see docs/executor.md, "Limits"): passed as they are.
        self._governance = {key: value for key, value in (
            ("limits", limits), ("concurrency", concurrency), ("max_calls_per_worker", max_calls_per_worker),
            ("max_worker_memory_mb", max_worker_memory_mb)) if value is not None}

        self._resolved_provider: Provider | None = None
        self._toolset: Toolset | None = None
        self._history: ChatHistory | None = None
        self._extra_tools: list[Any] = []
        self._discovered: set[str] = set()
        self._paused: RunPaused | None = None
        self._last_answered: set[str] = set()  # call ids of the last resume / submission
        self._executor: Any = None
        self._finalizer: Any = None
        self._loop = Loop(_LoopPort(self))
        self._bus = EventBus()
        self._observers = 0
        for callback in callbacks:
            self.observe(callback)
        self._telemetry = Telemetry(type(self).__name__) if telemetry and telemetry_available() else None
        if self._telemetry is not None:
            self._bus.subscribe(self._telemetry)

    # ------------------------------------------------------------------ subclass hooks
    def provider(self) -> Provider:
        """The model provider. Override in a subclass, or pass ``provider=``."""
        if self._provider_arg is None:
            raise AgentConfigError("the agent has no provider: pass provider=... or override provider()")
        return self._provider_arg

    def instructions(self) -> str:
        """The system prompt (toolkit guidelines are appended to it)."""
        return self._instructions_arg or ""

    def tools(self) -> list[Any]:
        """Tools, functions, toolkits, FrontendTool, ProviderTool and ToolSearch items."""
        return list(self._tools_arg or [])

    def chat_history(self) -> ChatHistory:
        """The history used when none was passed: in memory."""
        return InMemoryChatHistory()

    def tool_error_handler(self, exc: BaseException, tool: Any) -> Any:
        """A value to use as the failed call's result, or None to apply the tool's ``on_error``."""
        if self._error_handler is not None:
            return self._error_handler(exc, tool)
        return None

    # ------------------------------------------------------------------ fluent settings
    def parallel_tool_calls(self, enabled: bool = True, before_child: Callable[[], Any] | None = None,
                            after_child: Callable[[], Any] | None = None) -> Agent:
        """On: calls of a batch run at once in the fork pool, with the hooks around each call in the
        child. Off: the sequential executor. Takes effect from the next batch."""
        changed = (bool(enabled), before_child, after_child) != (self._parallel, self._before_child,
                                                                 self._after_child)
        self._parallel, self._before_child, self._after_child = bool(enabled), before_child, after_child
        if changed:
            self._close_executor()
        return self

    def tool_max_runs(self, n: int) -> Agent:
        """Runs allowed per run key per ``chat()`` (a tool's own ``max_runs`` wins)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise AgentConfigError(f"tool_max_runs must be a non-negative int, got {n!r}")
        self._max_runs = n
        return self

    def observe(self, callback: Callback) -> Agent:
        """Call ``callback(event)`` for every event (model calls, text deltas, tool calls)."""
        self._bus.subscribe(callback)
        self._observers += 1
        return self

    def add_tools(self, *items: Any) -> Agent:
        """Add tools after construction; a running worker pool gets them too (from the next batch)."""
        self._extra_tools.extend(items)
        self._toolset = None
        if self._executor is not None:
            known = self._executor.tools
            new = [t for name, t in self._get_toolset().local.items() if name not in known]
            if new:
                self._executor.add_tools(*new)
        return self

    # ------------------------------------------------------------------ state
    @property
    def history(self) -> ChatHistory:
        if self._history is None:
            self._history = self._history_arg if self._history_arg is not None else self.chat_history()
        return self._history

    @property
    def thread_id(self) -> str | None:
        return self._thread_id or getattr(self.history, "thread_id", None)

    @property
    def paused(self) -> RunPaused | None:
        """The pending ApprovalRequest / ToolResultsRequest, if the last run paused."""
        return self._paused

    @property
    def discovered_tools(self) -> list[str]:
        return sorted(self._discovered)

    @property
    def executor(self) -> Any:
        """The executor (created on first use)."""
        return self._get_executor()

    @property
    def parallel(self) -> bool:
        return self._parallel

    def _get_provider(self) -> Provider:
        if self._resolved_provider is None:
            provider = self.provider()
            if not isinstance(provider, Provider):
                raise AgentConfigError(f"provider must be a toolfork Provider, got {type(provider).__name__}")
            self._resolved_provider = provider
        return self._resolved_provider

    def _get_toolset(self) -> Toolset:
        if self._toolset is None:
            self._toolset = Toolset([*self.tools(), *self._extra_tools])
        return self._toolset

    def _model_request(self) -> ModelRequest:
        toolset = self._get_toolset()
        return ModelRequest(system=toolset.system_prompt(self.instructions()), messages=self.history.messages(),
                            tools=toolset.offered(self._discovered), provider_tools=list(toolset.provider_tools))

    def _get_executor(self) -> Any:
        if self._executor is None:
            from toolfork.executor import Executor

            kwargs: dict[str, Any] = {"mode": "auto" if self._parallel else "sequential",
                                      "timeout": self.tool_timeout}
            if self._parallel:
                kwargs.update(before_child=self._before_child, after_child=self._after_child,
                              workers=self._workers)
            kwargs.update(self._governance)
            self._executor = Executor(list(self._get_toolset().local.values()), **kwargs)
            self._finalizer = weakref.finalize(self, _close_quietly, self._executor)
        return self._executor

    def _close_executor(self) -> None:
        executor, self._executor = self._executor, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if executor is not None:
            executor.close()

    def close(self) -> None:
        """End the worker pool and the provider's HTTP clients."""
        self._close_executor()
        if self._resolved_provider is not None:
            self._resolved_provider.close()

    async def aclose(self) -> None:
        """``close()`` for async use: also closes the provider's async HTTP client."""
        self._close_executor()
        if self._resolved_provider is not None:
            await self._resolved_provider.aclose()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ public calls
    def chat(self, message: str | UserMessage) -> AssistantMessage:
        """Run until the model answers without tool calls; returns that answer (``reply.text``).
        Raises ApprovalRequest / ToolResultsRequest when the run pauses."""
        return self._finish(self._start(message))

    def stream(self, message: str | UserMessage) -> Iterator[AgentEvent]:
        """Events as they happen (``TextDelta`` pieces, tool call start / progress / end, ...),
        ending with ``RunFinished(message)``."""
        yield from self._events(self._start(message), live=True)

    async def achat(self, message: str | UserMessage) -> AssistantMessage:
        return await self._afinish(self._start(message))

    def astream(self, message: str | UserMessage) -> AsyncGenerator[AgentEvent, None]:
        """``stream`` for asyncio: ``async for event in agent.astream(message)``."""
        return self._alive(lambda: self._start(message))

    def resume(self, decisions: Mapping[str, Any]) -> AssistantMessage:
        """Answer an ApprovalRequest: ``{call_id: "approve" | "reject" | ("reject", reason)}``."""
        return self._finish(self._resume_state(decisions))

    async def aresume(self, decisions: Mapping[str, Any]) -> AssistantMessage:
        return await self._afinish(self._resume_state(decisions))

    def resume_stream(self, decisions: Mapping[str, Any]) -> Iterator[AgentEvent]:
        """``resume`` as ``stream`` does it: the resumed run's events, ending with ``RunFinished``.
        Like ``stream``, nothing happens until the first item is asked for (a bad answer raises
        ResumeError then, and the run stays paused)."""
        yield from self._events(self._resume_state(decisions), live=True)

    def aresume_stream(self, decisions: Mapping[str, Any]) -> AsyncGenerator[AgentEvent, None]:
        return self._alive(lambda: self._resume_state(decisions))

    def submit_tool_results(self, results: Mapping[str, Any]) -> AssistantMessage:
        """Answer a ToolResultsRequest: ``{call_id: {"result": value} | {"error": "message"}}``."""
        return self._finish(self._submit_state(results))

    async def asubmit_tool_results(self, results: Mapping[str, Any]) -> AssistantMessage:
        return await self._afinish(self._submit_state(results))

    def submit_tool_results_stream(self, results: Mapping[str, Any]) -> Iterator[AgentEvent]:
        """``submit_tool_results`` as a stream of the resumed run's events (see ``resume_stream``)."""
        yield from self._events(self._submit_state(results), live=True)

    def asubmit_tool_results_stream(self, results: Mapping[str, Any]) -> AsyncGenerator[AgentEvent, None]:
        return self._alive(lambda: self._submit_state(results))

    @_hybridmethod
    def resume_from(target: Any, state: str | bytes | dict[str, Any] | RunPaused, **agent_kwargs: Any) -> Agent:
        """Restore a paused run from ``to_json()`` output. On the class, builds the agent first
        (``Agent.resume_from(text, provider=..., tools=...)`` or ``MyAgent.resume_from(text)``);
        on an instance, restores into it. Then call ``resume()`` / ``submit_tool_results()``."""
        if isinstance(target, type):
            agent: Agent = target(**agent_kwargs)
        else:
            if agent_kwargs:
                raise TypeError("resume_from() on an agent instance takes no agent arguments")
            agent = target
        paused = RunPaused.from_json(state.payload if isinstance(state, RunPaused) else state)
        agent._restore(paused)
        return agent

    # ------------------------------------------------------------------ run setup
    def _start(self, message: str | UserMessage) -> Callable[[], LoopGen]:
        user = as_user_message(message)

        def begin() -> LoopGen:
            # Refuse unsupported provider tools before the user message is stored.
            self._get_provider().check_request(
                ModelRequest("", [], [], list(self._get_toolset().provider_tools)))
            self._paused = None
            self.history.extend([user])
            return self._loop.run(RunState(counter=RunCounter(self._max_runs)))

        return begin

    def _restore(self, paused: RunPaused) -> None:
        toolset = self._get_toolset()
        known = set(toolset.local) | set(toolset.frontend) | set(toolset.searches)
        for slot in paused.payload["run"]["pending"]["slots"]:
            name = slot["call"]["name"]
            if slot["kind"] in (RUN, APPROVAL, *SUPPLIED) and slot.get("item") is None and name not in known:
                raise ResumeError(f"the paused run waits on a call of tool '{name}', which this agent does not "
                                  f"have (its tools: {', '.join(sorted(known)) or 'none'})")
        history = paused.history()
        if history is not None and not self.history.persistent:
            self.history.replace(history)
        self._discovered = set(paused.payload.get("discovered") or [])
        self._paused = paused

    def _take_paused(self, kind: type[RunPaused], answer: str, given: Iterable[str] = ()
                     ) -> tuple[RunPaused, RunState]:
        paused = self._paused
        if paused is None:
            answered = sorted(set(given) & self._last_answered)
            if answered:
                raise ResumeError(f"call(s) {', '.join(answered)} were answered already; a second submission "
                                  "is refused (the run has moved on)")
        if paused is None or not isinstance(paused, kind):
            what = "approval" if kind is ApprovalRequest else "frontend tool results"
            now = f" (it waits for {type(paused).__name__})" if paused is not None else ""
            raise ResumeError(f"no run is paused waiting for {what}{now}; nothing to {answer}")
        state = RunState.from_dict(paused.payload["run"])
        assert state.pending is not None
        self._check_not_answered(state)
        return paused, state

    def _check_not_answered(self, state: RunState) -> None:
        """A paused state answered before (e.g. the same JSON resumed twice over a persistent
        history) must not add a second set of results for the same calls: the paused turn is
        already in the history then (turns carry a unique id)."""
        assert state.pending is not None
        turn = state.pending.assistant.id
        if turn is None:
            return
        if any(isinstance(m, AssistantMessage) and m.id == turn for m in self.history.messages()):
            self._paused = None
            ids = ", ".join(s.call.id for s in state.pending.slots)
            raise ResumeError(f"the paused turn (calls {ids}) is already in the history with its results: "
                              "this paused run was resumed before; the second answer is refused")

    @staticmethod
    def _check_ids(given: Mapping[str, Any], waiting: list[str], what: str) -> None:
        if not isinstance(given, Mapping):
            raise ResumeError(f"{what} must be a dict keyed by call id, got {type(given).__name__}")
        unknown = [k for k in given if k not in waiting]
        if unknown:
            raise ResumeError(f"unknown call id(s) in {what}: {', '.join(map(str, unknown))}; "
                              f"the run waits on: {', '.join(waiting)}")
        missing = [k for k in waiting if k not in given]
        if missing:
            raise ResumeError(f"{what} lack call id(s): {', '.join(missing)} (every waiting call needs an answer)")

    def _resume_state(self, decisions: Mapping[str, Any]) -> Callable[[], LoopGen]:
        _, state = self._take_paused(ApprovalRequest, "approve", _keys(decisions))
        assert state.pending is not None
        waiting = state.pending.waiting(APPROVAL)
        self._check_ids(decisions, [s.call.id for s in waiting], "approval decisions")
        parsed = {s.call.id: _parse_decision(s.call.id, decisions[s.call.id]) for s in waiting}
        gate = self._loop.gate(state)
        for slot in waiting:
            approved, reason = parsed[slot.call.id]
            if approved:
                gate.after_approval(slot)  # to the executor, the client, a person, or answered by a hook
            else:
                state.counter.release(slot.run_key or "")
                why = "the user rejected this call" + (f": {reason}" if reason else "")
                not_executed(slot, why, status="rejected")
        self._paused = None
        self._last_answered = {s.call.id for s in waiting}
        return lambda: self._loop.run(state)

    def _submit_state(self, results: Mapping[str, Any]) -> Callable[[], LoopGen]:
        _, state = self._take_paused(ToolResultsRequest, "submit", _keys(results))
        assert state.pending is not None
        waiting = state.pending.waiting(*SUPPLIED)
        self._check_ids(results, [s.call.id for s in waiting], "tool results")
        toolset = self._get_toolset()
        outputs: dict[str, ToolResultItem] = {}
        for slot in waiting:
            tool = toolset.frontend.get(slot.call.name) or toolset.local.get(slot.call.name)
            output, status = _parse_submission(slot.call.id, results[slot.call.id], tool)
            own = getattr(tool, "max_output_chars", None)
            output = limit_output(output, own if own is not None else self.max_output_chars)
            outputs[slot.call.id] = ToolResultItem(slot.call.id, slot.call.name, output, status)
        for slot in waiting:
            slot.item = outputs[slot.call.id]
            slot.kind = "done"
        self._paused = None
        self._last_answered = {s.call.id for s in waiting}
        return lambda: self._loop.run(state)

    # ------------------------------------------------------------------ drivers
    def _finish(self, begin: Callable[[], LoopGen]) -> AssistantMessage:
        for event in self._events(begin, live=self._observers > 0):
            if isinstance(event, RunFinished):
                return event.message
        raise AssertionError("the run ended without a final message")  # pragma: no cover

    async def _afinish(self, begin: Callable[[], LoopGen]) -> AssistantMessage:
        final: AssistantMessage | None = None
        async for event in self._aevents(begin, live=self._observers > 0):
            if isinstance(event, RunFinished):
                final = event.message
        assert final is not None
        return final

    async def _alive(self, prepare: Callable[[], Callable[[], LoopGen]]) -> AsyncGenerator[AgentEvent, None]:
        """The public async streams. ``prepare`` runs on the first ``__anext__``, as the sync
        generators do it. ``async for`` does not close what it iterates when the consumer leaves
        early (``yield from`` does, in the sync twin), hence ``aclosing``: closing the driver is what
        cancels a running batch and stores the interrupted turn at once, not at garbage collection."""
        async with contextlib.aclosing(self._aevents(prepare(), live=True)) as events:
            async for event in events:
                yield event

    def _publish(self, event: AgentEvent) -> AgentEvent:
        self._bus.publish(event)
        return event

    @contextlib.contextmanager
    def _run_span(self) -> Iterator[Provider]:
        """The run's telemetry span around a driver; a pause ends it without an error."""
        provider = self._get_provider()
        if self._telemetry is not None:
            self._telemetry.start_run(provider.name, provider.model)
        error: BaseException | None = None
        try:
            yield provider
        except BaseException as exc:
            error = exc
            raise
        finally:
            if self._telemetry is not None:
                self._telemetry.end_run(None if isinstance(error, RunPaused) else error)

    def _events(self, begin: Callable[[], LoopGen], live: bool) -> Iterator[AgentEvent]:
        """The sync driver. ``live``: stream the model's text and the executor's events."""
        with self._run_span() as provider:
            gen = begin()
            send: Any = None
            throw: BaseException | None = None
            while True:
                try:
                    op = gen.throw(throw) if throw is not None else gen.send(send)
                except StopIteration as stop:
                    yield self._publish(RunFinished(stop.value))
                    return
                send, throw = None, None
                try:
                    if isinstance(op, Emit):
                        yield self._publish(op.event)
                    elif isinstance(op, CallModel):
                        if live:
                            message: AssistantMessage | None = None
                            for item in provider.stream(op.request):
                                if isinstance(item, str):
                                    yield self._publish(TextDelta(item))
                                else:
                                    message = item
                            send = message
                        else:
                            send = provider.complete(op.request)
                    elif isinstance(op, Execute):
                        send = yield from self._execute(op, live)
                except GeneratorExit:
                    gen.close()
                    raise
                except BaseException as exc:
                    throw = exc

    def _prepare_batch(self, op: Execute, preemptible: bool) -> tuple[Any, _Batch]:
        """The executor and the batch's bookkeeping; the agent's identity goes into the executor's
        context for the calls' runtimes, and timeouts that cannot be enforced here are lifted (see
        ``timeouts.py``)."""
        executor = self._get_executor()
        lifted = lift_unenforceable(op.calls, executor.tools, executor.capabilities, self.tool_timeout,
                                    preemptible)
        if op.meta is not None:
            executor.context[AGENT_CONTEXT_KEY] = op.meta
        if self._telemetry is not None:
            self._telemetry.hand_over(op.calls)  # their spans: the executor's, under the run's span
        return executor, _Batch(op.calls, lifted)

    @staticmethod
    def _end_batch(executor: Any) -> None:
        executor.context.pop(AGENT_CONTEXT_KEY, None)
        executor.context.pop(NEXT_TURN_KEY, None)  # the loop took it from the results

    def _execute(self, op: Execute, live: bool) -> Generator[AgentEvent, None, list[ToolResult]]:
        executor, batch = self._prepare_batch(op, can_preempt_in_host())
        try:
            if not live:
                results: list[ToolResult] = [batch.checked(r) for r in executor.run(op.calls)]
                for result in results:
                    self._publish(_finished(result, batch.args))
                return results
            stream = executor.stream(op.calls)
            try:
                for event in stream:
                    yield self._publish(batch.event(event))
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
            return batch.results()
        finally:
            self._end_batch(executor)

    async def _aevents(self, begin: Callable[[], LoopGen], live: bool) -> AsyncGenerator[AgentEvent, None]:
        """The async driver: the provider's async client; batches through ``executor.astream`` when
        live (events as they happen, like the sync driver), else ``executor.arun``."""
        with self._run_span() as provider:
            gen = begin()
            send: Any = None
            throw: BaseException | None = None
            while True:
                try:
                    op = gen.throw(throw) if throw is not None else gen.send(send)
                except StopIteration as stop:
                    yield self._publish(RunFinished(stop.value))
                    return
                send, throw = None, None
                try:
                    if isinstance(op, Emit):
                        yield self._publish(op.event)
                    elif isinstance(op, CallModel):
                        if live:
                            message: AssistantMessage | None = None
                            async for item in provider.astream(op.request):
                                if isinstance(item, str):
                                    yield self._publish(TextDelta(item))
                                else:
                                    message = item
                            send = message
                        else:
                            send = await provider.acomplete(op.request)
                    elif isinstance(op, Execute):
                        # Async batches run in a thread of their own: never the main thread.
                        executor, batch = self._prepare_batch(op, preemptible=False)
                        try:
                            if live:
                                # Leaving early (aclose, cancellation) closes the stream, which cancels
                                # the calls still running, as closing the sync stream does.
                                async with contextlib.aclosing(executor.astream(op.calls)) as events:
                                    async for event in events:
                                        yield self._publish(batch.event(event))
                                send = batch.results()
                            else:
                                send = [batch.checked(r) for r in await executor.arun(op.calls)]
                                for result in send:
                                    self._publish(_finished(result, batch.args))
                        finally:
                            self._end_batch(executor)
                except GeneratorExit:
                    gen.close()
                    raise
                except BaseException as exc:
                    throw = exc


class _Batch:
    """One batch's executor events as agent events, with its results collected for the loop: the
    sync and async drivers translate them the same way."""

    def __init__(self, calls: list[ToolCall], lifted: Mapping[str, float] | None = None) -> None:
        self.calls = calls
        self.args = {c.id: c.arguments for c in calls}
        self.names = {c.id: c.name for c in calls}
        self.finished: dict[str, ToolResult] = {}
        self.lifted = lifted or {}

    def checked(self, result: ToolResult) -> ToolResult:
        """The result, with a note when it overran a timeout that could not be enforced."""
        return note_overrun(result, self.lifted.get(result.call_id)) if self.lifted else result

    def event(self, event: Event) -> AgentEvent:
        if isinstance(event, CallStarted):
            return ToolCallStarted(event.call_id, event.name, dict(self.args.get(event.call_id) or {}))
        if isinstance(event, CallProgress):
            return ToolCallProgress(event.call_id, self.names.get(event.call_id, ""), event.value)
        result = self.checked(event.result)
        self.finished[event.call_id] = result
        return _finished(result, self.args)

    def results(self) -> list[ToolResult]:
        """In call order, whatever order they finished in (the loop checks none is missing)."""
        return [self.finished[c.id] for c in self.calls if c.id in self.finished]


def _finished(result: ToolResult, args: Mapping[str, Any]) -> ToolCallFinished:
    return ToolCallFinished(result.call_id, result.name, result.status, result.output, result.duration_s,
                            None if result.error is None else str(result.error),
                            dict(args.get(result.call_id) or {}))


def _keys(value: Any) -> list[str]:
    return [str(k) for k in value] if isinstance(value, Mapping) else []


def _parse_decision(call_id: str, value: Any) -> tuple[bool, str | None]:
    if value is True or (isinstance(value, str) and value.lower() in _APPROVE):
        return True, None
    if value is False or (isinstance(value, str) and value.lower() in _REJECT):
        return False, None
    if isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], str) \
            and value[0].lower() in _REJECT:
        return False, str(value[1]) if value[1] is not None else None
    raise ResumeError(f"decision for call {call_id} must be 'approve', 'reject' or ('reject', reason), "
                      f"got {describe(value)}")


def _parse_submission(call_id: str, value: Any, tool: Any = None) -> tuple[ToolOutput, str]:
    """A submitted result as the model will see it. A Tool's ``on_response_received`` checks or
    transforms the value first, then its ``output_model`` checks it; either refusing raises
    ResumeError naming the call (the run stays paused: submit again, or submit ``{"error": ...}``)."""
    if not isinstance(value, Mapping) or len(value) != 1 or next(iter(value)) not in ("result", "error"):
        raise ResumeError(f"the result for call {call_id} must be {{'result': value}} or {{'error': 'message'}}, "
                          f"got {describe(value)}")
    if "error" in value:
        return error_output(str(value["error"])), "error"
    result = value["result"]
    name = getattr(tool, "name", "?")
    hook = getattr(tool, "on_response_received", None)
    if hook is not None:
        try:
            result = hook(result)
        except Exception as exc:
            raise ResumeError(f"the result for call {call_id} ({name}) was refused by on_response_received: "
                              f"{type(exc).__name__}: {exc}") from exc
    try:
        return supplied_output(tool, result), "ok"
    except Exception as exc:
        raise ResumeError(f"the result for call {call_id} ({name}) does not fit the tool's output: {exc}") from exc


__all__ = ["DEFAULT_MAX_OUTPUT_CHARS", "DEFAULT_MAX_STEPS", "Agent"]
