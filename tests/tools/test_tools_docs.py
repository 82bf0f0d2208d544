"""The examples in docs/tools.md run, in order, in one namespace, and print what the page says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "tools.md"


def test_docs_examples_run_and_print_what_they_show() -> None:
    text = DOC.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 6
    namespace: dict[str, object] = {"__name__": "tools_docs_example"}
    for i, block in enumerate(blocks):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, f"{DOC.name}[block {i}]", "exec"), namespace)
        shown = "\n".join(line[2:] for line in block.splitlines() if line.startswith("# "))
        if out.getvalue():
            # The "# ..." comment lines after a print show its output (wrapped); compare words.
            assert out.getvalue().split() == shown.split(), f"block {i}"
