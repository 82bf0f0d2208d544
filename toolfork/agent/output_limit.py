"""Cap a tool result's text so one huge output cannot flood the model's context.

The head and the tail are kept (the start says what the output is, the end often holds the
summary or the error) around a notice telling the model how much was cut.
"""

from __future__ import annotations

from toolfork.tools.output import ContentBlock, ToolOutput


def cut_notice(cut: int, limit: int) -> str:
    return f"\n\n[... {cut} characters cut from the middle of this tool result (limit {limit}) ...]\n\n"


def truncate_text(text: str, limit: int) -> str:
    if limit <= 0 or len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    cut = len(text) - head - tail
    return text[:head] + cut_notice(cut, limit) + (text[-tail:] if tail else "")


def limit_output(output: ToolOutput, limit: int | None) -> ToolOutput:
    """Return ``output`` with its text cut to ``limit`` characters (non-text blocks kept as they are).

    Several text blocks over the limit are joined into one (at the first text block's place):
    cutting each block separately could keep the head of every block and lose every tail.
    """
    if limit is None or limit <= 0:
        return output
    texts = [b for b in output.content if b.type == "text"]
    total = sum(len(b.text or "") for b in texts)
    if total <= limit:
        return output
    joined = "\n".join(b.text or "" for b in texts)
    merged = ContentBlock(type="text", text=truncate_text(joined, limit))
    content: list[ContentBlock] = []
    placed = False
    for block in output.content:
        if block.type != "text":
            content.append(block)
        elif not placed:
            content.append(merged)
            placed = True
    # ``data`` described the whole value; it no longer matches the text the model sees.
    return ToolOutput(content=content, is_error=output.is_error, data=None)


__all__ = ["cut_notice", "limit_output", "truncate_text"]
