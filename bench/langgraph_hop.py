"""Cost of the worker hop for a trivial LangGraph tool: stock ``ToolNode`` against ``ToolforkToolNode``.

A one-node graph (no model) whose input asks for one tool call, run N times per round, the two nodes
interleaved in one process, median of 3 rounds. ``echo`` returns its argument; ``count`` reads the
injected state. Usage: PYTHONPATH=. python bench/langgraph_hop.py [N]. See bench/results/adapters.md,
"Cost of the worker hop".
"""
import statistics
import sys
import time
from typing import Annotated

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolNode

from toolfork.adapters.langgraph import ToolforkToolNode


@tool
def echo(x: int) -> int:
    """Return x."""
    return x


@tool
def count(x: int, state: Annotated[dict, InjectedState]) -> int:
    """Count the state's messages, plus x."""
    return len(state["messages"]) + x


def per_run(node, name: str, n: int) -> float:
    graph = StateGraph(MessagesState).add_node("tools", node).add_edge(START, "tools").compile()
    given = {"messages": [AIMessage("", tool_calls=[{"name": name, "args": {"x": 1}, "id": "c"}])]}
    graph.invoke(given)  # warm
    start = time.perf_counter()
    for _ in range(n):
        graph.invoke(given)
    return (time.perf_counter() - start) / n


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with ToolforkToolNode([echo, count], workers=1) as ours:
        for name in ("echo", "count"):
            rounds = [(per_run(ToolNode([echo, count]), name, n), per_run(ours, name, n)) for _ in range(3)]
            stock = statistics.median(s for s, _ in rounds)
            fork = statistics.median(o for _, o in rounds)
            print(f"{name}: stock {stock * 1e3:.2f} ms, toolfork {fork * 1e3:.2f} ms per run, "
                  f"ratio {fork / stock:.2f}x")


if __name__ == "__main__":
    main()
