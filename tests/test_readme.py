"""The README's first example and its main-job command must keep working as written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_first_readme_example_runs_and_prints_what_it_says(tmp_path):
    readme = (ROOT / "README.md").read_text()
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "example.py"
    script.write_text(example)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok 3"


def test_the_readme_main_job_succeeds(tmp_path):
    readme = (ROOT / "README.md").read_text()
    assert "toolfork run examples/calls.jsonl -o results.jsonl" in readme.splitlines()[3]
    out_file = tmp_path / "results.jsonl"
    out = subprocess.run([sys.executable, "-m", "toolfork.cli", "run", "examples/calls.jsonl", "-o", str(out_file)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out_file.read_text().splitlines()]
    inputs = [line for line in (ROOT / "examples/calls.jsonl").read_text().splitlines() if line.strip()]
    assert len(records) == len(inputs) and all(r["status"] == "ok" for r in records)
