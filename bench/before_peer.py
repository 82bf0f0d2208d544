r"""toolfork as it was before a change, as a benchmark peer: before and after measured in one run.

Make the old tree importable under another name, then name this peer (its directory on PYTHONPATH)::

    git worktree add /tmp/old 759c435 && mkdir -p /tmp/before && cp -r /tmp/old/toolfork /tmp/before/toolfork_before
    find /tmp/before/toolfork_before -name "*.py" -exec sed -i -E \
        -e 's/\bfrom toolfork(\.| import)/from toolfork_before\1/g' \
        -e 's/^(\s*)import toolfork(\.|$| )/\1import toolfork_before\2/g' \
        -e 's/\btoolfork\.(executor|tools|commands|bench|toolkits|agent|_extras)\b/toolfork_before.\1/g' {} \;
    cp bench/before_peer.py /tmp/before/
    PYTHONPATH=$PWD:/tmp/before toolfork bench --only payloads --executors toolfork,before_peer:BeforePeer,threads
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolfork.bench.calls import FUNCTIONS
from toolfork.bench.peers import Outcome, Peer, Task, toolfork_outcome


def payload_file(nbytes: int) -> Any:
    """Return nbytes of binary data as a file block.

    Args:
        nbytes: size of the file
    """
    from toolfork_before.tools.output import ToolOutput

    return ToolOutput.file(b"\x89" * nbytes, media_type="application/octet-stream", name="blob.bin")


class BeforePeer(Peer):
    name = "toolfork-before"
    description = "toolfork Executor, fork pool, at an earlier commit (759c435)"
    timeout_support = "kill"
    concurrent_callers = True

    def start(self) -> None:
        from toolfork_before.executor import Executor
        from toolfork_before.tools import tool

        fns = dict(FUNCTIONS)
        fns["payload_file"] = payload_file
        tools = [tool(name=n)(f) for n, f in fns.items()]
        self.ex = Executor(tools, mode="fork", workers=self.workers)

    def run(self, tasks: Sequence[Task]) -> list[Outcome]:
        from toolfork_before.executor import ToolCall

        calls = [ToolCall(id=f"c{i}", name=t.fn, arguments=t.kwargs, timeout=t.timeout) for i, t in enumerate(tasks)]
        return [toolfork_outcome(r) for r in self.ex.run(calls)]

    def close(self) -> None:
        self.ex.close()
