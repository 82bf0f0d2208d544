"""Models for trying and testing an agent without a key or a network: ``TestModel`` (scripted, or calling
every tool once) and ``FunctionModel`` (your function plays the model). Both are ``Provider``s, so they
go where ``Anthropic(...)`` goes, and both are deterministic.

    Agent.chat(msg) -> loop -> ModelRequest(messages, tools) -> TestModel / FunctionModel.complete
                                                                  |  script turn, or every tool once,
                                                                  |  or fn(messages, tools)
                            AssistantMessage(text | tool_calls) <-+
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolfork.agent.errors import ProviderError
from toolfork.agent.messages import AssistantMessage, Message, ToolCallRequest, ToolResultMessage
from toolfork.agent.providers.base import ModelRequest, Provider
from toolfork.agent.special_tools import FrontendTool
from toolfork.testing.arguments import arguments_for

Turn = str | Sequence[ToolCallRequest] | AssistantMessage


@dataclass(frozen=True)
class ToolInfo:
    """A tool as the model is shown it: its name, description and JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)


def call(name: str, /, **arguments: Any) -> ToolCallRequest:
    """A tool call for a script or a function model: ``call("add", a=2, b=3)``. Its id is given when the
    model sends it (``call-1``, ``call-2``, ... per model)."""
    return ToolCallRequest(id="", name=name, arguments=arguments)


def tool_infos(tools: Iterable[Any]) -> list[ToolInfo]:
    infos = []
    for tool in tools:
        spec = tool.to_anthropic()
        infos.append(ToolInfo(spec["name"], spec.get("description", ""), dict(spec.get("input_schema") or {})))
    return infos


class _LocalModel(Provider):
    """Numbering of call ids and the conversion of a turn to an ``AssistantMessage``."""

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self._calls = 0

    def _message(self, turn: Any) -> AssistantMessage:
        if isinstance(turn, str):
            return AssistantMessage(text=turn, stop_reason="end_turn", model=self.model)
        if isinstance(turn, AssistantMessage):
            message = turn
        elif isinstance(turn, (list, tuple)) and all(isinstance(c, ToolCallRequest) for c in turn):
            message = AssistantMessage(tool_calls=list(turn), stop_reason="tool_use")
        else:
            raise ProviderError(self.name, f"a turn must be a str (the answer), a list of call(...) or an "
                                           f"AssistantMessage, got {type(turn).__name__}: {turn!r}")
        calls = []
        for c in message.tool_calls:
            if not c.id:
                self._calls += 1
                c = ToolCallRequest(f"call-{self._calls}", c.name, dict(c.arguments), c.invalid_arguments)
            calls.append(c)
        return AssistantMessage(text=message.text, tool_calls=calls, model=self.model,
                                stop_reason=message.stop_reason or ("tool_use" if calls else "end_turn"))


class TestModel(_LocalModel):
    """A model that needs no key. ``TestModel()`` calls every tool it is given once, with arguments made up
    from each tool's JSON Schema, then answers with the results as JSON (``{"add": "2"}``).
    ``call_tools=["add"]`` limits the calls to those tools, ``text="Done."`` sets the answer.
    ``TestModel(turns=[[call("add", a=2, b=3)], "5."])`` plays a script instead: one turn per model call,
    each a list of tool calls or the answer text (an ``AssistantMessage`` also works)."""

    __test__ = False  # not a pytest test class, whatever module imports it
    name = "test"

    def __init__(self, turns: Sequence[Turn] | None = None, *, call_tools: str | Sequence[str] = "all",
                 text: str | None = None, model: str = "test") -> None:
        super().__init__(model)
        if isinstance(call_tools, str) and call_tools != "all":
            raise ValueError(f"call_tools must be 'all' or a list of tool names, got {call_tools!r}")
        self.turns = list(turns) if turns is not None else None
        self.call_tools = call_tools
        self.text = text
        self._next_turn = 0

    def complete(self, request: ModelRequest) -> AssistantMessage:
        if self.turns is not None:
            return self._scripted()
        last = request.messages[-1] if request.messages else None
        if isinstance(last, ToolResultMessage):
            return self._message(self.text if self.text is not None else _summary(last))
        calls = [call(t.name, **arguments_for(t.parameters)) for t in self._callable(request.tools)]
        return self._message(calls or (self.text if self.text is not None else "success (no tool calls)"))

    def _scripted(self) -> AssistantMessage:
        assert self.turns is not None
        if self._next_turn >= len(self.turns):
            raise ProviderError(self.name, f"the script has {len(self.turns)} turn(s) and the agent asked for "
                                           f"turn {self._next_turn + 1}")
        turn = self.turns[self._next_turn]
        self._next_turn += 1
        return self._message(turn)

    def _callable(self, tools: Sequence[Any]) -> list[ToolInfo]:
        local = [t for t in tools if not isinstance(t, FrontendTool)]  # the client answers those, not a tool
        infos = tool_infos(local)
        if self.call_tools == "all":
            return infos
        known = {i.name for i in infos}
        unknown = [n for n in self.call_tools if n not in known]
        if unknown:
            raise ProviderError(self.name, f"call_tools names {unknown}, which the agent does not offer; "
                                           f"it offers {sorted(known)}")
        return [i for i in infos if i.name in self.call_tools]


def _summary(results: ToolResultMessage) -> str:
    return json.dumps({r.name: r.output.as_text() for r in results.results}, ensure_ascii=False)


ModelFunction = Callable[[list[Message], list[ToolInfo]], Any]


class FunctionModel(_LocalModel):
    """A model played by ``fn(messages, tools)``: it gets the conversation so far (``UserMessage``,
    ``AssistantMessage``, ``ToolResultMessage``) and the tools on offer (``ToolInfo``), and returns the
    answer text, a list of ``call(...)``, or an ``AssistantMessage``."""

    name = "function"

    def __init__(self, fn: ModelFunction, *, model: str = "function") -> None:
        if not callable(fn):
            raise TypeError(f"FunctionModel takes a function (messages, tools) -> turn, got {type(fn).__name__}")
        super().__init__(model)
        self.fn = fn

    def complete(self, request: ModelRequest) -> AssistantMessage:
        return self._message(self.fn(list(request.messages), tool_infos(request.tools)))


__all__ = ["FunctionModel", "ModelFunction", "TestModel", "ToolInfo", "Turn", "call", "tool_infos"]
