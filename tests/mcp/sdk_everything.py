"""The python MCP SDK's own everything-server (``examples/servers/everything-server``: the server the SDK
runs the conformance suite against), taken from the sdist of the installed ``mcp`` version.

Why a module of its own: fetching the sdist is network work (pip builds the sdist's metadata, which can
mean fetching its build backend first), so ``scripts/test.sh`` runs it before pytest, with retries and
without a test's time limit:

    python -m tests.mcp.sdk_everything      -> NPM_DIR/mcp-sdk/VERSION/everything_server.py

The conformance fixture calls the same ``fetch``, which finds the file already there.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from tests.mcp.conformance import NPM_DIR


class FetchError(RuntimeError):
    """The sdist could not be fetched or holds no everything-server."""


def fetch(attempts: int = 3, timeout_s: float = 300) -> Path:
    """The server's file for the installed ``mcp``, fetched once (a lock keeps parallel callers to one
    download)."""
    version = importlib.metadata.version("mcp")
    where = NPM_DIR / f"mcp-sdk/{version}"
    server = where / "everything_server.py"
    if server.is_file():
        return server
    where.mkdir(parents=True, exist_ok=True)
    with open(where / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if server.is_file():
            return server
        pip = shutil.which("pip3") or shutil.which("pip")
        if pip is None:
            raise FetchError("the conformance tests need pip to fetch the mcp sdist (the SDK's everything-server)")
        error = ""
        for attempt in range(attempts):
            try:
                done = subprocess.run([pip, "download", "--no-deps", "--no-binary", ":all:", f"mcp=={version}",
                                       "-d", str(where)], capture_output=True, text=True, timeout=timeout_s)
                error = done.stderr.strip()[-2000:]
            except subprocess.TimeoutExpired:
                error = f"pip download did not finish in {timeout_s:.0f} s"
            sdists = sorted(where.glob(f"mcp-{version}.tar.gz"))
            if sdists:
                break
            time.sleep(5 * (attempt + 1))
        else:
            raise FetchError(f"pip could not download the mcp {version} sdist in {attempts} attempts: {error}")
        member = f"mcp-{version}/examples/servers/everything-server/mcp_everything_server/server.py"
        with tarfile.open(sdists[0]) as tar:
            source = tar.extractfile(member)
            if source is None:
                raise FetchError(f"the mcp {version} sdist has no {member}")
            (where / "everything_server.py.tmp").write_bytes(source.read())
        os.replace(where / "everything_server.py.tmp", server)
    return server


if __name__ == "__main__":
    try:
        print(f"sdk_everything.py: {fetch()}", file=sys.stderr)
    except FetchError as exc:
        sys.exit(f"sdk_everything.py: {exc}")
