"""What the commands print on a terminal: text that came from input, a tool, a worker or a sandbox is
shown, never obeyed.

An id in an input file, a tool's name, an error type or message, a log line a tool writes: each is data,
and a terminal obeys the control sequences in data as it obeys ours (``ESC ] 0 ;`` sets the window
title, ``ESC ] 52 ;`` writes the clipboard, ``CSI`` moves the cursor and rewrites what was printed). So
every line the commands write for a person goes through ``escape`` here, in the writers themselves::

    Progress.message / Progress.log (``run``: start line, log lines, the final counts) ─┐
    LineHandler (every command's log lines, a tool's own included)                     ├─> escape ─> the terminal
    error(command, message) (usage errors, which may quote the input)                  │
    chat's Printer (the model's answer, tool names, ids, errors, approval prompts)    ─┘

Only the progress bar's own ``\\r`` and ``ESC [ K`` are written raw, by ``Progress`` after escaping.
What is escaped: the C0 controls but newline and tab, DEL, the C1 controls (U+0080-U+009F, a 8-bit
``CSI``/``OSC``), and the bidirectional overrides and isolates (which reorder what a line seems to
say); each becomes its Python escape (``\\x1b``, ``\\u202e``), so the text stays readable and exact.
A JSONL output keeps the exact text: escaping is for terminals and log lines only.
"""

from __future__ import annotations

import re

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """``text`` with every control character written as its escape (newline and tab kept)."""
    return _CONTROLS.sub(_shown, text) if _CONTROLS.search(text) else text


__all__ = ["escape"]
