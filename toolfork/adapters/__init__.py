"""Other agent frameworks' loops, toolfork's pool: each module adapts one framework's tools to an
``Executor`` and imports that framework only when it is itself imported.

- ``toolfork.adapters.langgraph``: ``ToolforkToolNode``, a drop-in for ``langgraph.prebuilt.ToolNode``
  (extra ``[langgraph]``).
- ``toolfork.adapters.langchain``: ``to_langchain`` / ``from_langchain`` (extra ``[langgraph]``, which
  brings ``langchain-core``).
- ``toolfork.adapters.pydantic_ai``: ``ToolforkFunctionToolset`` (pydantic-ai's ``FunctionToolset``, the
  functions in the pool) and ``ToolforkToolset`` (toolfork tools) (extra ``[pydantic-ai]``).
- ``toolfork.adapters.openai_agents``: ``function_tool`` (the SDK's decorator, the function in the pool)
  and ``function_tools`` (toolfork tools) (extra ``[openai-agents]``).
- ``toolfork.adapters.callables``: how those two send a framework's validated call of a plain Python
  function to a worker and bring its value or exception back (no framework imported).

See docs/adapters.md.
"""

__all__: list[str] = []
