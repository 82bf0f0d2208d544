r"""The warm worker's own per-call cost, timed inside the worker: no host, no other process in the way.

A real worker (``fork.worker.worker_main``, forked from this process) finds every frame of calls
already in its call pipe and writes its results into a pipe nobody reads until it is done, so what is
timed is its loop alone: take a frame, run each trivial call, send its result, put its state back.
The first and the last call of the run are a tool that returns ``time.monotonic()``, read in the
worker; per call = (last - first) / calls between them. ``--chunk`` calls go in each frame (the pool
sends quick calls in chunks of up to 64; a batch of 4 on 2 workers is chunks of 1 or 2).

One measurement, of the toolfork on ``sys.path``::

    PYTHONPATH=. python bench/worker_loop.py --chunk 64

Before and after a change, in one run, alternating rounds (``TREE`` holds a ``toolfork`` package: the
old one e.g. from ``git archive main | tar -x -C /tmp/before``)::

    python bench/worker_loop.py --compare /tmp/before . --rounds 21 --chunk 1,64

prints the median per-call cost of each tree, and its ratio to the first tree's, for each chunk size.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
from typing import Any

PIPE_SIZE = 1 << 20
F_SETPIPE_SZ = 1031


def measure(calls: int, chunk: int) -> float:
    """Seconds per call of a warm worker's loop, as the worker's own clock sees it."""
    import fcntl

    from toolfork import tool
    from toolfork.bench.calls import stamp_call, trivial_call
    try:
        from toolfork.executor.backends.base import WorkerSetup
    except ImportError:  # a tree from before the name: the same value, called Hooks
        from toolfork.executor.backends.base import Hooks as WorkerSetup  # type: ignore[attr-defined,no-redef]
    from toolfork.executor.backends.fork.worker import worker_main
    try:
        from toolfork.executor.wire import framing
    except ImportError:  # a tree from before the whole wire was under wire/
        from toolfork.executor import framing  # type: ignore[no-redef]

    try:
        from toolfork.executor.wire.frames import calls_frame
    except ImportError:  # a tree from before the wire package: the same frame, spelled out
        def calls_frame(items: list[Any]) -> tuple[Any, ...]:
            return ("c", items)

    echo, stamp = tool(name="trivial")(trivial_call), tool(name="stamp")(stamp_call)  # the tiny workload's call

    try:  # a call's fields where it runs (a tree from before the CallItem: five)
        from toolfork.executor.wire.callitem import FIELDS
        rest: tuple[None, ...] = (None,) * (len(FIELDS) - 3)
    except ImportError:
        rest = (None, None)
    items: list[Any] = [("first", "stamp", {"seconds": 0}, *rest)]
    items += [(f"c{i}", "trivial", {"x": i}, *rest) for i in range(calls)]
    items.append(("last", "stamp", {"seconds": 0}, *rest))
    items.append(("done", "done", {}, *rest))  # says the worker is through, on a pipe of its own
    done_r, done_w = os.pipe()

    def done_call() -> int:
        """Tell the bench the worker ran every call (the call pipe stays open until then)."""
        return os.write(done_w, b"x")

    done = tool(name="done")(done_call)
    call_r, call_w = os.pipe()
    result_r, result_w = os.pipe()
    for fd in (call_w, result_w):
        fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)
    data = b"".join(framing.encode(calls_frame(items[i : i + chunk])) for i in range(0, len(items), chunk))
    if len(data) > PIPE_SIZE:
        raise SystemExit(f"{calls} calls in chunks of {chunk} are {len(data)} bytes, over the pipe's {PIPE_SIZE}")
    framing.write_all(call_w, data)  # the call pipe stays open while the worker runs (a closed one shows
    # POLLHUP to the worker's look at its channels after each call, which a pool's worker never sees)
    host_side, worker_side = socket.socketpair()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        host_side.close()
        os.close(result_r)
        os.close(call_w)
        os.close(done_r)
        worker_main(call_r, result_w, worker_side.detach(), {"trivial": echo, "stamp": stamp, "done": done},
                    WorkerSetup(), parent)
    os.close(call_r)
    os.close(result_w)
    worker_side.close()
    os.close(done_w)
    os.read(done_r, 1)  # nothing read the results while the worker ran: no wake-up of ours on its path
    os.close(done_r)
    os.close(call_w)  # EOF: the worker leaves
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit(f"the worker exited with status {status}")
    reader = framing.FrameReader(result_r)
    os.set_blocking(result_r, False)
    got: list[Any] = []
    while not reader.eof:
        got += reader.read()
    ends = {"first": "first", "last": "last", 0: "first", len(items) - 2: "last"}  # by call id, or by seq
    stamps = {ends[f[1]]: f for f in got if f[1] in ends}
    if len(got) != len(items) or len(stamps) != 2:
        raise SystemExit(f"{len(got)} results for {len(items)} calls")
    first, last = (stamps[k][3] for k in ("first", "last"))  # a TEXT frame: ("o", seq, text, data, duration)
    return (last - first) / (calls + 1)


def compare(trees: list[str], rounds: int, calls: int, chunks: list[int]) -> None:
    """Alternate the trees round by round (each measurement a fresh process; the order turns every
    round) and print each one's median, and its ratio to the first tree's."""
    figures: dict[tuple[str, int], list[float]] = {}
    for r in range(rounds):
        for chunk in chunks:
            order = trees[r % len(trees):] + trees[: r % len(trees)]
            for tree in order if r % 2 == 0 else reversed(order):
                env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), PYTHONDONTWRITEBYTECODE="1")
                out = subprocess.run([sys.executable, __file__, "--calls", str(calls), "--chunk", str(chunk)],
                                     env=env, check=True, capture_output=True, text=True).stdout
                figures.setdefault((tree, chunk), []).append(float(out))
    for chunk in chunks:
        base = statistics.median(figures[trees[0], chunk])
        for tree in trees:
            m = statistics.median(figures[tree, chunk])
            print(f"chunk {chunk:3d}  {tree:30s} {m * 1e6:7.2f} us/call  x{m / base:.3f} of {trees[0]} "
                  f"(median of {rounds})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=4000)
    p.add_argument("--chunk", default="64", help="calls per frame; with --compare a comma-separated list")
    p.add_argument("--compare", nargs="+", metavar="TREE", help="two or more trees, the first the reference")
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args()
    chunks = [int(c) for c in args.chunk.split(",")]
    if args.compare:
        compare(args.compare, args.rounds, args.calls, chunks)
    else:
        print(measure(args.calls, chunks[0]))


if __name__ == "__main__":
    main()
