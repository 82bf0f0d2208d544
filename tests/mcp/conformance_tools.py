"""The tools the MCP conformance suite's server scenarios call, as toolfork tools (for
``toolfork mcp serve --tools tests/mcp/conformance_tools.py``): each does what the SDK's
everything-server's tool of the same name does, through ``ToolRuntime`` (log, progress, elicitation,
sampling) instead of the SDK's Context."""

from __future__ import annotations

import time
from typing import Any

from toolfork.tools import ToolOutput, ToolRuntime, tool
from toolfork.tools.output import ContentBlock

IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


@tool
def test_simple_text() -> str:
    """Tests simple text content response"""
    return "This is a simple text response for testing."


@tool
def test_image_content() -> ToolOutput:
    """Tests image content response"""
    return ToolOutput([ContentBlock("image", data=IMAGE, media_type="image/png")])


@tool
def test_audio_content() -> ToolOutput:
    """Tests audio content response"""
    return ToolOutput([ContentBlock("audio", data=AUDIO, media_type="audio/wav")])


@tool
def test_embedded_resource() -> ToolOutput:
    """Tests embedded resource content response"""
    return ToolOutput([ContentBlock("text", "This is an embedded resource content.", media_type="text/plain",
                                    name="test://embedded-resource")])


@tool
def test_multiple_content_types() -> ToolOutput:
    """Tests response with multiple content types (text, image, resource)"""
    return ToolOutput([
        ContentBlock("text", "Multiple content types test:"),
        ContentBlock("image", data=IMAGE, media_type="image/png"),
        ContentBlock("text", '{"test": "data", "value": 123}', media_type="application/json",
                     name="test://mixed-content-resource"),
    ])


@tool
def test_tool_with_logging(runtime: ToolRuntime) -> str:
    """Tests tool that emits log messages during execution"""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        runtime.log("info", message)
        time.sleep(0.05)
    return "Tool with logging executed successfully"


@tool
def test_tool_with_progress(runtime: ToolRuntime) -> str:
    """Tests tool that reports progress notifications"""
    for step in (0, 50, 100):
        runtime.emit_progress({"progress": step, "total": 100, "message": f"Completed step {step} of 100"})
        time.sleep(0.05)
    return "progress reported"


@tool
def test_error_handling() -> str:
    """Tests error response handling"""
    raise RuntimeError("This tool intentionally returns an error for testing")


@tool
def test_sampling(prompt: str, runtime: ToolRuntime) -> str:
    """Tests server-initiated sampling (LLM completion request)"""
    answer = runtime.sample(prompt, max_tokens=100)
    content = answer.get("content") or {}
    return f"LLM response: {content.get('text', 'No response')}"


def _answer(runtime: ToolRuntime, message: str, schema: dict[str, Any]) -> tuple[str, Any]:
    answer = runtime.elicit(message, schema)
    return answer["action"], answer.get("content") if answer["action"] == "accept" else {}


@tool
def test_elicitation(message: str, runtime: ToolRuntime) -> str:
    """Tests server-initiated elicitation (user input request)"""
    action, content = _answer(runtime, message, {"type": "object", "properties": {
        "response": {"type": "string", "description": "User's response"}}, "required": ["response"]})
    return f"User response: action={action}, content={content}"


@tool
def test_elicitation_sep1034_defaults(runtime: ToolRuntime) -> str:
    """Tests elicitation with default values for all primitive types (SEP-1034)"""
    action, content = _answer(runtime, "Please provide user information", {"type": "object", "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                   "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True}}})
    return f"Elicitation result: action={action}, content={content}"


@tool
def test_elicitation_sep1330_enums(runtime: ToolRuntime) -> str:
    """Tests elicitation with enum schema variations per SEP-1330"""
    action, content = _answer(runtime, "Please select values using different enum schema types", {
        "type": "object", "properties": {
            "untitledSingle": {"type": "string", "description": "Simple enum without titles",
                               "enum": ["active", "inactive", "pending"]},
            "titledSingle": {"type": "string", "description": "Enum with titled options (oneOf)", "oneOf": [
                {"const": "low", "title": "Low Priority"}, {"const": "medium", "title": "Medium Priority"},
                {"const": "high", "title": "High Priority"}]},
            "untitledMulti": {"type": "array", "description": "Multi-select without titles",
                              "items": {"type": "string", "enum": ["read", "write", "execute"]}},
            "titledMulti": {"type": "array", "description": "Multi-select with titled options", "items": {"anyOf": [
                {"const": "feature", "title": "New Feature"}, {"const": "bug", "title": "Bug Fix"},
                {"const": "docs", "title": "Documentation"}]}},
            "legacyEnum": {"type": "string", "description": "Legacy enum with enumNames",
                           "enum": ["small", "medium", "large"],
                           "enumNames": ["Small Size", "Medium Size", "Large Size"]}},
        "required": ["untitledSingle", "titledSingle", "untitledMulti", "titledMulti", "legacyEnum"]})
    return f"Elicitation completed: action={action}, content={content}"


TOOLS = [test_simple_text, test_image_content, test_audio_content, test_embedded_resource,
         test_multiple_content_types, test_tool_with_logging, test_tool_with_progress, test_error_handling,
         test_sampling, test_elicitation, test_elicitation_sep1034_defaults, test_elicitation_sep1330_enums]
