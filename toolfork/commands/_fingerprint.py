"""What a job was started on, so ``--resume`` never continues it on something else without saying so.

``--resume`` matches the input's lines against OUT's records by id. An edited input breaks that
silently: a line inserted into an input whose lines have no ids shifts every ``line-N`` after it, so a
new line is taken for done and an old one is skipped. Other tools or options would make the resumed
half of OUT differ from the first. So a new job writes its fingerprint into its journal's first line
(``Journal(about=...)``), and a resume compares::

    fingerprint(args, tool names) ──> {"input": {"lines", "sha256"} | None, "tools": [...], "options": {...}}
          │ new job: Journal(about=…)             │ --resume: differences(journal.about, now)
          ▼                                       ▼
    OUT.journal, line 1                      [] or what differs ──> exit 2 (unless --accept-changes)

The input is hashed as read, whole, when it is a regular file; a pipe cannot be read twice, so its
lines are not compared (the tools and options still are). The options are those that change what a
call returns: ``--timeout``, the hooks, ``--limits``, ``--sandbox``, the session factory and
checkpointing; not ``--workers``, ``--window`` or ``--mode`` (where calls run, not what they return).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import stat
from typing import Any

RESULT_OPTIONS = ("timeout", "before_child", "after_child", "limits", "sandbox", "session_factory",
                  "session_checkpoint")


def input_digest(path: str) -> dict[str, Any] | None:
    """``{"lines": N, "sha256": HEX}`` of a regular file's bytes; None for stdin or a pipe."""
    if path == "-":
        return None
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        digest = hashlib.sha256()
        lines, last = 0, b"\n"
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
                lines += chunk.count(b"\n")
                last = chunk[-1:]
        return {"lines": lines + (last != b"\n"), "sha256": digest.hexdigest()}
    except OSError:
        return None


def fingerprint(args: argparse.Namespace, tool_names: list[str], digest: dict[str, Any] | None) -> dict[str, Any]:
    """What this job runs on (JSON data, recorded in its journal); ``digest``: ``input_digest`` of its
    input, taken when the job began to read it."""
    options = {name: _plain(getattr(args, name, None)) for name in RESULT_OPTIONS}
    return {"input": digest, "tools": sorted(tool_names), "options": options}


def differences(then: Any, now: dict[str, Any]) -> list[str]:
    """What differs between the fingerprint a job started with and this run's, in words (empty when
    nothing does, or when the journal predates fingerprints)."""
    if not isinstance(then, dict):
        return []
    found = []
    old, new = then.get("input"), now.get("input")
    if isinstance(old, dict) and isinstance(new, dict) and old != new:
        found.append(f"the input: {old.get('lines')} lines (sha256 {str(old.get('sha256'))[:12]}) when the job "
                     f"started, {new.get('lines')} lines (sha256 {str(new.get('sha256'))[:12]}) now")
    old_tools, new_tools = then.get("tools"), now.get("tools") or []
    if isinstance(old_tools, list) and old_tools != new_tools:
        gone = sorted(set(old_tools) - set(new_tools))
        added = sorted(set(new_tools) - set(old_tools))
        found.append("the tools: " + "; ".join(
            [*([f"gone: {', '.join(gone)}"] if gone else []), *([f"new: {', '.join(added)}"] if added else [])]))
    old_options = then.get("options")
    if isinstance(old_options, dict):
        for name in RESULT_OPTIONS:
            if name in old_options and old_options[name] != now["options"].get(name):
                flag = "--" + name.replace("_", "-")
                found.append(f"{flag}: {old_options[name]!r} when the job started, {now['options'].get(name)!r} now")
    return found


def _plain(value: Any) -> Any:
    """An option's value as JSON data (parsed values such as ``Limits`` by their text)."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


__all__ = ["RESULT_OPTIONS", "differences", "fingerprint", "input_digest"]
