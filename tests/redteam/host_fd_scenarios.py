"""What the processes toolfork forks hold of the host's descriptors, and a tool that ransacks every
descriptor it holds, run in a fresh interpreter (as root, or as nobody under ``setpriv``) by
``test_host_descriptors.py``; prints one JSON line of what it saw.

    python -m tests.redteam.host_fd_scenarios WORKDIR
    python -m tests.redteam.host_fd_scenarios --in-loop

The host here is what a busy one looks like when a process is forked: two pools, a future in flight
(``submit``'s wake-up pipe), a session open, and one pool's template replaced after a tool killed it
(the replacement is forked from the host as it is then). The user's own file, opened before any of it,
is every process's, as in any fork; nothing else of the host's may be.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tests.procs import descendants
from toolfork import tool
from toolfork.executor import Executor, ToolCall
from toolfork.tools.runtime import ToolRuntime

BOUND_S = 60.0  # a bound on each wait, not a timing
O_CLOEXEC = 0o2000000


class Tally:
    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.n = 0


@tool
def echo(text: str) -> str:
    """Say it back.

    Args:
        text: what to say
    """
    return text


@tool
def bump(runtime: ToolRuntime) -> str:
    """Count one more in the session's state; says whose and how many."""
    runtime.state.n += 1
    return f"{runtime.state.owner}:{runtime.state.n}"


@tool
def end_template() -> str:
    """SIGKILL this worker's parent (the pool's template)."""
    os.kill(os.getppid(), signal.SIGKILL)
    return "sent"


@tool
def ransack(seconds: float) -> list[str]:
    """For ``seconds``, over and over, descriptor 0 and every one above 2 this process holds: read what it
    can (a wake-up byte or an input line stolen is lost to the host; its own pipes have nothing to read
    meanwhile) and put a
    readable pipe of its own into any epoll (the host would be told of readiness for ever). Then write
    a wake-up byte, a well-formed frame's header and junk into each, and close them all. Returns what
    the descriptors named."""
    mine_r, mine_w = os.pipe()
    os.write(mine_w, b"!")
    named: dict[int, str] = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd in (1, 2, mine_r, mine_w):
                continue
            try:
                named.setdefault(fd, os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                continue
            if "eventpoll" in named[fd]:
                try:
                    select.epoll.fromfd(os.dup(fd)).register(mine_r, select.EPOLLIN)
                except OSError:
                    pass
                continue
            try:
                if os.get_blocking(fd):
                    os.set_blocking(fd, False)
                os.read(fd, 1 << 16)
            except OSError:
                pass
        time.sleep(0.001)
    for fd in [fd for fd in named if fd > 2]:
        for junk in (b"!", (1 << 20).to_bytes(8, "little"), b"\xff\x00junk" * 16):
            try:
                os.write(fd, junk)
            except OSError:
                pass
        try:
            os.close(fd)
        except OSError:
            pass
    return sorted(set(named.values()))


TOOLS = [echo, bump, end_template, ransack]


def fds_of(pid: int | str) -> dict[int, str]:
    """Descriptor -> what it names, of a process (``self`` for this one)."""
    out = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
    return out


def cloexec(pid: int, fd: int) -> bool:
    with open(f"/proc/{pid}/fdinfo/{fd}") as f:
        flags = next(line for line in f if line.startswith("flags:"))
    return bool(int(flags.split()[1], 8) & O_CLOEXEC)


def _replace_template(ex: Executor) -> None:
    first = ex.backend.template_pid  # type: ignore[attr-defined]
    ex.run([ToolCall("k", "end_template", {})])
    end = time.monotonic() + BOUND_S
    while True:
        assert time.monotonic() < end, "the template was not replaced"
        result = ex.run([ToolCall("probe", "echo", {"text": "up"})])[0]
        now = ex.backend.template_pid  # type: ignore[attr-defined]
        if result.status == "ok" and now not in (None, first):
            return
        time.sleep(0.05)


def inventory(baseline: dict[int, str], workers: list[int], sessions: list[int]) -> dict[str, Any]:
    """What every process below this one holds that is not the user's (``baseline``): the host's own
    descriptors (those it opened since) may be held only as one other process's channel."""
    host = {fd: name for fd, name in fds_of("self").items() if baseline.get(fd) != name}
    host_pipes = {name for name in host.values() if name.startswith("pipe:")}
    host_sockets = {name for name in host.values() if name.startswith("socket:")}
    holders: dict[str, list[int]] = {}
    wrong: list[str] = []
    for pid in descendants():
        try:
            held = fds_of(pid)
        except OSError:  # gone meanwhile (a spare let go)
            continue
        for fd, name in held.items():
            if fd < 3 or baseline.get(fd) == name:
                continue
            if "eventpoll" in name:
                wrong.append(f"pid {pid} fd {fd}: an epoll ({name})")
            elif name in host_sockets:
                wrong.append(f"pid {pid} fd {fd}: the host's own end of {name}")
            elif name in host_pipes:
                holders.setdefault(name, []).append(pid)
            elif not name.startswith(("pipe:", "socket:")):
                wrong.append(f"pid {pid} fd {fd}: {name}")
        if held.get(0) != "/dev/null":  # the host's stdin is the host's
            wrong.append(f"pid {pid} fd 0: {held.get(0)}")
    wrong += [f"{name} is held by {len(set(pids))} processes besides the host: {sorted(set(pids))}"
              for name, pids in holders.items() if len(set(pids)) > 1]
    own: dict[str, list[str]] = {}
    for kind, pids, want in (("worker", workers, ["pipe", "pipe", "socket"]),
                             ("session", sessions, ["pipe", "pipe", "socket", "socket"])):
        for pid in pids:
            held = fds_of(pid)
            extra = {fd: name for fd, name in held.items() if fd > 2 and baseline.get(fd) != name}
            kinds = sorted(name.split(":")[0] for name in extra.values())
            if kinds != want:
                wrong.append(f"{kind} {pid} holds {sorted(extra.values())}, not its {len(want)} channels")
            wrong += [f"{kind} {pid} fd {fd} ({name}) is inherited by what it runs"
                      for fd, name in extra.items() if not cloexec(pid, fd)]
            lost = [name for fd, name in baseline.items() if fd > 2 and held.get(fd) != name]
            if lost:
                wrong.append(f"{kind} {pid} lost the user's {lost}")
            own[f"{kind} {pid}"] = sorted(extra.values())
    return {"wrong": wrong, "host": sorted(host.values()), "own": own}


def main(work: Path) -> dict[str, Any]:
    user_file = open(work / f"user-{os.getpid()}.log", "w")  # the user's: open all along
    baseline = fds_of("self")
    out: dict[str, Any] = {}
    with Executor(TOOLS, mode="fork", workers=2) as ex_a, Executor(TOOLS, mode="fork", workers=1) as ex_b:
        assert ex_a.submit(ToolCall("f0", "echo", {"text": "f0"})).result().output.as_text() == "f0"
        with ex_a.session(Tally, "ada") as ada:
            out["ada"] = ada.run([ToolCall("b0", "bump", {})])[0].output.as_text()
            _replace_template(ex_a)  # forked now: the host holds both pools, the future's pipe, a session
            with ex_a.session(Tally, "bob") as bob:
                out["bob"] = bob.run([ToolCall("b1", "bump", {})])[0].output.as_text()
                workers = [*ex_a.backend.worker_pids, *ex_b.backend.worker_pids]  # type: ignore[attr-defined]
                out["seen"] = inventory(baseline, workers, [bob.pid] if bob.pid else [])
                # The attack: tools of both pools and of a session ransack what they hold while the
                # host runs futures and batches on pool A.
                hostile = [ex_a.submit(ToolCall("h-a", "ransack", {"seconds": 1.5})),
                           ex_b.submit(ToolCall("h-b", "ransack", {"seconds": 1.5}))]
                with ex_a.session(Tally, "cy") as cy:
                    futures = [ex_a.submit(ToolCall(f"f{i}", "echo", {"text": f"f{i}"})) for i in range(1, 21)]
                    batch = ex_a.run([ToolCall(f"r{i}", "echo", {"text": f"r{i}"}) for i in range(10)])
                    in_session = bob.run([ToolCall("h-s", "ransack", {"seconds": 1.0})])[0]
                    out["cy"] = [cy.run([ToolCall(f"c{i}", "bump", {})])[0].output.as_text() for i in range(2)]
                out["futures"] = [f.result(timeout=BOUND_S).output.as_text() for f in futures]
                out["batch"] = [r.output.as_text() if r.status == "ok" else r.status for r in batch]
                out["hostile"] = [f.result(timeout=BOUND_S).status for f in hostile] + [in_session.status]
                out["after"] = [r.output.as_text() if r.status == "ok" else r.status for r in [
                    *ex_a.run([ToolCall("a1", "echo", {"text": "a1"})]),
                    *ex_b.run([ToolCall("b1", "echo", {"text": "b1"})])]]
            out["ada_after"] = ada.run([ToolCall("b2", "bump", {})])[0].status  # its template was killed
        out["user_file_open"] = not user_file.closed and os.fstat(user_file.fileno()).st_nlink == 1
    user_file.close()
    os.set_blocking(0, True)
    out["stdin"] = os.read(0, 1 << 10).decode()  # what the host's stdin held: all of it, still there
    end = time.monotonic() + BOUND_S
    while descendants() and time.monotonic() < end:
        time.sleep(0.05)
    out["left"] = descendants()
    return out


def in_loop() -> dict[str, Any]:
    """An Executor made inside ``async`` code: the loop's epoll and self-pipe (a wake-up stolen there is
    a loop that sleeps through a result) are in no process below, while a tool ransacks what it holds
    and the host awaits calls."""
    import asyncio

    async def run() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        own = {os.readlink(f"/proc/self/fd/{s.fileno()}") for s in (loop._ssock, loop._csock)}  # type: ignore[attr-defined]
        out: dict[str, Any] = {}
        with Executor(TOOLS, mode="fork", workers=2) as ex:
            held = []
            for pid in descendants():
                for fd, name in fds_of(pid).items():
                    if name in own or "eventpoll" in name:
                        held.append(f"pid {pid} fd {fd}: {name}")
            out["held"] = held
            hostile = asyncio.ensure_future(ex.arun([ToolCall("h", "ransack", {"seconds": 1.5})]))
            got = await asyncio.gather(*[ex.arun([ToolCall(f"a{i}", "echo", {"text": f"a{i}"})]) for i in range(20)])
            out["awaited"] = [r[0].output.as_text() if r[0].status == "ok" else r[0].status for r in got]
            out["hostile"] = (await hostile)[0].status
        return out

    out = asyncio.run(run())
    end = time.monotonic() + BOUND_S
    while descendants() and time.monotonic() < end:
        time.sleep(0.05)
    out["left"] = descendants()
    return out


if __name__ == "__main__":
    print(json.dumps(in_loop() if sys.argv[1] == "--in-loop" else main(Path(sys.argv[1]))))
