"""Models for trying and testing an agent without an API key: ``TestModel`` and ``FunctionModel``
(``toolfork chat --provider test`` uses ``TestModel``). See docs/agent.md, "Without a key"."""

from toolfork.testing.arguments import arguments_for
from toolfork.testing.models import FunctionModel, TestModel, ToolInfo, call

__all__ = ["FunctionModel", "TestModel", "ToolInfo", "arguments_for", "call"]
