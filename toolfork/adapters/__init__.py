"""Other agent frameworks' loops, toolfork's pool: each module adapts one framework's tools to an
``Executor`` and imports that framework only when it is itself imported.

- ``toolfork.adapters.langgraph``: ``ToolforkToolNode``, a drop-in for ``langgraph.prebuilt.ToolNode``
  (extra ``[langgraph]``).
- ``toolfork.adapters.langchain``: ``to_langchain`` / ``from_langchain`` (extra ``[langgraph]``, which
  brings ``langchain-core``).
- ``toolfork.adapters.pydantic_ai``: ``ToolforkToolset`` (extra ``[pydantic-ai]``).
- ``toolfork.adapters.openai_agents``: ``function_tools`` (extra ``[openai-agents]``).

See docs/adapters.md.
"""

__all__: list[str] = []
