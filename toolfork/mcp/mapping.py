"""Translation between MCP's wire shapes and toolfork's tool model, both ways.

Kept free of the ``mcp`` package where it can be: the worker-side half of the client (``relay.py``)
only sees the plain dicts produced here, so a fork worker never imports the SDK.

MCP result -> ``ToolOutput``:
  text                      -> text block
  image / audio             -> image / audio block (base64 ``data`` and ``media_type`` kept)
  resource_link             -> file block with ``url`` = the resource URI (``name`` kept)
  embedded text resource    -> text block named after its URI
  embedded blob resource    -> file block (base64 ``data``), named after its URI
  (the server maps the other way: a text block named by a URI is an embedded text resource at that
  URI, a file block with data one of blob; a file block not named by a URI gets a ``toolfork://`` one)
  structuredContent         -> ``ToolOutput.data``
  isError                   -> ``ToolOutput.is_error`` (the tool ran and reported a failure the model
                               can act on: that is what an error ``ToolOutput`` means here)

``ToolResult`` -> MCP result (the server): the same blocks the other way; a result that is not "ok"
(error, timeout, crashed, cancelled) becomes an ``isError`` result whose text says what happened.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from toolfork.tools.output import ContentBlock, ToolOutput

if TYPE_CHECKING:
    import mcp_types

    from toolfork.executor.types import ToolResult
    from toolfork.tools.tool import Tool

# The MCP tool metadata a toolfork Tool carries as plain attributes (set by the connector, read by the
# server; a user may set them on any tool to have `toolfork mcp serve` publish them).
META_ATTRS = ("title", "annotations", "output_schema")


# ------------------------------------------------------------------ client side: MCP -> toolfork

def result_to_dict(result: mcp_types.CallToolResult) -> dict[str, Any]:
    """A ``CallToolResult`` as the plain dict ``output_from_dict`` reads (crosses the relay as JSON)."""
    blocks: list[dict[str, Any]] = []
    for item in result.content:
        kind = getattr(item, "type", None)
        if kind == "text":
            blocks.append({"type": "text", "text": item.text})  # type: ignore[union-attr]
        elif kind in ("image", "audio"):
            blocks.append({"type": kind, "data": item.data, "media_type": item.mime_type})  # type: ignore[union-attr]
        elif kind == "resource_link":
            blocks.append({"type": "file", "url": str(item.uri), "media_type": item.mime_type,  # type: ignore[union-attr]
                           "name": item.name})  # type: ignore[union-attr]
        elif kind == "resource":
            res = item.resource  # type: ignore[union-attr]
            uri = str(res.uri)
            text = getattr(res, "text", None)
            if text is not None:
                blocks.append({"type": "text", "text": text, "media_type": res.mime_type, "name": uri})
            else:
                blocks.append({"type": "file", "data": getattr(res, "blob", None),
                               "media_type": res.mime_type or "application/octet-stream", "name": uri})
        else:  # a content type newer than this mapping: keep what it said, as text
            blocks.append({"type": "text", "text": item.model_dump_json(by_alias=True, exclude_none=True)})
    return {"content": blocks, "is_error": bool(result.is_error), "data": result.structured_content}


def output_from_dict(d: dict[str, Any]) -> ToolOutput:
    content = [ContentBlock(b["type"], b.get("text"), b.get("data"), b.get("url"), b.get("media_type"), b.get("name"))
               for b in d.get("content", [])]
    return ToolOutput(content, bool(d.get("is_error")), d.get("data"))


def tool_meta(tool: mcp_types.Tool) -> dict[str, Any]:
    """Title, annotations (camelCase, as on the wire) and output schema of an MCP tool."""
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
    title = tool.title or (tool.annotations.title if tool.annotations else None)
    return {"title": title, "annotations": annotations or None, "output_schema": tool.output_schema}


# ------------------------------------------------------------------ server side: toolfork -> MCP

class MCPProtocolError(Exception):
    """Raised by a tool served by ``toolfork mcp serve``: the call is answered with a JSON-RPC error
    (``code``, ``message``, ``data``) instead of a result, where the MCP spec asks for one (e.g.
    ``-32003`` with ``data={"requiredCapabilities": ...}`` for a client capability the tool needs).
    It crosses from the worker as its text (a JSON object): exceptions cross the fork as strings."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(json.dumps({"code": code, "message": message, "data": data}, default=str))
        self.code, self.message, self.data = code, message, data

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.code, self.message, self.data)


def protocol_error(result: ToolResult) -> tuple[int, str, Any] | None:
    """(code, message, data) when the call's tool raised ``MCPProtocolError``, else None."""
    error = result.error
    if result.status != "error" or error is None or error.type != MCPProtocolError.__name__:
        return None
    try:
        fields = json.loads(error.message)
        return int(fields["code"]), str(fields["message"]), fields.get("data")
    except (ValueError, KeyError, TypeError):
        return None


def mcp_tool(t: Tool) -> mcp_types.Tool:
    """How ``toolfork mcp serve`` lists a tool: its JSON Schema, description and any MCP metadata."""
    import mcp_types

    output_schema = getattr(t, "output_schema", None)
    if output_schema is None and t.output_model is not None:
        output_schema = t.output_model.model_json_schema()
    annotations = getattr(t, "annotations", None)
    return mcp_types.Tool(
        name=t.name,
        title=getattr(t, "title", None),
        description=t.description or None,
        input_schema=t.to_json_schema(),
        output_schema=output_schema if _is_object_schema(output_schema) else None,
        annotations=mcp_types.ToolAnnotations.model_validate(annotations) if annotations else None,
    )


def _is_object_schema(schema: Any) -> bool:
    # MCP requires an output schema of type object; a scalar output model is not published as one.
    return isinstance(schema, dict) and schema.get("type", "object") == "object"


def call_result(result: ToolResult) -> mcp_types.CallToolResult:
    import mcp_types

    if result.status != "ok":
        what = {"timeout": "the call timed out", "crashed": "the tool's worker process crashed",
                "cancelled": "the call was cancelled"}.get(result.status, "the tool failed")
        detail = f": {result.error}" if result.error is not None else ""
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=f"{what}{detail}")],
                                        is_error=True)
    output = result.output or ToolOutput()
    content: list[Any] = [_block(b) for b in output.content]
    structured = output.data if isinstance(output.data, dict) else None
    return mcp_types.CallToolResult(content=content, structured_content=structured, is_error=output.is_error)


def _is_uri(name: str | None) -> bool:
    scheme, sep, rest = (name or "").partition("://")
    return bool(sep and rest and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum())


def _block(b: ContentBlock) -> Any:
    import mcp_types

    if b.type == "text":
        if b.name is not None and _is_uri(b.name):  # named by a URI: an embedded text resource (as the client maps one)
            return mcp_types.EmbeddedResource(type="resource", resource=mcp_types.TextResourceContents(
                uri=b.name, text=b.text or "", mime_type=b.media_type))
        return mcp_types.TextContent(type="text", text=b.text or "")
    if b.url is not None:
        return mcp_types.ResourceLink(type="resource_link", uri=b.url, name=b.name or b.url, mime_type=b.media_type)
    if b.type == "image" and b.data is not None:
        return mcp_types.ImageContent(type="image", data=b.data, mime_type=b.media_type or "image/png")
    if b.type == "audio" and b.data is not None:
        return mcp_types.AudioContent(type="audio", data=b.data, mime_type=b.media_type or "audio/wav")
    # file / video with inline data: an embedded blob resource, at the block's own URI if it has one
    uri = b.name if b.name is not None and _is_uri(b.name) else f"toolfork://output/{b.name or b.type}"
    return mcp_types.EmbeddedResource(type="resource", resource=mcp_types.BlobResourceContents(
        uri=uri, blob=b.data or "", mime_type=b.media_type))


__all__ = ["META_ATTRS", "MCPProtocolError", "call_result", "mcp_tool", "output_from_dict", "protocol_error",
           "result_to_dict",
           "tool_meta"]
