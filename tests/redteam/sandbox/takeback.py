"""What a sandboxed call hands the host to rebuild, made to cost the host more than the call: each
scenario runs one hostile tool through a real Executor and reports the call's outcome and how much the
host process's peak resident set grew meanwhile (``ru_maxrss``: this process is the host).

Run by ``tests/redteam/sandbox/test_takeback.py`` as root and as nobody
(``python -m tests.redteam.sandbox.takeback NAME WORKDIR``, printing the evidence as JSON).
"""

from __future__ import annotations

import json
import os
import resource
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolfork import Limits
from toolfork.executor import Executor
from toolfork.tools.output import ContentBlock, ToolOutput
from toolfork.tools.runtime import ToolRuntime
from toolfork.tools.tool import Tool

Evidence = dict[str, Any]
STRETCH = 2 << 30  # what the memory file is stretched to (2 GiB)
ROWS, ROW = 12_000, 1_000  # 12,000 references to one row of 1,000 {}: 12 MB sent, 850 MB rebuilt


# A small budget in the worker (a user with no cgroup cannot have memory_mb enforced: best-effort then,
# since what is tested is the host's ceiling, not the worker's limit).
SMALL = Limits(memory_mb=64, sandbox=True, enforce="best-effort")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measured(tool: Tool, arguments: dict[str, Any]) -> Evidence:
    """One call of ``tool`` after a harmless one (the pool and the codec warm): its outcome, and how
    much the host's peak resident set grew during it, in MB."""
    with Executor([tool], workers=1, timeout=60) as ex:
        ex.run([{"id": "warm", "name": tool.name, "arguments": {**arguments, "how": "harmless"}}])
        before = _peak_mb()
        (r,) = ex.run([{"id": "attack", "name": tool.name, "arguments": arguments}])
        grown = _peak_mb() - before
        (after,) = ex.run([{"id": "after", "name": tool.name, "arguments": {**arguments, "how": "harmless"}}])
        context_keys = sorted(ex.context)
    return {"status": r.status, "error_type": None if r.error is None else r.error.type,
            "error": None if r.error is None else r.error.message,
            "text_len": None if r.output is None or not r.output.content else len(r.output.content[0].text or ""),
            "host_grew_mb": grown, "after": after.status, "context_keys": context_keys}


# ---------------------------------------------------------------- tools (run in the sandbox)

def shared_rows(how: str, runtime: ToolRuntime) -> Any:
    """12,000 references to one row of 1,000 ``{}`` (a few kB here), as the result, the context or a
    progress value."""
    if how == "harmless":
        return "fine"
    row = [{} for _ in range(ROW)]
    rows = [row] * ROWS
    if how == "progress":  # sent as emit_progress sends it, without its check in the worker (which
        from toolfork.executor.wire import frames  # rebuilds the value here, past this call's memory)

        writer, seq = runtime._writer, runtime._seq  # type: ignore[attr-defined]
        writer.send_payload(writer.encode(frames.progress_frame(seq, {"rows": rows})))
        return "progress sent"
    if how == "context":
        runtime.set_context({"rows": rows})
        return "context set"
    return ToolOutput([ContentBlock("text", "rows")], False, {"rows": rows})


def stretched_file(how: str) -> str:
    """A large result whose memory file the worker stretches to 2 GiB before handing it over (the
    worker's own sending code, changed from inside: a tool can do anything in its process)."""
    if how == "harmless":
        return "fine"
    from toolfork.executor.wire import oob

    release = oob._FileWriter.release

    def stretch(self: Any) -> None:
        release(self)
        os.ftruncate(self.fd, STRETCH)

    oob.KEEP_BYTES = 0  # type: ignore[misc]  # every large frame in a file of its own
    oob._FileWriter.release = stretch  # type: ignore[method-assign]
    return "x" * 300_000


def declared_huge(how: str) -> str:
    """A frame message of the worker's own making that declares 2 GiB, in a memory file stretched to
    2 GiB, announced on the result pipe the way a large result is."""
    if how == "harmless":
        return "fine"
    import gc
    import struct

    from toolfork.executor.wire import framing

    writer = next(o for o in gc.get_objects() if type(o) is framing.FrameWriter)
    fd = os.memfd_create("evil", os.MFD_ALLOW_SEALING)
    os.write(fd, b"\x90")
    os.ftruncate(fd, STRETCH)
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    except (AttributeError, OSError):
        pass
    with writer.lock:
        socket.send_fds(writer.side.sock, [b"F" + struct.pack("<Q", STRETCH)], [fd])
        os.write(writer.fd, framing.HEADER.pack(framing.MAGIC, 0))
    return "sent"


# ---------------------------------------------------------------- scenarios (run in the host)

def s_shared_result(work: Path) -> Evidence:
    return measured(Tool("rows", fn=shared_rows, limits=SMALL), {"how": "result"})


def s_shared_context(work: Path) -> Evidence:
    return measured(Tool("rows", fn=shared_rows, limits=SMALL), {"how": "context"})


def s_shared_progress(work: Path) -> Evidence:
    return measured(Tool("rows", fn=shared_rows, limits=SMALL), {"how": "progress"})


def s_shared_result_own_ceiling(work: Path) -> Evidence:
    """The same result under a tool that sets a lower ceiling of its own."""
    return measured(Tool("rows", fn=shared_rows, limits=SMALL, max_result_mb=16),
                    {"how": "result"})


def s_stretched_memory_file(work: Path) -> Evidence:
    return measured(Tool("stretch", fn=stretched_file, limits=Limits(sandbox=True)), {"how": "result"})


def s_declared_huge_frame(work: Path) -> Evidence:
    return measured(Tool("declare", fn=declared_huge, limits=Limits(sandbox=True)), {"how": "result"})


SCENARIOS: dict[str, Callable[[Path], Evidence]] = {
    name.removeprefix("s_"): fn for name, fn in list(globals().items()) if name.startswith("s_") and callable(fn)
}


if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]](Path(sys.argv[2]))))
