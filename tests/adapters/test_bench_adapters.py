"""The adapter benchmark's report: ratios, capped runs and failures read as they should."""

from __future__ import annotations

from toolfork.bench.adapters import CAP, CELLS, FRAMEWORKS, markdown


def test_every_framework_has_a_cell() -> None:
    assert set(CELLS) == set(FRAMEWORKS)


def test_the_report_gives_ratios_and_marks_capped_runs_as_lower_bounds() -> None:
    rows = {
        "langgraph": {
            "sleep": {"default": {"seconds": 0.5, "capped": False}, "toolfork": {"seconds": 0.5, "capped": False}},
            "cpu": {"default": {"seconds": 1.2, "capped": False}, "toolfork": {"seconds": 0.6, "capped": False}},
            "hung": {"default": {"seconds": CAP, "capped": True}, "toolfork": {"seconds": 1.0, "capped": False}},
        },
        "pydantic-ai": {"cpu": {"default": {"seconds": None, "error": ["boom"]},
                                "toolfork": {"seconds": 0.6, "capped": False}}},
    }
    text = markdown(rows, took=12.0)
    assert "| langgraph | sleep | 0.500 | 0.500 | 1.00x |" in text
    assert "| langgraph | cpu | 1.200 | 0.600 | 2.00x |" in text
    assert f"| langgraph | hung | >= {CAP:.2f} | 1.000 | ≥ {CAP:.2f}x |" in text
    assert "| pydantic-ai | cpu | failed | 0.600 | — |" in text
