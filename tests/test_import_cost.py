"""``import toolfork`` and ``toolfork --version`` stay cheap: they import none of the heavy modules a
call may need (pydantic, the executor, multiprocess, asyncio, the tool model). Checked by the modules a
fresh interpreter holds afterwards, not by timing; the public names still resolve on first use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("pydantic", "pydantic_core", "multiprocess", "asyncio", "typing_extensions", "toolfork.tools",
         "toolfork.governance", "toolfork.executor", "toolfork.agent", "inspect")


def _new_modules(code: str) -> list[str]:
    probe = (f"import sys, json as _j\nbefore = set(sys.modules)\n{code}\n"
             "print(_j.dumps(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_import_toolfork_pulls_in_nothing_heavy() -> None:
    loaded = _new_modules("import toolfork")
    assert "toolfork" in loaded
    assert _heavy(loaded) == []


def test_toolfork_version_pulls_in_nothing_heavy() -> None:
    loaded = _new_modules("import sys\nfrom toolfork.cli import main\n"
                          "try:\n    main(['--version'])\nexcept SystemExit:\n    pass")
    assert "toolfork.cli" in loaded
    assert _heavy(loaded) == []


def test_the_public_names_resolve_on_first_use() -> None:
    import toolfork

    loaded = _new_modules("from toolfork import tool, Limits, ToolOutput\nimport toolfork\n"
                          "assert toolfork.tool is tool and callable(tool)")
    assert "pydantic" in loaded and "toolfork.tools" in loaded  # loaded now, when asked for
    assert set(toolfork.__all__) <= set(dir(toolfork))
    for name in toolfork.__all__:
        assert getattr(toolfork, name) is not None
    done = subprocess.run([sys.executable, "-c", "from toolfork import Nope"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert done.returncode == 1 and "cannot import name 'Nope' from 'toolfork'" in done.stderr
