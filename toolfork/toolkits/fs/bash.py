"""The opt-in ``bash`` tool's runner: a shell in the root with a timeout that kills what it started.

Not confined like the file tools (a shell can reach anything its user can); that is why it exists
only with ``allow_bash=True`` and asks for approval every time. Its environment is minimal so a
command cannot print the host's API keys.
"""

import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

from toolfork.tools import ToolOutput

__all__ = ["SAFE_ENV_KEYS", "bash_environment", "run_bash"]

BASH_OUTPUT_CHARS = 50_000
SAFE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")


def bash_environment(root: Path, extra: Mapping[str, str] | None) -> dict[str, str]:
    """``extra`` as given, else the safe keys of this process's environment with HOME at the root."""
    if extra is not None:
        return dict(extra)
    env = {key: os.environ[key] for key in SAFE_ENV_KEYS if key in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["HOME"] = str(root)
    return env


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill the shell and everything it started; they share the worker's process group, not their own."""
    try:
        import psutil

        parent = psutil.Process(proc.pid)
        victims = [*parent.children(recursive=True), parent]
        for victim in victims:
            try:
                victim.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
    except Exception:
        proc.kill()


def run_bash(command: str, cwd: Path, limit: float, env: dict[str, str]) -> ToolOutput:
    # Not a new session: if the executor kills the worker's process group on its own timeout, the
    # command must die with it. Our own, shorter timeout kills the tree with psutil instead.
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    proc = subprocess.Popen(
        [shell, "-c", command],
        cwd=str(cwd),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        stdout, stderr = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        stdout, stderr = proc.communicate()
        return ToolOutput.error(
            f"command timed out after {limit:g} s and was killed\n{_format_streams(stdout, stderr)}"
        )
    finally:
        if proc.poll() is None:
            _kill_tree(proc)
            proc.wait()
    return ToolOutput.text(f"exit code: {proc.returncode}\n{_format_streams(stdout, stderr)}")


def _format_streams(stdout: bytes, stderr: bytes) -> str:
    parts = []
    for label, data in (("stdout", stdout), ("stderr", stderr)):
        text = data.decode("utf-8", errors="replace")
        if len(text) > BASH_OUTPUT_CHARS:
            text = text[:BASH_OUTPUT_CHARS] + f"\n[truncated: {len(data)} bytes in total]"
        parts.append(f"--- {label} ---\n{text}")
    return "\n".join(parts)
