"""The frameworks' own loops, driven without a network: scripted models for LangGraph (LangChain's
fake chat model), pydantic-ai (``FunctionModel``) and the OpenAI Agents SDK (a ``Model`` subclass)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Calls = Sequence[tuple[str, dict[str, Any]]]


def chat_model(calls: Calls, then: Calls = ()) -> Any:
    """LangChain's fake chat model (with a ``bind_tools`` that records the tools): one AIMessage asking
    for ``calls`` (then one for ``then``, if given), then "done"."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    class Scripted(GenericFakeChatModel):
        bound: list[Any] = []

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:  # the fake has none: record and go on
            self.bound = list(tools)
            return self

    turns = [calls, then] if then else [calls]
    replies = [AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": f"t{k}c{i}", "type": "tool_call"}
                                                  for i, (n, a) in enumerate(turn)])
               for k, turn in enumerate(turns)]
    return Scripted(messages=iter([*replies, AIMessage(content="done")]))


def langgraph_graph(node: Any, calls: Calls, then: Calls = ()) -> Any:
    """A compiled StateGraph: agent -> tools_condition -> ``node`` -> agent, whose scripted model asks
    for ``calls`` in one AIMessage (then ``then``, if given), then answers "done"."""
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import tools_condition

    model = chat_model(calls, then)
    model.bind_tools(list(node.tools_by_name.values()))

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", node)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    graph = g.compile()
    graph.model = model  # type: ignore[attr-defined]
    return graph


def tool_messages(out: dict[str, Any]) -> list[Any]:
    from langchain_core.messages import ToolMessage

    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def pydantic_ai_model(calls: Calls, then: Calls = ()) -> tuple[Any, list[list[Any]]]:
    """A ``FunctionModel`` that asks for ``calls`` (then ``then``), then answers "done"; the second
    value collects the parts of every request the model received after the first."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    turns = [t for t in (calls, then) if t]
    seen: list[list[Any]] = []

    def respond(messages: list[Any], info: Any) -> Any:
        requests = (len(messages) + 1) // 2
        if requests > 1:
            seen.append(list(messages[-1].parts))
        if requests <= len(turns):
            k = requests - 1
            return ModelResponse(parts=[ToolCallPart(n, a, tool_call_id=f"t{k}c{i}")
                                        for i, (n, a) in enumerate(turns[k])])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond), seen


def returned(parts: list[Any]) -> dict[str, Any]:
    """tool_call_id -> what the tool returned, from one request's parts (tool returns and retries)."""
    return {p.tool_call_id: p.content for p in parts if hasattr(p, "tool_call_id")}


def retried(part: Any) -> bool:
    """pydantic-ai's retry feedback: a RetryPromptPart (older) or a return marked as retried (newer)."""
    return type(part).__name__ == "RetryPromptPart" or getattr(part, "outcome", None) == "retried"


def openai_agents_model(calls: Calls) -> Any:
    """An Agents SDK ``Model`` asking for ``calls`` in one response, then answering with the JSON list
    of the function outputs it was given; ``inputs`` keeps what it received."""
    import json

    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class Scripted(Model):
        def __init__(self) -> None:
            self.inputs: list[Any] = []
            self.tools: list[Any] = []

        async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any,
                               output_schema: Any, handoffs: Any, tracing: Any, *args: Any, **kwargs: Any) -> Any:
            self.inputs.append(input)
            self.tools = list(tools)
            if len(self.inputs) == 1:
                output: list[Any] = [
                    ResponseFunctionToolCall(type="function_call", call_id=f"c{i}", name=n,
                                             arguments=json.dumps(a), id=f"fc{i}")
                    for i, (n, a) in enumerate(calls)]
            else:
                outs = {i["call_id"]: i["output"] for i in input
                        if isinstance(i, dict) and i.get("type") == "function_call_output"}
                output = [ResponseOutputMessage(id="m", type="message", role="assistant", status="completed",
                                                content=[ResponseOutputText(type="output_text", annotations=[],
                                                                            text=json.dumps(outs))])]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the tests run the SDK without streaming")

    return Scripted()
