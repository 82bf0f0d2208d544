"""Tools the host shows the model but never runs: frontend (client-side) tools and provider tools.

A ``FrontendTool`` is answered by someone else (a browser, a UI, a human) through
``agent.submit_tool_results``; a ``ProviderTool`` is run by the model provider itself (web search,
code execution) and only passed through in the request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
    "null": (type(None),),
}


class FrontendInputError(ValueError):
    """Arguments for a frontend tool do not match its schema; ``errors`` has one entry per field."""

    def __init__(self, tool_name: str, errors: list[dict[str, str]]) -> None:
        self.tool_name = tool_name
        self.errors = errors
        listing = "; ".join(f"{e['loc']}: {e['msg']}" for e in errors)
        super().__init__(f"Invalid arguments for tool '{tool_name}': {listing}")


@dataclass
class FrontendTool:
    """A tool whose calls the host does not run: the run pauses with a ``ToolResultsRequest``."""

    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    max_runs: int | None = None
    track_by_inputs: bool = False
    max_output_chars: int | None = None

    on_error: str = "return-to-model"
    # Asked before the call is handed to the client (True: always, False: never, even under an
    # agent-wide policy, None: the agent's policy, or (inputs) -> bool | str), as for a plain tool.
    approval_policy: Any = None
    # A hidden frontend tool is neither offered to the model nor accepted from it, like a hidden Tool.
    is_visible: bool = True

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError("FrontendTool needs a non-empty name")
        if self.input_schema.get("type", "object") != "object":
            raise ValueError(f"FrontendTool '{self.name}': input_schema must describe an object")
        policy = self.approval_policy
        if policy is not None and not isinstance(policy, bool) and not callable(policy):
            raise ValueError(f"FrontendTool '{self.name}': approval_policy must be True, False, None or a callable "
                             f"(inputs) -> bool | str; got {policy!r}")

    def visible(self, flag: bool = True) -> FrontendTool:
        """Show or hide the tool (as ``Tool.visible``); returns self."""
        self.is_visible = bool(flag)
        return self

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check required fields and the JSON types of top-level fields; enough to catch a model
        that forgot an argument without pulling in a JSON Schema validator."""
        if not isinstance(arguments, Mapping):
            raise FrontendInputError(self.name, [{"loc": "(arguments)", "msg": "must be a JSON object"}])
        errors: list[dict[str, str]] = []
        props: dict[str, Any] = self.input_schema.get("properties", {}) or {}
        for name in self.input_schema.get("required", []) or []:
            if name not in arguments:
                errors.append({"loc": name, "msg": "field required"})
        for name, value in arguments.items():
            spec = props.get(name)
            if spec is None:
                if self.input_schema.get("additionalProperties") is False:
                    errors.append({"loc": name, "msg": "unexpected field"})
                continue
            types = spec.get("type")
            allowed = types if isinstance(types, list) else [types] if types else []
            if allowed and not any(_is_json_type(value, t) for t in allowed):
                errors.append({"loc": name, "msg": f"expected {' or '.join(allowed)}, got {type(value).__name__}"})
        if errors:
            raise FrontendInputError(self.name, errors)
        return dict(arguments)

    def to_json_schema(self) -> dict[str, Any]:
        return dict(self.input_schema)

    def to_anthropic(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.to_json_schema()}

    def to_openai(self, strict: bool = False, api: str = "chat") -> dict[str, Any]:
        if api == "responses":
            return {"type": "function", "name": self.name, "description": self.description,
                    "parameters": self.to_json_schema()}
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.to_json_schema()}}


def _is_json_type(value: Any, json_type: str) -> bool:
    py = _JSON_TYPES.get(json_type)
    if py is None:
        return True  # a type we do not check
    if json_type in ("integer", "number") and isinstance(value, bool):
        return False
    if json_type == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, py)


@dataclass
class ProviderTool:
    """A tool the model provider hosts (``type`` is the provider's tool type, e.g.
    ``web_search_20250305`` for Anthropic or ``web_search`` for OpenAI Responses). Never run locally."""

    type: str
    name: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.type:
            raise ValueError("ProviderTool needs a type (the provider's hosted tool type)")

    @property
    def label(self) -> str:
        return f"{self.name} ({self.type})" if self.name else self.type


__all__ = ["FrontendInputError", "FrontendTool", "ProviderTool"]
