"""smolagents' CodeAgent on three executors, and the code interpreter's own goals, in one run.

Part 1, episodes: N episodes of a scripted CodeAgent (a smolagents ``Model`` that answers with fixed
code actions, so no key and no network), each CELLS code actions then ``final_answer``, through:
- ``local``: smolagents' LocalPythonExecutor (its AST interpreter, in this process; no boundary);
- ``docker``: smolagents' DockerExecutor where a Docker engine answers (else the row says why not);
- ``toolfork``: ToolforkExecutor, one sandboxed session per episode on one shared Executor.
Each episode builds its executor (its session, for toolfork), runs the agent and cleans up. Printed:
ms per episode and per code action (medians), and each row's ratio to ``local``. Then the same N
episodes on toolfork AT_ONCE at a time (threads, one shared Executor): wall time per episode.

Part 2, the interpreter's goals (medians of many, one at a time):
- open: ``PythonInterpreter.open`` on a warm executor (a sandboxed session with its checkpoint), each
  0.2 s after the last closed, so a spare is ready (each episode has a workspace of its own);
- trivial cell: ``run_cell("x = 1")`` against ``Kernel.run("x = 1")`` in this process; the overhead is
  the difference (with the checkpoint, as the interpreter runs, and without), after a model's pause
  between cells (the checkpoint is taken in it) and back to back;
- rollback: a cell that loops past its timeout, then the next cell: the time beyond the timeout until
  the timed-out cell's error is back, and until the next cell's result is back.

Part 3 (``--wake``), where a pause's cost goes: a pipe round trip between two processes after a pause
and back to back, and ``Kernel.run("x = 1")`` in this process after a sleep and after a busy wait of
the same length (this CPU never idles): how much of a pause's cost is the wake-up itself, and how much
a CPU that comes back from idle cold (run it idle and with both CPUs kept busy).

Usage: PYTHONPATH=. python bench/code_agent.py [EPISODES] [--goals] [--wake]   (either: that part only)
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from smolagents import CodeAgent
from smolagents.models import ChatMessage, MessageRole, Model
from smolagents.monitoring import AgentLogger, LogLevel

from toolfork.adapters.smolagents import ToolforkExecutor
from toolfork.executor import Executor
from toolfork.toolkits import PythonInterpreter
from toolfork.toolkits.interpreter_kernel import Kernel

CELLS = ["rows = [i * i for i in range(200)]", "total = sum(rows)\nprint(total)",
         "import statistics\nmean = statistics.mean(rows)", "final_answer(total + mean)"]
REPEAT = 200  # samples for the goals
AT_ONCE = 16  # episodes side by side in the concurrent row
MODEL_PAUSE = 0.05  # seconds between cells in the "after a model's pause" sample (a model call takes longer)


class ScriptedCode(Model):
    """Answers with the next of its code actions, one per step."""

    def __init__(self, actions: list[str]) -> None:
        super().__init__(model_id="scripted")
        self.actions = list(actions)

    def generate(self, messages: list[Any], stop_sequences: list[str] | None = None, **kwargs: Any) -> ChatMessage:
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Thought: go.\n<code>\n{self.actions.pop(0)}\n</code>")


class Timed:
    """An executor's ``__call__`` timed, code action by code action."""

    def __init__(self, inner: Any, times: list[float]) -> None:
        self.inner, self.times = inner, times

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __call__(self, code: str) -> Any:
        start = time.perf_counter()
        try:
            return self.inner(code)
        finally:
            self.times.append(time.perf_counter() - start)


def logger() -> AgentLogger:
    return AgentLogger(LogLevel.OFF, Console(force_terminal=False, file=io.StringIO()))


def episodes(n: int, make: Callable[[], Any] | None) -> tuple[list[float], list[float]]:
    """(seconds per episode, seconds per code action) for ``n`` episodes; ``make`` builds an executor
    (None: CodeAgent's local one)."""
    per_episode: list[float] = []
    per_action: list[float] = []
    for _ in range(n):
        start = time.perf_counter()
        agent = CodeAgent(tools=[], model=ScriptedCode(CELLS), max_steps=len(CELLS) + 1, verbosity_level=LogLevel.OFF,
                          **({} if make is None else {"executor": make()}))
        agent.python_executor = Timed(agent.python_executor, per_action)
        try:
            answer = agent.run("sum the squares")
        finally:
            agent.cleanup()
        per_episode.append(time.perf_counter() - start)
        total = sum(i * i for i in range(200))
        if answer != total + total / 200:
            raise RuntimeError(f"a wrong final answer: {answer!r}")
    return per_episode, per_action


def docker_refusal() -> str | None:
    """Why the Docker row cannot run here (None: it can)."""
    if shutil.which("docker") is None:
        return "no docker command"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return "no Docker engine answers (docker info timed out)"
    if info.returncode != 0:
        said = ascii(info.stderr.decode(errors="replace").strip()[-120:])  # another program's text: escaped
        return f"no Docker engine answers (docker info: {said})"
    try:
        import docker  # noqa: F401  (smolagents' DockerExecutor needs the SDK: pip install 'smolagents[docker]')
    except ModuleNotFoundError:
        return "a Docker engine answers but the docker SDK is not installed (pip install 'smolagents[docker]')"
    return None


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


@contextlib.contextmanager
def in_process_kernel() -> Iterator[Kernel]:
    """A kernel in this process, in a scratch workspace: what a cell costs with no session around it."""
    here = tempfile.mkdtemp(prefix="toolfork-bench-kernel-")
    cwd = os.getcwd()
    try:
        yield Kernel(here)
    finally:
        os.chdir(cwd)
        shutil.rmtree(here, ignore_errors=True)


def median_of(fn: Callable[[], Any], n: int = REPEAT, pause: float = 0.0) -> float:
    samples = []
    for _ in range(n):
        time.sleep(pause)  # not counted: a model's turn between cells
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def goals() -> None:
    interp = PythonInterpreter(timeout=10)
    with Executor(interp, workers=1) as ex:
        with interp.open(ex):
            pass  # the first session starts what later ones reuse
        opens = []
        for _ in range(40):
            time.sleep(0.2)  # not counted: the spare the last open asked for enters its sandbox meanwhile
            start = time.perf_counter()
            s = interp.open(ex)
            opens.append(time.perf_counter() - start)
            s.close()
        print(f"open an interpreter session (sandboxed, checkpoint): median {ms(statistics.median(opens))} ms, "
              f"p90 {ms(sorted(opens)[int(len(opens) * 0.9)])} ms  (goal: at most 2 ms)")

        with in_process_kernel() as kernel:
            local = median_of(lambda: kernel.run("x = 1"))
            local_paused = median_of(lambda: kernel.run("x = 1"), REPEAT // 4, MODEL_PAUSE)
        with interp.open(ex) as s:
            cell = median_of(lambda: s.run_cell("x = 1"))
            paused = median_of(lambda: s.run_cell("x = 1"), REPEAT // 4, MODEL_PAUSE)
        print(f"trivial cell after a model's pause ({MODEL_PAUSE:g} s, not counted): in-process {ms(local_paused)} "
              f"ms, in the sandboxed session {ms(paused)} ms: overhead {ms(paused - local_paused)} ms  "
              "(goal: at most 1 ms)")
        print(f"trivial cell back to back: in-process {ms(local)} ms, in the sandboxed session {ms(cell)} ms: "
              f"overhead {ms(cell - local)} ms")
        with PythonInterpreter(timeout=10, sandbox=False).open(ex) as plain:
            unsandboxed = median_of(lambda: plain.run_cell("x = 1"))
        where = tempfile.mkdtemp(prefix="toolfork-bench-kernel-")
        try:
            with ex.session(Kernel, where, limits=interp.limits(where), checkpoint=False) as bare:
                call = [{"id": "c", "name": "python", "arguments": {"code": "x = 1"}}]
                no_checkpoint = median_of(lambda: bare.run(call))
        finally:
            shutil.rmtree(where, ignore_errors=True)
        print(f"  the same cell: sandboxed without a checkpoint {ms(no_checkpoint)} ms; unsandboxed with a checkpoint "
              f"{ms(unsandboxed)} ms")

        timeout = 0.2
        beyond, next_cell = [], []
        with interp.open(ex) as s:
            s.run_cell("x = 1")
            for _ in range(10):
                start = time.perf_counter()
                r = s.run_cell("while True:\n    pass", timeout=timeout)
                back = time.perf_counter()
                after = s.run_cell("x")
                done = time.perf_counter()
                if r.status != "timeout" or after.output.data["value"] != "1":
                    raise RuntimeError(f"no rollback: {r.status}, {after.output.data}")
                beyond.append(back - start - timeout)
                next_cell.append(done - start - timeout)
        print(f"rollback after a cell timed out at {timeout} s: its error back {ms(statistics.median(beyond))} ms "
              f"beyond the timeout, the next cell's result {ms(statistics.median(next_cell))} ms beyond it "
              "(goal: at most 5 ms)")


def wake() -> None:
    def busy(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    there, back = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:  # echoes each byte until EOF
        os.close(there[1])
        os.close(back[0])
        while os.read(there[0], 1):
            os.write(back[1], b"x")
        os._exit(0)
    os.close(there[0])
    os.close(back[1])

    def round_trip() -> None:
        os.write(there[1], b"x")
        select.select([back[0]], [], [])
        os.read(back[0], 1)

    try:
        paused, hot = median_of(round_trip, REPEAT // 4, MODEL_PAUSE), median_of(round_trip)
    finally:
        os.close(there[1])
        os.close(back[0])
        os.waitpid(pid, 0)
    print(f"pipe round trip between two processes: after a {MODEL_PAUSE:g} s pause {ms(paused)} ms, "
          f"back to back {ms(hot)} ms")
    with in_process_kernel() as kernel:
        slept = median_of(lambda: kernel.run("x = 1"), REPEAT // 4, MODEL_PAUSE)
        spun = []
        for _ in range(REPEAT // 4):
            busy(MODEL_PAUSE)
            start = time.perf_counter()
            kernel.run("x = 1")
            spun.append(time.perf_counter() - start)
        hot = median_of(lambda: kernel.run("x = 1"))
    print(f"trivial cell in-process: after a {MODEL_PAUSE:g} s sleep {ms(slept)} ms, after a busy wait as long "
          f"{ms(statistics.median(spun))} ms, back to back {ms(hot)} ms")


def main() -> None:
    args = [a for a in sys.argv[1:] if a not in ("--goals", "--wake")]
    if "--goals" in sys.argv[1:] or "--wake" in sys.argv[1:]:
        if "--wake" in sys.argv[1:]:
            wake()
        if "--goals" in sys.argv[1:]:
            goals()
        return
    n = int(args[0]) if args else 20
    print(f"{n} episodes of {len(CELLS)} code actions, one at a time (medians)")
    rows: dict[str, tuple[list[float], list[float]] | str] = {"local": episodes(n, None)}
    refusal = docker_refusal()
    if refusal is None:
        from smolagents.remote_executors import DockerExecutor

        rows["docker"] = episodes(n, lambda: DockerExecutor([], logger()))
    else:
        rows["docker"] = f"skipped: {refusal}"
    with Executor([], workers=1) as shared:
        rows["toolfork"] = episodes(n, lambda: ToolforkExecutor([], logger(), executor=shared))
    base = rows["local"]
    assert not isinstance(base, str)
    print(f"{'executor':<10} {'ms/episode':>11} {'ms/action':>10} {'episode x local':>16} {'action x local':>15}")
    for name, row in rows.items():
        if isinstance(row, str):
            print(f"{name:<10} {row}")
            continue
        ep, act = statistics.median(row[0]), statistics.median(row[1])
        ratio_ep, ratio_act = ep / statistics.median(base[0]), act / statistics.median(base[1])
        print(f"{name:<10} {ms(ep):>11} {ms(act):>10} {ratio_ep:>15.2f}x {ratio_act:>14.2f}x")
    with Executor([], workers=1, max_sessions=AT_ONCE) as shared:
        from concurrent.futures import ThreadPoolExecutor

        start = time.perf_counter()
        with ThreadPoolExecutor(AT_ONCE) as pool:
            list(pool.map(lambda _: episodes(1, lambda: ToolforkExecutor([], logger(), executor=shared)), range(n)))
        wall = (time.perf_counter() - start) / n
    print(f"toolfork, {AT_ONCE} episodes at once: {ms(wall)} ms of wall time per episode "
          f"({statistics.median(rows['toolfork'][0]) / wall:.2f}x the one-at-a-time rate)")  # type: ignore[index]
    print()
    goals()


if __name__ == "__main__":
    main()
