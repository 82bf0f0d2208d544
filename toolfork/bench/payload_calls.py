"""The calls of the payloads workload: functions that return a large result in three shapes (a text,
bytes in a file block, a list of rows), and the check that what came back is the whole payload.

Kept apart from the workload (``payloads.py``) because every peer's workers import the benchmark's
calls: this module imports nothing of the benchmark and nothing heavy.
"""

from __future__ import annotations

from typing import Any

PAYLOAD_KINDS: tuple[str, ...] = ("str", "file", "rows")
ROW_BYTES = 100  # about what one row pickles to


def payload_str(nbytes: int) -> str:
    """Return a text of ``nbytes`` characters.

    Args:
        nbytes: length of the text
    """
    return "x" * nbytes


def payload_file(nbytes: int) -> Any:
    """Return ``nbytes`` of binary data as a file block.

    Args:
        nbytes: size of the file
    """
    from toolfork.tools.output import ToolOutput

    return ToolOutput.file(b"\x89" * nbytes, media_type="application/octet-stream", name="blob.bin")


def payload_rows(nbytes: int) -> list[dict[str, Any]]:
    """Return about ``nbytes`` of table rows (dicts).

    Args:
        nbytes: approximate size of the table
    """
    return [{"id": i, "name": f"row {i}", "score": i * 0.5, "ok": True} for i in range(max(1, nbytes // ROW_BYTES))]


FUNCTIONS = {fn.__name__: fn for fn in (payload_str, payload_file, payload_rows)}


def is_whole_payload(kind: str, value: Any, nbytes: int) -> bool:
    """Whether the value that came back is the whole payload (a wrong answer must not look fast)."""
    if kind == "str":
        return isinstance(value, str) and len(value) == nbytes
    if kind == "rows":
        return isinstance(value, list) and len(value) == max(1, nbytes // ROW_BYTES)
    block = value.content[0] if hasattr(value, "content") else None
    return block is not None and block.type == "file" and len(block.data) == 4 * ((nbytes + 2) // 3)


__all__ = ["FUNCTIONS", "PAYLOAD_KINDS", "ROW_BYTES", "is_whole_payload", "payload_file", "payload_rows", "payload_str"]
