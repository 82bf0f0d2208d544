"""The official MCP conformance suite's client scenarios, run against ``MCPConnector`` (through
``connector_conformance_client.py``) at both pinned suite versions: 0.1.16 (every client scenario it
has) and 0.2.0-alpha.11 at the 2026-07-28 revision. Auth scenarios included: the suite's mock
authorization servers drive the SDK's OAuth providers as ``toolfork.mcp.auth`` builds them.

Each scenario is one test (the harness starts its own mock server on a free port, and a client process
of its own). The one scenario the SDK's own client fails as well is run by both clients, and the test
is that they agree. The client processes are forked from a zygote that has done their imports once
(``tests/mcp/warm_python.py``): each still runs the client program as ``__main__``, in its own process.

The verdict is the suite's exit status, with one exception (``conformance_client.verdict``): a run whose
only complaint is the suite's own "slightly late, acceptable" warning on ``sse-retry``'s reconnection
time passes. Reconnecting too early, or later than twice the retry, still fails.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mcp.conformance_client import (
    VERSIONS,
    Outcome,
    client_command,
    client_scenarios,
    missing,
    run_client_scenario,
    verdict,
    warm_clients,
)
from tests.mcp.conftest import allow_new, children

LEGS = {"0.1.16": None, "0.2.0-alpha.11": "2026-07-28"}  # suite version -> --spec-version
# What the SDK's client (the baseline) fails too, with the reason; see docs/mcp.md.
SDK_FAILS = {("0.1.16", "auth/2025-03-26-oauth-metadata-backcompat"),
             ("0.2.0-alpha.11", "sep-2322-client-request-state")}


def legs() -> list[tuple[str, str]]:
    if missing():
        return [(version, "(suite not installed)") for version in VERSIONS]
    return [(version, scenario) for version, spec in LEGS.items() for scenario in client_scenarios(version, spec)]


def explain(outcome: Outcome) -> str:
    return "\n".join([*outcome.failed_checks, outcome.output[-3000:]])


@pytest.fixture(scope="session")
def starter() -> Iterator[list[str]]:
    """The zygote's shim (session-scoped: xdist interleaves this module's tests with others')."""
    before = children()
    with warm_clients() as command:
        allow_new(before)  # the zygote; a client it forks that leaves something behind fails its scenario
        yield command


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("version", "scenario"), [leg for leg in legs() if leg not in SDK_FAILS])
def test_client_scenario(version: str, scenario: str, starter: list[str]) -> None:
    why = missing()
    assert why is None, why
    outcome = run_client_scenario(client_command(starter=starter), version, scenario, LEGS[version], timeout_s=90)
    assert outcome.passed, explain(outcome)


@pytest.mark.timeout(400)
@pytest.mark.parametrize(("version", "scenario"), sorted(SDK_FAILS))
def test_scenarios_the_sdk_client_fails_too_go_as_they_go_for_it(version: str, scenario: str,
                                                                 starter: list[str]) -> None:
    why = missing()
    assert why is None, why
    ours = run_client_scenario(client_command(starter=starter), version, scenario, LEGS[version], timeout_s=90)
    sdk = run_client_scenario(client_command(sdk=True, starter=starter), version, scenario, LEGS[version],
                              timeout_s=90)
    assert (ours.passed, sorted(ours.failed_checks)) == (sdk.passed, sorted(sdk.failed_checks)), \
        f"ours:\n{explain(ours)}\n\nthe SDK's:\n{explain(sdk)}"


def _timing(status: str, **details: bool) -> dict[str, object]:
    """A ``client-sse-retry-timing`` check as the suite writes it (0.1.16)."""
    flags = {"tooEarly": False, "slightlyLate": False, "veryLate": False, **details}
    return {"id": "client-sse-retry-timing", "status": status, "details": flags}


SUCCESS = {"id": "client-sse-graceful-reconnect", "status": "SUCCESS"}


@pytest.mark.parametrize(("returncode", "checks", "passed"), [
    (0, [SUCCESS, _timing("SUCCESS")], True),
    # Waited the retry, then was scheduled late on a loaded machine: the suite's "acceptable" warning.
    (1, [SUCCESS, _timing("WARNING", slightlyLate=True)], True),
    (1, [SUCCESS, _timing("FAILURE", tooEarly=True)], False),
    (1, [SUCCESS, _timing("FAILURE", slightlyLate=True, veryLate=True)], False),
    (1, [SUCCESS, _timing("WARNING", slightlyLate=True),
         {"id": "client-sse-last-event-id", "status": "WARNING", "details": {}}], False),
    (1, [SUCCESS, _timing("WARNING")], False),  # a timing warning that is not lateness (nothing measured)
    (1, [SUCCESS], False),  # the harness failed without a check saying why
])
def test_only_the_suites_lateness_warning_is_forgiven(returncode: int, checks: list[dict[str, object]],
                                                      passed: bool) -> None:
    assert verdict(returncode, checks) is passed
