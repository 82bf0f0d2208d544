"""Tools for the journal tests: effects appended to a file, idempotency keys, an idempotent slow tool."""

from __future__ import annotations

import os
import time

from toolfork.tools import ToolRuntime, tool


def _append(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)


@tool
def effect(path: str, runtime: ToolRuntime) -> str:
    """Append this call's id to the file at path: an effect that happens again each time the call runs."""
    _append(path, runtime.call_id)
    return runtime.call_id


@tool(idempotent=True)
def effect_once(path: str, runtime: ToolRuntime) -> str:
    """Append this call's idempotency key to the file at path, unless it is there already."""
    key = runtime.idempotency_key
    assert key is not None
    if not (os.path.exists(path) and key in open(path).read().split()):
        _append(path, key)
    return key


@tool(idempotent=True)
def key(text: str, runtime: ToolRuntime) -> str:
    """This call's idempotency key (reads nothing, changes nothing: safe to run again)."""
    return f"{text}:{runtime.idempotency_key}"


@tool(idempotent=True)
def slow_echo(text: str, seconds: float = 0.0) -> str:
    """Echo text after a nap (changes nothing: safe to run again)."""
    time.sleep(seconds)
    return text


@tool
def paced_effect(path: str, runtime: ToolRuntime, seconds: float = 0.0, gate: str = "") -> str:
    """Wait while the file at gate exists (120 s at most), nap, then append this call's id to the file at
    path: an effect that happens again each time the call runs, and only once the nap is over."""
    end = time.monotonic() + 120
    while gate and os.path.exists(gate) and time.monotonic() < end:
        time.sleep(0.01)
    time.sleep(seconds)
    _append(path, runtime.call_id)
    return runtime.call_id


TOOLS = [effect, effect_once, key, slow_echo, paced_effect]
