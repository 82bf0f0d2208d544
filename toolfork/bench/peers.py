"""The executors the benchmark compares, each behind one small adapter.

Every adapter uses its library the way that library's documentation recommends: a warm pool made once
per workload, the library's own per-task timeout where it has one (pebble's ``timeout=``, Ray's
``ray.cancel(force=True)``), else the documented way to stop waiting (``future.result(timeout)``,
``AsyncResult.get(timeout)``), which abandons the call but leaves it running. Heavy libraries are
imported inside the adapters, so listing peers costs nothing and a missing one is just "n/a".

The adapters report plain outcomes (status ok/error/timeout/crashed/cancelled, the value, an error
text) in call order; the workloads in ``workloads.py`` turn batches of outcomes into figures.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import importlib.util
import itertools
import logging
import math
import os
import pickle
import selectors
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from toolfork.bench.base import Outcome, Peer, Task, exc_text
from toolfork.bench.calls import FUNCTIONS, toolfork_tools
from toolfork.bench.peer_mpire import MpirePeer
from toolfork.bench.procs import exit_text
from toolfork.bench.user_calls import user_tools
from toolfork.executor.wire import write_all

# The headline workloads (the executor's targets): what --quick keeps for slow-starting executors.
QUICK_HEADLINE: tuple[str, ...] = ("io", "small", "tiny", "hang", "crash")


def _collect_futures(
    futures: Sequence[Any],
    tasks: Sequence[Task],
    submitted_at: float,
    classify: Callable[[BaseException], str],
    wait_for_timeout: bool = True,
) -> list[Outcome]:
    """Results of concurrent.futures-style futures in call order.

    With ``wait_for_timeout`` the task's timeout bounds the wait (``future.result(timeout)``, the
    documented way for executors without their own timeout); the deadline counts from submission
    because the caller cannot see when a queued call really started.
    """
    outcomes: list[Outcome] = []
    for fut, task in zip(futures, tasks, strict=True):
        wait: float | None = None
        if wait_for_timeout and task.timeout is not None:
            wait = max(0.0, submitted_at + task.timeout - time.monotonic())
        try:
            outcomes.append(Outcome("ok", fut.result(timeout=wait)))
        except BaseException as exc:
            if isinstance(exc, (cf.TimeoutError, TimeoutError)) and not fut.done():
                fut.cancel()
            outcomes.append(Outcome(classify(exc), error=exc_text(exc)))
    return outcomes


def _future_outcome(future: Any, classify: Callable[[BaseException], str]) -> Outcome:
    """The outcome of one concurrent.futures-style future, waited for without a limit."""
    try:
        return Outcome("ok", future.result())
    except BaseException as exc:
        return Outcome(classify(exc), error=exc_text(exc))


class ThreadsPeer(Peer):
    name = "threads"
    description = "concurrent.futures.ThreadPoolExecutor"
    timeout_support = "abandon"
    in_process = True
    concurrent_callers = True

    def start(self) -> None:
        self.pool = cf.ThreadPoolExecutor(max_workers=self.workers)

    def submit_one(self, task: Task) -> Any:
        return self.pool.submit(FUNCTIONS[task.fn], **task.kwargs)

    def result_one(self, handle: Any) -> Outcome:
        return _future_outcome(handle, _classify_std)

    def run(self, tasks: Sequence[Task]) -> list[Outcome]:
        t0 = time.monotonic()
        futures = [self.pool.submit(FUNCTIONS[t.fn], **t.kwargs) for t in tasks]
        return _collect_futures(futures, tasks, t0, _classify_std)

    def close(self) -> None:
        # wait=False: a thread stuck in a hung call can never be joined.
        self.pool.shutdown(wait=False, cancel_futures=True)


def _classify_std(exc: BaseException) -> str:
    from concurrent.futures.process import BrokenProcessPool

    if isinstance(exc, (cf.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, BrokenProcessPool):
        return "crashed"
    if isinstance(exc, cf.CancelledError):
        return "cancelled"
    return "error"


def _submit_each(pool: Any, tasks: Sequence[Task]) -> list[cf.Future[Any]]:
    """Submit every task; one a broken pool refuses gets a future holding the refusal, so it is
    counted like any failed call instead of aborting the batch."""
    futures: list[cf.Future[Any]] = []
    for t in tasks:
        try:
            futures.append(pool.submit(FUNCTIONS[t.fn], **t.kwargs))
        except Exception as exc:
            failed: cf.Future[Any] = cf.Future()
            failed.set_exception(exc)
            futures.append(failed)
    return futures


class ProcessPoolPeer(Peer):
    name = "process-pool"
    description = "concurrent.futures.ProcessPoolExecutor (fork context)"
    timeout_support = "abandon"
    concurrent_callers = True

    def start(self) -> None:
        import multiprocessing

        self.pool = cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("fork"))

    def submit_one(self, task: Task) -> Any:
        return self.pool.submit(FUNCTIONS[task.fn], **task.kwargs)

    def result_one(self, handle: Any) -> Outcome:
        return _future_outcome(handle, _classify_std)

    def run(self, tasks: Sequence[Task]) -> list[Outcome]:
        t0 = time.monotonic()
        futures = _submit_each(self.pool, tasks)
        return _collect_futures(futures, tasks, t0, _classify_std)

    def close(self) -> None:
        # wait=True would block forever on a worker stuck in a hung call; the documented way out is
        # not to wait, which leaves that worker behind (the hang workload counts it).
        self.pool.shutdown(wait=False, cancel_futures=True)


class MultiprocessPoolPeer(Peer):
    name = "multiprocess"
    description = "multiprocess.Pool (dill)"
    timeout_support = "abandon"
    requires = ("multiprocess",)
    concurrent_callers = True

    def start(self) -> None:
        import multiprocess

        self.pool = multiprocess.Pool(processes=self.workers)

    def submit_one(self, task: Task) -> Any:
        return self.pool.apply_async(FUNCTIONS[task.fn], kwds=task.kwargs)

    def result_one(self, handle: Any) -> Outcome:
        try:
            return Outcome("ok", handle.get())
        except Exception as exc:
            return Outcome("error", error=exc_text(exc))

    def run(self, tasks: Sequence[Task]) -> list[Outcome]:
        import multiprocess

        t0 = time.monotonic()
        pending = [self.pool.apply_async(FUNCTIONS[t.fn], kwds=t.kwargs) for t in tasks]
        outcomes: list[Outcome] = []
        for res, task in zip(pending, tasks, strict=True):
            wait = None if task.timeout is None else max(0.0, t0 + task.timeout - time.monotonic())
            try:
                outcomes.append(Outcome("ok", res.get(timeout=wait)))
            except multiprocess.TimeoutError as exc:
                outcomes.append(Outcome("timeout", error=exc_text(exc)))
            except Exception as exc:
                outcomes.append(Outcome("error", error=exc_text(exc)))
        return outcomes

    def close(self) -> None:
        # What `with Pool() as pool:` does on exit.
        self.pool.terminate()
        self.pool.join()


class PebblePeer(Peer):
    name = "pebble"
    description = "pebble.ProcessPool with its per-task timeout"
    timeout_support = "kill"
    requires = ("pebble",)
    concurrent_callers = True

    def start(self) -> None:
        import pebble

        self.pool = pebble.ProcessPool(max_workers=self.workers)

    def submit_one(self, task: Task) -> Any:
        return self.pool.schedule(FUNCTIONS[task.fn], kwargs=task.kwargs, timeout=task.timeout)

    def result_one(self, handle: Any) -> Outcome:
        return _future_outcome(handle, _classify_pebble)

    def run(self, tasks: Sequence[Task]) -> list[Outcome]:
        t0 = time.monotonic()
        futures = [self.pool.schedule(FUNCTIONS[t.fn], kwargs=t.kwargs, timeout=t.timeout) for t in tasks]
        return _collect_futures(futures, tasks, t0, _classify_pebble, wait_for_timeout=False)

    def close(self) -> None:
        # What `with ProcessPool() as pool:` does on exit.
        self.pool.close()
        self.pool.join()


def _classify_pebble(exc: BaseException) -> str:
    import pebble

    if isinstance(exc, (cf.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, pebble.ProcessExpired):
        return "crashed"
    if isinstance(exc, cf.CancelledError):
        return "cancelled"
    return "error"


class LokyPeer(Peer):
    name = "loky"
    description = "loky.get_reusable_executor"
    timeout_support = "abandon"
    concurrent_callers = True
    requires = ("loky",)
    _owner: int  # the thread that started the pool
    _shared: Any  # the executor that thread got last

    def _executor(self) -> Any:
        from loky import get_reusable_executor

        if threading.get_ident() != self._owner:
            # loky keeps its reusable executor per thread: asked for from another thread, it would
            # start a second pool of `workers` processes. Callers on other threads share this pool.
            return self._shared
        # The documented pattern: ask for the reusable executor each time; loky hands back the live
        # one, or a fresh one when the previous one broke.
        self._shared = get_reusable_executor(max_workers=self.workers, timeout=600)
        return self._shared

    def start(self) -> None:
        self._owner = threading.get_ident()
        self._executor()

    def submit_one(self, task: Task) -> Any:
        return self._executor().submit(FUNCTIONS[task.fn], **task.kwargs)

    def result_one(self, handle: Any) -> Outcome:
        return _future_outcome(handle, _classify_loky)

    def run(self, tasks: Sequence[Task]) -> list[Outcome]:
        t0 = time.monotonic()
        futures = _submit_each(self._executor(), tasks)
        return _collect_futures(futures, tasks, t0, _classify_loky)

    def close(self) -> None:
        self._executor().shutdown(wait=True, kill_workers=True)


def _classify_loky(exc: BaseException) -> str:
    from loky.process_executor import BrokenProcessPool, TerminatedWorkerError

    if isinstance(exc, (TerminatedWorkerError, BrokenProcessPool)):
        return "crashed"
    return _classify_std(exc)


class ForkPerCallPeer(Peer):
    """spatie/fork's model in Python: each call in a freshly forked child, its result sent back on a
    pipe, at most ``workers`` children at a time, results in call order. spatie/fork has no timeout,
    so neither has this. It has no per-call API either: a single call is a batch of one (the default
    ``submit_one``). Called from several threads at once, each batch keeps its own limit of
    ``workers`` children, and a child forked by one thread inherits (until it exits) the pipe ends
    another thread had open at that moment: that is what this model does with concurrent callers."""

    name = "fork-per-call"
    description = "os.fork per call, result on a pipe (spatie/fork style)"
    timeout_support = "none"
    concurrent_callers = True
    fresh_process = "every call"

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def run(self, tasks: Sequence[Task]) -> list[Outcome]:
        outcomes: list[Outcome | None] = [None] * len(tasks)
        pending = deque(enumerate(tasks))
        running: dict[int, tuple[int, int, list[bytes]]] = {}  # read fd -> (index, pid, chunks)
        sel = selectors.DefaultSelector()
        try:
            while pending or running:
                while pending and len(running) < self.workers:
                    index, task = pending.popleft()
                    fd, pid = _fork_call(task)
                    running[fd] = (index, pid, [])
                    sel.register(fd, selectors.EVENT_READ)
                for key, _ in sel.select():
                    fd = int(key.fd)
                    chunk = os.read(fd, 1 << 20)
                    if chunk:
                        running[fd][2].append(chunk)
                        continue
                    sel.unregister(fd)
                    os.close(fd)
                    index, pid, chunks = running.pop(fd)
                    outcomes[index] = _reap_fork(pid, chunks)
        finally:
            sel.close()
        return [o if o is not None else Outcome("error", error="lost") for o in outcomes]


def _fork_call(task: Task) -> tuple[int, int]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: run, send, leave without running the host's atexit handlers
        code = 0
        try:
            os.close(r)
            try:
                data = pickle.dumps(("ok", FUNCTIONS[task.fn](**task.kwargs)), pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:
                data = pickle.dumps(("error", exc_text(exc)), pickle.HIGHEST_PROTOCOL)
            write_all(w, data)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(w)
    return r, pid


def _reap_fork(pid: int, chunks: list[bytes]) -> Outcome:
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0 and chunks:
        kind, value = pickle.loads(b"".join(chunks))
        return Outcome("ok", value) if kind == "ok" else Outcome("error", error=value)
    return Outcome("crashed", error=exit_text(code))


class RayPeer(Peer):
    """Ray tasks on a local instance (``ray.init(num_cpus=2)``). Each task asks for
    ``num_cpus=2/workers`` so that ``workers`` of them run at once; ``max_retries=0`` because a tool
    call has side effects and the other executors do not retry either. A timeout is
    ``ray.get(timeout=)`` followed by ``ray.cancel(force=True)``, which kills the worker."""

    name = "ray"
    description = "Ray tasks, local instance"
    timeout_support = "kill"
    shared_processes = True
    limit_factor = 3.0
    quick_workloads = QUICK_HEADLINE
    requires = ("ray",)
    concurrent_callers = True  # a Ray driver may submit and get from several threads
    _remote: ClassVar[dict[str, Any]] = {}

    @classmethod
    def setup_session(cls) -> None:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        cls._remote = {name: ray.remote(fn) for name, fn in FUNCTIONS.items()}

    @classmethod
    def teardown_session(cls) -> None:
        import ray

        ray.shutdown()

    def start(self) -> None:
        self.options = {"num_cpus": math.floor(2 / self.workers * 10000) / 10000, "max_retries": 0}

    def close(self) -> None:
        pass

    def submit_one(self, task: Task) -> Any:
        return self._remote[task.fn].options(**self.options).remote(**task.kwargs)

    def result_one(self, handle: Any) -> Outcome:
        import ray

        try:
            return Outcome("ok", ray.get(handle))
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as exc:
            return Outcome("crashed", error=exc_text(exc))
        except Exception as exc:
            return Outcome("error", error=exc_text(exc))

    def run(self, tasks: Sequence[Task]) -> list[Outcome]:
        import ray

        t0 = time.monotonic()
        refs = [self._remote[t.fn].options(**self.options).remote(**t.kwargs) for t in tasks]
        outcomes: list[Outcome] = []
        for ref, task in zip(refs, tasks, strict=True):
            wait = None if task.timeout is None else max(0.0, t0 + task.timeout - time.monotonic())
            try:
                outcomes.append(Outcome("ok", ray.get(ref, timeout=wait)))
            except ray.exceptions.GetTimeoutError as exc:
                ray.cancel(ref, force=True)
                outcomes.append(Outcome("timeout", error=exc_text(exc)))
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as exc:
                outcomes.append(Outcome("crashed", error=exc_text(exc)))
            except ray.exceptions.TaskCancelledError as exc:
                outcomes.append(Outcome("cancelled", error=exc_text(exc)))
            except Exception as exc:
                outcomes.append(Outcome("error", error=exc_text(exc)))
        return outcomes


class ToolforkPeer(Peer):
    """toolfork's Executor with the benchmark functions as ``@tool`` tools, fork pool."""

    name = "toolfork"
    description = "toolfork Executor, fork pool"
    mode: ClassVar[str] = "fork"
    timeout_support = "kill"
    honours_limits = True  # a limit it cannot enforce in a mode makes the Executor refuse to start
    requires: ClassVar[tuple[str, ...]] = ("toolfork.executor",)
    concurrent_callers = True  # any number of batches at once on one Executor
    fresh_process: ClassVar[str | None] = "per tool"  # @tool(fresh_process=True), fork mode

    @classmethod
    def version(cls) -> str | None:
        import toolfork

        return toolfork.__version__

    def start(self) -> None:
        from toolfork.executor import Executor

        # Your own tools (the "user" workload) run as themselves, not through the user_call trampoline.
        tools = [*toolfork_tools(), *user_tools().values()]
        self.ex = Executor(tools, mode=self.mode, workers=self.workers)
        self._ids = itertools.count()

    def submit_one(self, task: Task) -> Any:
        return self.ex.submit(_tool_calls([task], f"s{next(self._ids)}")[0])

    def result_one(self, handle: Any) -> Outcome:
        return toolfork_outcome(handle.result())

    def run(self, tasks: Sequence[Task]) -> list[Outcome]:
        return [toolfork_outcome(r) for r in self.ex.run(_tool_calls(tasks))]

    def close(self) -> None:
        self.ex.close()


def _tool_calls(tasks: Sequence[Task], single_id: str | None = None) -> list[Any]:
    """Tasks as toolfork's ToolCalls, ids ``c0``, ``c1``... (or ``single_id`` for a lone task); a
    ``user_call`` task calls the user's tool by its own name.

    The timed region of a row includes this, so it is one list comprehension after one import, as a
    user's own code would build its calls (and as ``bench/before_peer.py`` does): a helper called and
    an import run once per call cost about 0.5 us a call, 5% of the tiny row, charged to the executor.
    """
    from toolfork.executor import ToolCall

    return [
        ToolCall(id=single_id or f"c{i}", name=t.kwargs["tool"], arguments=t.kwargs["arguments"], timeout=t.timeout)
        if t.fn == "user_call"
        else ToolCall(id=single_id or f"c{i}", name=t.fn, arguments=t.kwargs, timeout=t.timeout)
        for i, t in enumerate(tasks)
    ]


def toolfork_outcome(r: Any) -> Outcome:
    """A ToolResult as an Outcome (the same conversion as ``ToolforkPeer.run``)."""
    value: Any = None
    out = r.output
    if out is not None:
        if out.data is not None:
            value = out.data
        elif any(b.type != "text" for b in out.content):  # media: the output itself, as other peers get it
            value = out
        else:
            value = out.as_text()
    return Outcome(r.status, value, None if r.error is None else str(r.error)[:500])


class ToolforkSequentialPeer(ToolforkPeer):
    name = "toolfork-sequential"
    description = "toolfork Executor, sequential mode (in the host)"
    mode = "sequential"
    # SIGALRM interrupts the call when the executor runs on the main thread, as the runner does.
    timeout_support = "kill"
    in_process = True
    fresh_process = None  # sequential mode runs a fresh_process tool in the host like any other


class ToolforkRayPeer(ToolforkPeer):
    """toolfork's Ray backend on the same local Ray instance as the ``ray`` peer. Listed only once
    ``toolfork.executor.backends.ray`` exists."""

    name = "toolfork-ray"
    description = "toolfork Executor, Ray backend"
    mode = "ray"
    shared_processes = True
    limit_factor = 3.0
    quick_workloads = QUICK_HEADLINE
    requires = ("ray", "toolfork.executor.backends.ray")
    fresh_process = None  # the fresh workload measures the fork pool

    @classmethod
    def setup_session(cls) -> None:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)

    @classmethod
    def teardown_session(cls) -> None:
        import ray

        ray.shutdown()


PEERS: dict[str, type[Peer]] = {
    cls.name: cls
    for cls in (
        ToolforkPeer,
        ToolforkSequentialPeer,
        ToolforkRayPeer,
        ThreadsPeer,
        ProcessPoolPeer,
        MultiprocessPoolPeer,
        PebblePeer,
        LokyPeer,
        ForkPerCallPeer,
        RayPeer,
        MpirePeer,
    )
}

# Executors whose names start with this prefix are toolfork's own; the rest are the peers it is
# compared against ("best peer").
TOOLFORK_PREFIX = "toolfork"


def is_toolfork(name: str) -> bool:
    return name == TOOLFORK_PREFIX or name.startswith(TOOLFORK_PREFIX + "-")


def default_executors(quick: bool = False) -> list[str]:
    """Every registered executor; toolfork-ray only once its backend exists. ``quick`` leaves out the
    executors whose processes outlive a pool (a Ray cluster: seconds to start, and busy in the
    background while the others are timed)."""
    return [
        n
        for n, cls in PEERS.items()
        if (n != "toolfork-ray" or cls.unavailable() is None) and not (quick and cls.shared_processes)
    ]


def not_run(specs: Sequence[str], quick: bool = False, chosen: bool = False) -> dict[str, str]:
    """The executors a reader might expect and will not see, with why: those of ``specs`` that cannot
    run here (not installed), and unless the user ``chosen`` the list, the ones ``quick`` left out."""
    out: dict[str, str] = {}
    listed = {executor_name(s) for s in specs}
    others = [] if chosen else [n for n in default_executors() if n not in listed]
    for spec in [*specs, *others]:
        name, cls = executor_name(spec), resolve(spec)
        missing = cls.unavailable()
        if missing:
            out[name] = "not installed" if missing.endswith("not installed") else missing.removeprefix("n/a: ")
        elif name not in listed and quick:
            out[name] = "left out of --quick: slow to start; name them in --executors"
    return out


def resolve(spec: str) -> type[Peer]:
    """A registered name, or ``module:Class`` for a custom executor (a Peer subclass)."""
    if spec in PEERS:
        return PEERS[spec]
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        obj = getattr(importlib.import_module(module_name), attr)
        if not (isinstance(obj, type) and issubclass(obj, Peer)):
            raise ValueError(f"{spec} is not a toolfork.bench.peers.Peer subclass")
        return obj
    raise ValueError(f"unknown executor {spec!r}; choose from {', '.join(PEERS)} or give module:Class")


def executor_name(spec: str) -> str:
    """The label of an executor spec in reports: the registered name, or the class's ``name``."""
    if spec in PEERS:
        return spec
    try:
        return resolve(spec).name or spec
    except Exception:
        return spec
