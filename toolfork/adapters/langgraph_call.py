"""One LangGraph tool call carried into a worker and its outcome carried back.

``ToolNode`` hands a tool its call (arguments with the injected state, store, tool call id and
``ToolRuntime`` merged in) and a ``RunnableConfig`` whose ``configurable`` holds the running graph's
machinery: the task's interrupt bookkeeping (``interrupt()`` reads it), the stream writer
(``get_stream_writer()``), the store, the checkpointer (a graph the tool runs uses it). ``pack`` makes
both portable: every value that pickles travels with the call; the store and checkpointer become
proxies of their own class (``RemoteStore``, ``RemoteSaver``: LangGraph checks the type), any other
host object a ``RemoteObject`` (``relay.py``); the host's callbacks stay in the host. In the worker,
``GraphToolCall`` runs the real tool's ``invoke`` (or ``ainvoke``) with them, so the tool's own
validation, ``handle_tool_error``, content blocks, ``ToolMessage`` and ``Command`` returns all happen
as in the host, and returns what came out, or the exception it raised, as bytes (``outcome``).

Relies on two names of LangGraph's: ``BaseStore`` and ``BaseCheckpointSaver`` (public), and the
``ToolRuntime`` dataclass; the ``configurable`` keys are carried whatever their names.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import inspect
import pickle
import types
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.prebuilt import ToolRuntime
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import Command

from toolfork.adapters._common import carry_exception, rebuild_exception
from toolfork.adapters.host_state import host_containers, mirrored, pickles
from toolfork.adapters.relay import CallObjects, Ref, RemoteObject
from toolfork.tools.output import ToolOutput

# Config keys that stay in the host: LangChain's callback managers (the host's tracing and streaming of
# this call; the worker's run has none).
_HOST_ONLY_KEYS = frozenset({"callbacks"})


# ----------------------------------------------------------------------------- proxies in the worker

class RemoteStore(BaseStore):
    """The graph's store, in a worker: every batch of operations is done by the host's store."""

    def __init__(self, ref: Ref) -> None:
        self._ref = ref

    def batch(self, ops: Any) -> list[Any]:
        return self._ref.call("batch", list(ops))  # type: ignore[no-any-return]

    async def abatch(self, ops: Any) -> list[Any]:
        return await self._ref.acall("batch", list(ops))  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (RemoteStore, (self._ref,))


class RemoteSaver(BaseCheckpointSaver):  # type: ignore[type-arg]
    """The graph's checkpointer, in a worker (a graph the tool runs as a subgraph saves through it)."""

    def __init__(self, ref: Ref) -> None:
        super().__init__()
        self._ref = ref

    def __reduce__(self) -> tuple[Any, ...]:
        return (RemoteSaver, (self._ref,))

    def get_tuple(self, config: Any) -> Any:
        return self._ref.call("get_tuple", config)

    def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
        return iter(self._ref.call("list", config, **kwargs))

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return self._ref.call("put", config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self._ref.call("put_writes", config, list(writes), task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self._ref.call("delete_thread", thread_id)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self._ref.call("get_next_version", current, channel)

    async def aget_tuple(self, config: Any) -> Any:
        return await self._ref.acall("get_tuple", config)

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        for item in await self._ref.acall("list", config, **kwargs):
            yield item

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return await self._ref.acall("put", config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        await self._ref.acall("put_writes", config, list(writes), task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._ref.acall("delete_thread", thread_id)


@dataclasses.dataclass(frozen=True)
class _NodeTools:
    """``ToolRuntime.tools`` on the way to the worker: the names; the worker has the tools (by fork)."""

    names: tuple[str, ...]


# ----------------------------------------------------------------------------- host: packing

def _bound(value: Any) -> bool:
    """A callable that carries state of its own (a partial, a bound method, a callable object): even
    when it pickles, the copy would change the worker's state, not the host's (LangGraph's task
    writer appends to the host task's list). Plain functions and classes travel by name."""
    if not callable(value) or isinstance(value, (type, BaseTool)) or inspect.isfunction(value):
        return False
    # A builtin function of a module travels by name; a builtin method (``deque.extend``) is bound.
    return not (inspect.isbuiltin(value) and isinstance(getattr(value, "__self__", None), types.ModuleType))


def portable(value: Any, session: CallObjects) -> Any:
    """``value`` as it can travel: itself when it pickles, else a proxy of the host object (plain
    containers and LangGraph's runtimes item by item, so one host object does not turn the rest into
    proxies; any other object whole, so the worker's changes to it reach the host's)."""
    if isinstance(value, BaseStore):
        return RemoteStore(session.ref(value))
    if isinstance(value, BaseCheckpointSaver):
        return RemoteSaver(session.ref(value))
    if isinstance(value, ToolRuntime):
        tools = getattr(value, "tools", None)
        fields = {f.name: portable(getattr(value, f.name), session)
                  for f in dataclasses.fields(value) if f.name not in ("tools", "config")}
        fields["config"] = portable_config(value.config, session)
        if tools is not None:
            fields["tools"] = _NodeTools(tuple(t.name for t in tools))
        return dataclasses.replace(value, **fields)
    if _bound(value):
        return RemoteObject(session.ref(value))
    if pickles(value):
        return value
    if type(value) is dict:
        return {k: portable(v, session) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(portable(v, session) for v in value)
    if isinstance(value, Runtime):  # a bundle of host objects and values: each as it can travel
        copy = dataclasses.replace(value, **{f.name: portable(getattr(value, f.name), session)
                                             for f in dataclasses.fields(value) if f.init})
        if pickles(copy):
            return copy
    return RemoteObject(session.ref(value))


def portable_config(config: Mapping[str, Any] | None, session: CallObjects) -> dict[str, Any]:
    """The ``RunnableConfig`` the worker's call runs with (see the module docstring)."""
    out: dict[str, Any] = {}
    for key, value in (config or {}).items():
        if key in _HOST_ONLY_KEYS:
            continue
        out[key] = portable(value, session)
    return out


def _functions(lc_tool: BaseTool) -> list[tuple[str, Any]]:
    """The tool's own functions: ``func`` and ``coroutine`` (their closed-over containers are the host's,
    ``host_state.py``)."""
    return [(attr, fn) for attr in ("func", "coroutine") if (fn := getattr(lc_tool, attr, None)) is not None]


def pack(call_args: Any, config: Any, session: CallObjects, *, is_async: bool, lc_tool: BaseTool) -> str:
    """The one argument the worker's ``GraphToolCall`` takes: the call and its config, pickled."""
    payload = (portable(call_args, session), portable_config(config, session), is_async,
               host_containers(_functions(lc_tool), session))
    return base64.b64encode(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")


def outcome(output: ToolOutput | None) -> Any:
    """What the worker's tool returned; raises what it raised (rebuilt: the tool's own type)."""
    if output is None or not isinstance(output.data, dict) or "toolfork_langgraph" not in output.data:
        raise RuntimeError("the worker's answer to a LangGraph tool call is not one (a hook replaced it?)")
    kind, body = output.data["toolfork_langgraph"]
    if kind == "raised":
        raise rebuild_exception(body)
    return _parent_by_identity(pickle.loads(body))


def _parent_by_identity(value: Any) -> Any:
    """``Command.PARENT`` as the very object (the stock node compares ``graph is Command.PARENT``; an
    unpickled string is equal, not the same)."""
    if isinstance(value, Command) and value.graph == Command.PARENT and value.graph is not Command.PARENT:
        return dataclasses.replace(value, graph=Command.PARENT)
    if type(value) is list:
        return [_parent_by_identity(v) for v in value]
    return value


# ----------------------------------------------------------------------------- worker: the call

class GraphToolCall:
    """The callable of the pool tool behind one LangGraph tool: runs in the worker, calls the tool there
    (inherited by fork) with the call and config ``pack`` made."""

    def __init__(self, lc_tool: BaseTool, node_tools: Mapping[str, BaseTool]) -> None:
        self.lc_tool = lc_tool
        self.node_tools = node_tools

    def __call__(self, payload: str) -> ToolOutput:
        try:
            call_args, config, is_async, mirrors = pickle.loads(base64.b64decode(payload))
            call_args = self._with_tools(call_args)
            config = self._with_tools(config)
            with mirrored(mirrors, lambda attr: getattr(self.lc_tool, attr)):  # then the worker's own again
                if is_async:
                    value = asyncio.run(self.lc_tool.ainvoke(call_args, config))
                else:
                    value = self.lc_tool.invoke(call_args, config)
            try:
                body = ("value", pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
            except Exception as exc:
                raise TypeError(f"tool '{self.lc_tool.name}' returned a {type(value).__name__}, which cannot "
                                f"be sent back from the worker process ({type(exc).__name__}: {exc}); return "
                                "a value that pickles") from None
        except Exception as exc:
            body = ("raised", carry_exception(exc))
        return ToolOutput(content=[], data={"toolfork_langgraph": body})

    def _with_tools(self, value: Any) -> Any:
        """Put the node's tools back where ``pack`` left their names (in a ``ToolRuntime``)."""
        if isinstance(value, ToolRuntime):
            if isinstance(value.tools, _NodeTools):
                tools = [self.node_tools[n] for n in value.tools.names if n in self.node_tools]
                value = dataclasses.replace(value, tools=tools)
            return value
        if type(value) is dict:
            return {k: self._with_tools(v) for k, v in value.items()}
        if type(value) in (list, tuple):
            return type(value)(self._with_tools(v) for v in value)
        return value


__all__ = ["GraphToolCall", "RemoteSaver", "RemoteStore", "outcome", "pack", "portable", "portable_config"]

