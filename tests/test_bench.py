"""The benchmark harness end to end, on a tiny configuration: every executor gives a figure or a
recorded failure, the JSON/Markdown/PNG outputs have what they promise, and executors that hang, die
or leak processes are recorded as such without stopping the run or leaving anything behind.

No assertion here is about speed: the figures of the tiny profile mean nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from toolfork.bench import BenchConfig, default_executors, markdown, run_benchmark, write_report
from toolfork.bench.config import DEFAULT_WORKLOADS, WORKLOADS
from toolfork.bench.peers import (
    ForkPerCallPeer,
    Outcome,
    PebblePeer,
    Peer,
    Task,
    ThreadsPeer,
    ToolforkPeer,
    ToolforkSequentialPeer,
)
from toolfork.bench.workloads import _max_overlap, metric_specs, not_applicable
from toolfork.cli import main as cli_main

FAILURES = ("hung", "crashed", "error")


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_dead(pid: int, timeout: float = 3.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _dead(pid):
            return True
        time.sleep(0.05)
    return _dead(pid)


# --- everything, tiny -----------------------------------------------------------------------------


# Ray-based executors pay ~6 s of Ray start-up and shutdown each; they get their own run (in
# tests/test_bench_ray.py, an xdist group of its own, so that the two runs go on beside each other).
RAY_BASED = ("toolfork-ray", "ray")


def _tiny_run(out: Path, executors: list[str]) -> tuple[dict[str, Any], Path]:
    results = run_benchmark(BenchConfig.tiny(), executors, isolation="executor")
    write_report(results, str(out))
    return results, out


# The tiny run (a session-scoped fixture: a module scope would end whenever the worker runs another
# module between two of these tests) takes about 30 s on a quiet 2-core machine and several
# times that while the rest of the suite runs beside them. One xdist worker runs the whole module, so
# the run is made once, and whichever test pays for it has the room.
pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.timeout(600)]


@pytest.fixture(scope="session")
def full_tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    executors = [e for e in default_executors() if e not in RAY_BASED]
    return _tiny_run(tmp_path_factory.mktemp("bench-out"), executors)


def test_every_executor_is_in_one_of_the_runs() -> None:
    names = default_executors()
    assert {
        "toolfork",
        "toolfork-sequential",
        "threads",
        "process-pool",
        "multiprocess",
        "pebble",
        "loky",
        "fork-per-call",
        "ray",
    } <= set(names)


# fork-per-call forks for every call: the fresh workload's warm-worker figures are None for it.
NO_WARM_WORKER = {
    ("fork-per-call", key) for key in ("fresh_warm_ms", "fresh_ratio", "fresh_batch_warm_ms", "fresh_batch_ratio")
}


def test_every_executor_gives_a_figure_or_a_recorded_failure(full_tiny_run: tuple[dict[str, Any], Path]) -> None:
    _check_every_figure(full_tiny_run[0], ray=False)


def _check_every_figure(results: dict[str, Any], *, ray: bool) -> None:
    """(The runs are asked for as arguments, not with request.getfixturevalue from a parametrized test:
    pytest made such a session-scoped run again for the next test that needed it.)"""
    expected = [e for e in default_executors() if (e in RAY_BASED) == ray]
    assert results["executors"] == expected
    specs = metric_specs(BenchConfig.tiny())
    for ex in results["executors"]:
        assert set(results["cells"][ex]) == set(DEFAULT_WORKLOADS), ex
        for workload, cell in results["cells"][ex].items():
            status = cell["status"]
            assert status == "ok" or status in FAILURES or status.startswith("n/a: "), (ex, workload, status)
            # In this run nothing is expected to hang or fail for a reason other than the executor's
            # own nature; an "error" would be a harness bug or a broken peer adapter.
            assert status not in ("hung", "error"), (ex, workload, cell.get("detail"))
            if status != "ok":
                continue
            for spec in specs:
                if spec.workload != workload:
                    continue
                assert spec.key in cell["metrics"], (ex, spec.key)
                if spec.key != "hang_next_batch_s" and (ex, spec.key) not in NO_WARM_WORKER:
                    assert cell["metrics"][spec.key] is not None, (ex, spec.key)


def test_peers_fail_the_way_they_are_known_to(full_tiny_run: tuple[dict[str, Any], Path]) -> None:
    cells = full_tiny_run[0]["cells"]
    # os._exit in a call kills an in-process executor's host: recorded, and the run went on.
    assert cells["threads"]["crash"]["status"] == "crashed"
    assert "exit code 3" in cells["threads"]["crash"]["detail"]
    assert cells["toolfork-sequential"]["crash"]["status"] == "crashed"
    assert cells["threads"]["soak"]["status"] == "ok"  # the workloads after the crash still ran
    assert cells["fork-per-call"]["hang"]["status"] == "n/a: no timeout support"
    assert cells["threads"]["memory"]["status"].startswith("n/a")
    # A thread stuck in a hung call cannot be stopped; the abandoned ProcessPoolExecutor worker
    # cannot either. pebble kills it.
    assert cells["threads"]["hang"]["metrics"]["hang_still_running"] == 1
    assert cells["process-pool"]["hang"]["metrics"]["hang_still_running"] == 1
    assert cells["process-pool"]["hang"]["leftover_processes"] >= 1
    assert cells["pebble"]["hang"]["metrics"]["hang_still_running"] == 0
    # A crashed worker breaks a ProcessPoolExecutor: no other result comes back.
    assert cells["process-pool"]["crash"]["metrics"]["crash_results_back"] == 0
    assert cells["process-pool"]["crash"]["metrics"]["crash_usable_after"] is False


def test_toolfork_gets_every_figure(full_tiny_run: tuple[dict[str, Any], Path]) -> None:
    cells = full_tiny_run[0]["cells"]["toolfork"]
    assert {w: c["status"] for w, c in cells.items()} == {w: "ok" for w in DEFAULT_WORKLOADS}
    assert cells["hang"]["metrics"]["hang_status"] == "timeout"
    assert cells["hang"]["metrics"]["hang_still_running"] == 0
    assert cells["crash"]["metrics"]["crash_status"] == "crashed"
    assert cells["crash"]["metrics"]["crash_results_back"] == 3
    assert cells["crash"]["metrics"]["crash_usable_after"] is True
    assert all(c.get("leftover_processes") in (0, None) for c in cells.values())


CONCURRENT_PEERS = ("toolfork", "toolfork-sequential", "threads", "process-pool", "multiprocess", "pebble", "loky")


def test_concurrent_callers_and_single_calls_give_figures(full_tiny_run: tuple[dict[str, Any], Path]) -> None:
    results = full_tiny_run[0]
    config = BenchConfig.tiny()
    for ex in (*CONCURRENT_PEERS, "fork-per-call"):
        callers, singles = results["cells"][ex]["callers"], results["cells"][ex]["singles"]
        assert callers["status"] == "ok", (ex, callers.get("detail"))
        # One pool shared by every caller thread, closed with nothing left behind (loky keeps its
        # reusable executor per thread: asked for from each caller, it would start a pool per thread).
        assert callers.get("leftover_processes") in (0, None), ex
        assert singles["status"] == "ok", (ex, singles.get("detail"))
        for n in config.callers_counts:
            m = callers["metrics"]
            assert m[f"callers_{n}_wall_s"] > 0
            assert len(m[f"callers_{n}_all_s"]) == config.callers_reps
            assert 1 <= m[f"callers_{n}_overlap"] <= n
        for key in ("singles_us_per_call", "singles_batch_us_per_call", "singles_vs_batch"):
            assert singles["metrics"][key] > 0, (ex, key)
    # toolfork's concurrent callers really ran at once: their calls' spans in the workers overlap
    # (one batch at a time would give 1).
    most = max(config.callers_counts)
    assert results["cells"]["toolfork"]["callers"]["metrics"][f"callers_{most}_overlap"] > 1
    md = markdown(results)
    assert f"| callers: {most} threads x a batch of 1 call" in md
    assert "| singles: per-call cost of single calls / of one batch (ratio) |" in md


def test_fresh_workload_gives_toolfork_and_fork_per_call_figures(full_tiny_run: tuple[dict[str, Any], Path]) -> None:
    results = full_tiny_run[0]
    config = BenchConfig.tiny()
    calls = (config.fresh_reps + 1) * (1 + config.fresh_batch_calls)
    tf = results["cells"]["toolfork"]["fresh"]
    assert tf["status"] == "ok", tf.get("detail")
    m = tf["metrics"]
    for key in (
        "fresh_warm_ms",
        "fresh_fresh_ms",
        "fresh_ratio",
        "fresh_batch_warm_ms",
        "fresh_batch_fresh_ms",
        "fresh_batch_ratio",
    ):
        assert m[key] > 0, key
    # Every fresh call ran in a process no other call ran in; the warm calls shared the pool's workers.
    assert m["fresh_calls"] == m["fresh_processes"] == calls
    assert 1 <= m["fresh_warm_processes"] <= config.fresh_workers
    assert len(m["fresh_all_ms"]) == len(m["fresh_warm_all_ms"]) == config.fresh_reps
    assert tf.get("leftover_processes") in (0, None)
    fpc = results["cells"]["fork-per-call"]["fresh"]
    assert fpc["status"] == "ok", fpc.get("detail")
    assert fpc["metrics"]["fresh_fresh_ms"] > 0 and fpc["metrics"]["fresh_batch_fresh_ms"] > 0
    assert fpc["metrics"]["fresh_warm_ms"] is None
    assert fpc["metrics"]["fresh_processes"] == calls
    for ex in ("toolfork-sequential", "threads", "process-pool", "multiprocess", "pebble", "loky"):
        assert results["cells"][ex]["fresh"]["status"].startswith("n/a: "), ex
    assert results["cells"]["threads"]["fresh"]["status"] == "n/a: calls run in the host"
    md = markdown(results)
    fresh_row = next(line for line in md.splitlines() if line.startswith("| fresh: the same call in a process"))
    # The fresh row's comparison columns: toolfork's fresh call against fork-per-call's call.
    assert [col.strip().split(" ")[-1] for col in fresh_row.split("|")[-3:-1]] == ["(fork-per-call)"] * 2
    assert "| fresh: batch of 1, fresh / warm (ratio) |" in md


def test_fresh_process_calls_each_run_in_a_process_of_their_own() -> None:
    peer = ToolforkPeer(2)
    peer.start()
    try:
        warm = peer.run([Task("pid_call") for _ in range(8)])
        fresh = peer.run([Task("pid_call_fresh") for _ in range(8)]) + peer.run([Task("pid_call_fresh")])
        warm_again = peer.run([Task("pid_call") for _ in range(8)])
    finally:
        peer.close()
    assert all(o.status == "ok" for o in warm + fresh + warm_again)
    warm_pids = {o.value for o in warm + warm_again}
    fresh_pids = [o.value for o in fresh]
    assert 1 <= len(warm_pids) <= 2
    assert len(set(fresh_pids)) == len(fresh_pids) == 9
    assert not warm_pids & set(fresh_pids)
    assert os.getpid() not in warm_pids | set(fresh_pids)
    assert all(_wait_dead(pid) for pid in fresh_pids)  # gone after the call


def test_fresh_workload_is_for_executors_with_a_fresh_process_per_call() -> None:
    assert not_applicable(ToolforkPeer, "fresh") is None
    assert not_applicable(ForkPerCallPeer, "fresh") is None
    assert not_applicable(ToolforkSequentialPeer, "fresh") == "n/a: calls run in the host"
    assert not_applicable(PebblePeer, "fresh") == "n/a: no fresh process per call"
    assert not_applicable(_InlinePeer, "fresh") == "n/a: no fresh process per call"


def test_max_overlap_counts_calls_running_at_once() -> None:
    assert _max_overlap([]) == 0
    assert _max_overlap([[0, 1], [1, 2], [2, 3]]) == 1  # one after another (touching is not overlapping)
    assert _max_overlap([[0, 3], [1, 2], [1.5, 4], [3.5, 5]]) == 3


class _InlinePeer(Peer):
    """A batch method only: single calls come from the default submit_one."""

    name = "inline"

    def start(self) -> None:
        self.batches: list[int] = []

    def run(self, tasks: Any) -> list[Outcome]:
        from toolfork.bench.calls import FUNCTIONS

        self.batches.append(len(tasks))
        return [Outcome("ok", FUNCTIONS[t.fn](**t.kwargs)) for t in tasks]

    def close(self) -> None:
        pass


class _ConcurrentInlinePeer(_InlinePeer):
    concurrent_callers = True


@pytest.mark.parametrize("peer_cls", [_InlinePeer, _ConcurrentInlinePeer, ThreadsPeer, PebblePeer])
def test_submit_one_returns_each_calls_outcome(peer_cls: type[Peer]) -> None:
    peer = peer_cls(2)
    peer.start()
    try:
        handles = [peer.submit_one(Task("trivial_call", {"x": i})) for i in range(6)]
        outcomes = [peer.result_one(h) for h in handles]
    finally:
        peer.close()
    assert [(o.status, o.value) for o in outcomes] == [("ok", i + 1) for i in range(6)]
    if isinstance(peer, _InlinePeer):
        assert peer.batches == [1] * 6  # the default: a batch of one per call


def test_callers_workload_needs_a_peer_callable_from_several_threads() -> None:
    assert not_applicable(_InlinePeer, "callers") == "n/a: not callable from several threads at once"
    assert not_applicable(_ConcurrentInlinePeer, "callers") is None
    assert not_applicable(_InlinePeer, "singles") is None


def test_json_markdown_and_plots_are_written(full_tiny_run: tuple[dict[str, Any], Path]) -> None:
    results, out = full_tiny_run
    data = json.loads((out / "latest.json").read_text())
    assert data["meta"]["cores"] == os.cpu_count()
    assert data["meta"]["profile"] == "tiny"
    assert data["meta"]["versions"]["pebble"] and data["meta"]["versions"]["loky"]
    assert data["meta"]["config"]["tiny_calls"] == BenchConfig.tiny().tiny_calls
    assert data["meta"]["cpu_one_call_s"] > 0
    assert data["executors"] == results["executors"]
    assert {m["key"] for m in data["metrics"]} >= {"io_wall_s", "tiny_us_per_call", "hang_wall_s", "soak_fd_delta"}
    for m in data["metrics"]:
        assert {"key", "workload", "label", "unit", "better", "ideal", "target"} <= set(m)
    assert data["cells"]["pebble"]["io"]["metrics"]["io_wall_s"] > 0
    assert data["sessions"] and all("outcome" in s for s in data["sessions"])

    md = (out / "latest.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| metric"))
    for ex in results["executors"]:
        assert f" {ex} |" in header
    assert "toolfork vs best peer" in header
    assert "## toolfork against the targets" in md
    assert "threads x crash: crashed" in md
    for name in ("scaling.png", "overhead.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in md


# --- executors that misbehave ------------------------------------------------------------------------

BAD_PEERS = textwrap.dedent(
    '''
    import os
    import time

    from toolfork.bench.peers import Outcome, Peer, ThreadsPeer


    def _spawn_sleeper(escape):
        """A stand-in for a worker process; with escape it leaves the runner's process group."""
        pid = os.fork()
        if pid == 0:
            if escape:
                os.setsid()
            time.sleep(600)
            os._exit(0)
        with open(os.path.join(os.environ["BENCH_TEST_PIDS"], str(pid)), "w"):
            pass
        return pid


    class HangingPeer(Peer):
        name = "hanging"
        description = "never answers"

        def start(self):
            with open(os.path.join(os.environ["BENCH_TEST_PIDS"], f"runner-{os.getpid()}"), "w"):
                pass
            _spawn_sleeper(escape=True)

        def run(self, tasks):
            while True:
                time.sleep(3600)

        def close(self):
            pass


    class DyingPeer(Peer):
        name = "dying"
        description = "takes its host down"

        def start(self):
            pass

        def run(self, tasks):
            os._exit(7)

        def close(self):
            pass


    class LeakyPeer(ThreadsPeer):
        name = "leaky"
        description = "threads, plus a process it never stops"

        def start(self):
            super().start()
            _spawn_sleeper(escape=False)
    '''
)


@pytest.fixture
def bad_peers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    mod = tmp_path / "mods"
    mod.mkdir()
    name = f"bench_bad_peers_{os.getpid()}_{time.monotonic_ns()}"
    (mod / f"{name}.py").write_text(BAD_PEERS)
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.syspath_prepend(str(mod))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(mod), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("BENCH_TEST_PIDS", str(pids))
    monkeypatch.setenv("BENCH_TEST_MODULE", name)
    return pids


def test_hanging_executor_is_recorded_as_hung_and_the_run_goes_on(bad_peers: Path) -> None:
    mod = os.environ["BENCH_TEST_MODULE"]
    config = BenchConfig.tiny().with_limits(1.5)
    results = run_benchmark(config, [f"{mod}:HangingPeer", "threads"], ["small", "io"], isolation="executor")
    hanging = results["cells"]["hanging"]
    assert hanging["small"]["status"] == "hung"
    assert "time limit" in hanging["small"]["detail"]
    assert hanging["io"]["status"] == "hung"  # a fresh runner was started for the remaining workload
    assert results["cells"]["threads"]["small"]["status"] == "ok"
    assert results["cells"]["threads"]["io"]["status"] == "ok"
    sessions = [s for s in results["sessions"] if s["executor"].endswith(":HangingPeer")]
    assert [s["outcome"] for s in sessions] == ["hung", "hung"]
    # The stand-in worker left the runner's process group; the environment marker found it.
    assert all(s["escaped_processes"] >= 1 for s in sessions)
    sleepers = [int(p.name) for p in bad_peers.iterdir() if p.name.isdigit()]
    assert len(sleepers) == 2
    assert all(_wait_dead(pid) for pid in sleepers)


def test_ctrl_c_in_the_middle_of_a_run_leaves_nothing_behind(bad_peers: Path) -> None:
    mod = os.environ["BENCH_TEST_MODULE"]
    script = (
        "from toolfork.bench import BenchConfig, run_benchmark\n"
        f"run_benchmark(BenchConfig.tiny(), ['{mod}:HangingPeer'], ['small'])\n"
    )
    host = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(list(bad_peers.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        started = sorted(p.name for p in bad_peers.iterdir())
        assert len(started) == 2, started  # the runner and its stand-in worker are up, the cell hangs
        host.send_signal(signal.SIGINT)
        _, err = host.communicate(timeout=30)
    finally:
        host.kill()
    assert host.returncode != 0
    assert b"KeyboardInterrupt" in err
    runner = next(int(n.split("-")[1]) for n in started if n.startswith("runner-"))
    sleeper = next(int(n) for n in started if n.isdigit())
    assert _wait_dead(runner)
    assert _wait_dead(sleeper)


def test_dying_executor_is_recorded_as_crashed(bad_peers: Path) -> None:
    mod = os.environ["BENCH_TEST_MODULE"]
    results = run_benchmark(BenchConfig.tiny(), [f"{mod}:DyingPeer"], ["small", "tiny"], isolation="executor")
    for workload in ("small", "tiny"):
        cell = results["cells"]["dying"][workload]
        assert cell["status"] == "crashed"
        assert "exit code 7" in cell["detail"]
    assert len(results["sessions"]) == 2


def test_processes_left_behind_are_counted_and_removed(bad_peers: Path) -> None:
    mod = os.environ["BENCH_TEST_MODULE"]
    results = run_benchmark(BenchConfig.tiny(), [f"{mod}:LeakyPeer"], ["small"], isolation="cell")
    cell = results["cells"]["leaky"]["small"]
    assert cell["status"] == "ok"
    assert cell["leftover_processes"] == 1
    (pid_file,) = bad_peers.iterdir()
    assert _wait_dead(int(pid_file.name))
    assert "| processes left behind after close, all cells (count) | 0 | | 1 |" in markdown(results)


# --- the command line ------------------------------------------------------------------------------


def test_cli_runs_a_subset_and_writes_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    code = cli_main(
        [
            "bench",
            "--quick",
            "--only",
            "small,crash",
            "--executors",
            "threads,fork-per-call",
            "--out",
            str(out),
            "--no-plots",
        ]
    )
    assert code == 0
    data = json.loads((out / "latest.json").read_text())
    assert data["meta"]["profile"] == "quick"
    assert data["meta"]["isolation"] == "executor"
    assert data["workloads"] == ["small", "crash"]
    assert data["cells"]["fork-per-call"]["small"]["status"] == "ok"
    assert data["cells"]["fork-per-call"]["crash"]["metrics"]["crash_results_back"] == 3
    assert data["cells"]["threads"]["crash"]["status"] == "crashed"
    printed = capsys.readouterr()
    assert "threads x crash: crashed" in printed.out  # the summary names the failed cell
    assert str(out / "latest.md") in printed.out
    assert "threads x crash: crashed" in printed.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only", "io,bogus"], "unknown workload(s) bogus"),
        (["--executors", "threads,nope"], "unknown executor 'nope'"),
        (["--executors", "threads,threads"], "listed twice: threads"),
    ],
)
def test_cli_rejects_bad_selections(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["bench", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert not (tmp_path / "latest.json").exists()


def test_cli_lists_executors_and_workloads(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("toolfork", "pebble", "loky", "fork-per-call", "ray", "toolfork-ray"):
        assert name in out
    assert (
        "workloads: io, cpu, small, tiny, mixed, hang, crash, payload, memory, scaling, soak, callers, singles, fresh"
        in out
    )


# --- pieces ---------------------------------------------------------------------------------------


def _synthetic(cells: dict[str, dict[str, Any]], better: str = "lower") -> dict[str, Any]:
    return {
        "kinds": {"threads": {"in_process": True}},
        "meta": {
            "profile": "x",
            "started": "t",
            "cores": 2,
            "python": "3",
            "platform": "p",
            "isolation": "cell",
            "duration_s": 1,
        },
        "executors": list(cells),
        "workloads": ["io"],
        "metrics": [
            {
                "key": "m",
                "workload": "io",
                "label": "io thing",
                "unit": "s",
                "better": better,
                "ideal": 0.1,
                "target": 0.105,
                "target_text": "<= 0.105",
            }
        ],
        "cells": {ex: {"io": c} for ex, c in cells.items()},
    }


def _row(res: dict[str, Any]) -> str:
    return next(line for line in markdown(res).splitlines() if line.startswith("| io thing"))


def test_ratio_columns_are_above_one_when_toolfork_is_better() -> None:
    ok = lambda v: {"status": "ok", "metrics": {"m": v}}  # noqa: E731
    res = _synthetic({"toolfork": ok(0.1), "pebble": ok(0.25), "loky": ok(0.2), "threads": {"status": "hung"}})
    assert _row(res).endswith("| **0.1** | 0.25 | 0.2 | hung | 2.00x (loky) | 2.00x (loky) |")
    assert "- io thing: met: 0.1 s (target <= 0.105)" in markdown(res)

    # The second column leaves out in-process executors.
    res = _synthetic({"toolfork": ok(0.1), "pebble": ok(0.4), "threads": ok(0.05)})
    assert _row(res).endswith("| 0.1 | 0.4 | **0.05** | 0.50x (threads) | 4.00x (pebble) |")
    assert "- io thing: met" in markdown(res)

    res = _synthetic({"toolfork": ok(300.0), "pebble": ok(200.0)}, better="higher")
    assert _row(res).endswith("| 1.50x (pebble) | 1.50x (pebble) |")

    res = _synthetic({"toolfork": {"status": "crashed"}, "pebble": ok(0.3)})
    assert _row(res).endswith("| crashed | 0.3 | — | — |")
    assert "- io thing: no figure (crashed)" in markdown(res)

    res = _synthetic({"toolfork": ok(0.2), "pebble": ok(0.3)})
    assert "- io thing: missed: 0.2 s (target <= 0.105)" in markdown(res)


def test_fork_per_call_keeps_call_order_and_reports_the_exit_code() -> None:
    peer = ForkPerCallPeer(2)
    peer.start()
    tasks = [
        Task("sleep_call", {"seconds": 0.2}),
        Task("trivial_call", {"x": 1}),
        Task("crash_call", {"delay": 0.0, "code": 5}),
        Task("payload_call", {"nbytes": 300_000}),
    ]
    out = peer.run(tasks)
    assert [o.status for o in out] == ["ok", "ok", "crashed", "ok"]
    assert out[1].value == 2
    assert out[2].error == "exit code 5"
    assert len(out[3].value) == 300_000


def test_pebble_adapter_kills_a_hung_call_at_its_timeout(tmp_path: Path) -> None:
    peer = PebblePeer(2)
    peer.start()
    try:
        out = peer.run([Task("hang_call", {"marker_dir": str(tmp_path)}, 0.3), Task("trivial_call", {"x": 4}, 5)])
    finally:
        peer.close()
    assert [o.status for o in out] == ["timeout", "ok"]
    (marker,) = tmp_path.iterdir()
    assert _wait_dead(int(marker.name.split("-")[0]))


def test_mpire_is_a_peer_and_its_task_timeout_fails_the_whole_map(full_tiny_run: tuple[dict[str, Any], Path]) -> None:
    cells = full_tiny_run[0]["cells"]["mpire"]
    assert cells["tiny"]["status"] == "ok"
    # task_timeout raises out of the map: every call of that batch is recorded as failed, the stuck
    # one included (not "timeout": the executor did not say which call it was).
    assert cells["hang"]["status"] == "ok"
    assert cells["hang"]["metrics"]["hang_status"] == "error"


def test_payloads_workload_is_opt_in_and_checks_every_shape(tmp_path: Path) -> None:
    assert "payloads" in WORKLOADS and "payloads" not in DEFAULT_WORKLOADS
    results = run_benchmark(BenchConfig.tiny(), ["toolfork", "threads"], ["payloads"], isolation="executor")
    for ex in ("toolfork", "threads"):
        cell = results["cells"][ex]["payloads"]
        assert cell["status"] == "ok", (ex, cell.get("detail"))
        assert set(cell["metrics"]) == {f"payloads_{k}_300KB_ms" for k in ("str", "file", "rows")}
        assert all(v > 0 for v in cell["metrics"].values())


# --- peers that do not honour what the calls ask --------------------------------------------------

HONOUR_TOOLS = '''
import time

from toolfork import tool
from toolfork.governance import Limits


@tool
def nap(seconds: float) -> float:
    """Sleep, then answer how long.

    Args:
        seconds: how long
    """
    time.sleep(seconds)
    return seconds


@tool(limits=Limits(cpu_s=30))
def bounded(x: int) -> int:
    """Answer x, under a CPU-time limit.

    Args:
        x: a number
    """
    return x
'''


def test_a_peer_that_ignores_a_timeout_or_limits_is_shown_as_such_and_never_ranked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fork-per-call has no timeout: it runs the call that should time out to its end and counts one
    more "ok" than toolfork. That figure is shown with why, and never bold nor the best peer; so are the
    threads' (they abandon a timed-out call) and every peer's where the tools declare limits."""
    (tmp_path / "tools.py").write_text(HONOUR_TOOLS)
    lines = [{"name": "nap", "arguments": {"seconds": 0.01}}, {"name": "bounded", "arguments": {"x": 2}},
             {"name": "nap", "arguments": {"seconds": 2.0}, "timeout": 0.3}]
    (tmp_path / "calls.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out"
    code = cli_main(["bench", "--tools", str(tmp_path / "tools.py"), "--calls", str(tmp_path / "calls.jsonl"),
                     "--executors", "toolfork,fork-per-call,threads", "--rounds", "1", "--out", str(out),
                     "--no-plots"])
    assert code == 0
    data = json.loads((out / "latest.json").read_text())
    ok = {ex: data["cells"][ex]["user"]["metrics"]["user_ok"] for ex in data["executors"]}
    assert ok == {"toolfork": 2, "fork-per-call": 3, "threads": 2}  # the peer that ignored the timeout "wins"
    assert data["meta"]["user"]["asks"] == ["limits", "timeout"]
    tags = {ex: [u["tag"] for u in found["user"]] for ex, found in data["unhonoured"].items() if found}
    assert tags == {"fork-per-call": ["no timeout", "no limits"], "threads": ["timeout not killed", "no limits"]}

    md = (out / "latest.md").read_text()
    assert md.splitlines()[0] == f"# toolfork benchmark (your 3 calls from {tmp_path / 'tools.py'})"
    assert "full run" not in md
    row = next(line for line in md.splitlines() if line.startswith("| your 3 calls: results ok"))
    assert row == "| your 3 calls: results ok (count) | 3 |  | 2 | 3 (no timeout) (no limits) " \
                  "| 2 (timeout not killed) (no limits) | — | — |"
    assert not [line for line in md.splitlines() if line.startswith("| your") and "**" in line]  # nothing to rank
    assert "- fork-per-call x user: has no per-call timeout" in md

    printed = capsys.readouterr().out
    ok_line = next(line for line in printed.splitlines() if line.startswith("your 3 calls: results ok"))
    assert ok_line.split()[-3:] == ["2", "3*", "2*"]
    assert "fork-per-call x user: has no per-call timeout" in printed


def test_what_a_workload_asks_and_who_cannot_honour_it() -> None:
    from toolfork.bench.honour import unhonoured, workload_asks

    assert workload_asks("hang") == {"timeout"} and workload_asks("io") == set()
    assert workload_asks("user", ["limits"]) == {"limits"} and workload_asks("user") == set()
    assert unhonoured(ToolforkPeer, {"timeout", "limits", "fresh process"}) == []
    assert [u.tag for u in unhonoured(PebblePeer, {"timeout", "limits", "fresh process"})] == [
        "no limits", "no fresh process"]
    assert [u.tag for u in unhonoured(ForkPerCallPeer, {"timeout", "fresh process"})] == ["no timeout"]
    assert [u.tag for u in unhonoured(ThreadsPeer, {"timeout"})] == ["timeout not killed"]


def test_a_cell_not_ranked_is_never_the_best_peer() -> None:
    ok = lambda v: {"status": "ok", "metrics": {"m": v}}  # noqa: E731
    res = _synthetic({"toolfork": ok(0.2), "pebble": ok(0.3), "loky": ok(0.1)})
    res["unhonoured"] = {"loky": {"io": [{"tag": "timeout not killed", "text": "leaves the call running"}]}}
    assert _row(res).endswith("| **0.2** | 0.3 | 0.1 (timeout not killed) | 1.50x (pebble) | 1.50x (pebble) |")
    assert "- loky x io: leaves the call running" in markdown(res)
