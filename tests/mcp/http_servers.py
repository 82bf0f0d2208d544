"""A Python MCP server serving streamable HTTP on a free 127.0.0.1 port, for as long as a with-block
lasts (the process is stopped and reaped at its end, whatever happened inside)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator

from tests.mcp.conftest import ROOT, python_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(command: list[str], *args: str) -> Iterator[str]:
    """Run ``command --http PORT *args``; yields the MCP endpoint's URL once the port accepts."""
    port = free_port()
    proc = subprocess.Popen([*command, "--http", str(port), *args], cwd=ROOT, env=python_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, f"{command} --http exited with {proc.returncode}"
            assert time.monotonic() < deadline, f"{command} --http did not listen on port {port} in 30 s"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
