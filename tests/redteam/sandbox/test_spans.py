"""Spans from a sandboxed call are data about that call. A hostile sandboxed tool sends spans of its own
making (another tenant's trace id and parent, toolfork's own scope and an ``execute_tool`` name, 1,000
attributes and events, a start 5 ns before the epoch, a self-parent, an end in 2100) beside a harmless
warm call's good span, to a host that traces with the real SDK; everything exported is encoded in one
batch with the OTLP exporter's encoder. As root and as nobody.

On the tree before this rule the forged spans were exported as sent, and the -5 ns span made the OTLP
encoder fail the whole batch, the other call's span with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.redteam.sandbox.conftest import USERS
from tests.redteam.sandbox.runner import run
from tests.redteam.sandbox.telemetry import FOREIGN_TRACE, FORGED_IDS

users = pytest.mark.parametrize("user", USERS)


def by_name(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in spans}


@users
def test_a_sandboxed_calls_spans_are_bound_to_its_call(user: str, work: Path) -> None:
    ev = run("tests.redteam.sandbox.telemetry", "forged_spans", user, work)
    assert ev["statuses"] == ["ok", "ok"], ev
    spans = by_name(ev["spans"])
    call, batch = spans["execute_tool hostile"], spans["batch"]
    forged = [s for s in ev["spans"] if s["scope"] == "sandboxed-tool"]
    assert {s["name"] for s in forged} == {"execute_tool transfer_funds", "child of the forged span", "loops"}, forged
    own_ids = {s["span_id"] for s in forged}
    for s in forged:
        assert s["trace_id"] == batch["trace_id"] != FOREIGN_TRACE, s  # the call's trace, not the one it chose
        assert s["span_id"] not in FORGED_IDS, s  # ids the host made
        assert s["parent_id"] == call["span_id"] or s["parent_id"] in own_ids, s  # inside the call's own tree
        assert call["start"] <= s["start"] <= s["end"] <= call["end"], (s, call)  # clamped into the call
    assert spans["child of the forged span"]["parent_id"] == spans["execute_tool transfer_funds"]["span_id"]
    assert spans["execute_tool transfer_funds"]["parent_id"] == call["span_id"]
    assert spans["loops"]["parent_id"] == call["span_id"]  # a self-parent is no tree: under the call
    assert all(s["scope"] != "toolfork.executor" for s in forged)
    transfer = spans["execute_tool transfer_funds"]
    assert transfer["attributes"] == 128 and transfer["dropped_attributes"] == 872, transfer  # the SDK's limit
    assert transfer["events"] == 128, transfer


@users
def test_a_malformed_span_is_dropped_and_counted_and_the_batch_is_exported(user: str, work: Path) -> None:
    ev = run("tests.redteam.sandbox.telemetry", "forged_spans", user, work)
    names = {s["name"] for s in ev["spans"]}
    assert "starts before the epoch" not in names and ev["dropped"] == 1, ev
    assert "good t" in names  # the other call's span is exported
    assert ev["otlp"] in ("encoded", "not installed"), ev["otlp"]  # the whole batch encodes
