"""BFCL v4 multi-turn episodes as sessions: 200 stateful episodes at once on one Executor.

Each ``multi_turn_base`` episode of the Berkeley Function Calling Leaderboard is a set of stateful API
classes (GorillaFileSystem, TradingBot, TicketAPI...) built from its ``initial_config``, and turns of
ground-truth calls on them. Here every episode is a session (``Executor.session``) whose state is those
instances; each turn's calls go through ``s.run``; every class method is one tool, defined once, that
reaches its instance as ``runtime.state``. The per-call results and the final public state of every
episode are compared with a direct run (the same calls on the same classes, in this process, as BFCL's
own executor runs them, each episode starting from freshly loaded classes as a session does). Printed:
the wall time of the 200 episodes, the opening time of a session (median and 95th percentile, while the
episodes run, and one at a time before), and how many episodes match the direct run.

``--faults``: after the first turn of every episode, one crash (os._exit), one hang in Python and one
hang inside C (hashlib.pbkdf2_hmac) are injected, each with a timeout of ``FAULT_TIMEOUT`` s. Without
``--checkpoint`` every episode must be lost (``SessionLost``) and none go on; with it, every episode
but the faulted calls' own results must match the direct run.

The data and classes come from the ``bfcl-eval`` wheel (``pip install --no-deps bfcl-eval`` is enough:
only its pure-Python API classes and JSON data are used). Usage:
    PYTHONPATH=. python bench/bfcl_sessions.py [--category base|miss_func|miss_param|long_context] [--faults]
        [--checkpoint] [--episodes N] [--threads N] [--mode fork|ray|sequential] [--out FILE]

``--mode ray``: each episode's session is a Ray actor on a local Ray instance (started by the executor).
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib
import inspect
import json
import os
import statistics
import sys
import time
import typing
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from toolfork import SessionLost, Tool
from toolfork.executor import Executor, ToolCall
from toolfork.tools.runtime import ToolRuntime

FAULT_TIMEOUT = 0.5
SKIP = {"_load_scenario"}


def bfcl() -> tuple[Path, dict[str, str], list[str]]:
    try:
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES
    except ImportError:
        sys.exit("this benchmark needs the bfcl-eval wheel: pip install --no-deps bfcl-eval")
    import bfcl_eval

    return Path(bfcl_eval.__file__).parent / "data", CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES


DATA, CLASSES, STATELESS = bfcl()


def build_episode(initial_config: dict[str, Any], involved: list[str]) -> dict[str, Any]:
    """The session's state: one instance per involved class, loaded as BFCL loads it."""
    instances = {}
    for name in involved:
        instance = getattr(importlib.import_module(CLASSES[name]), name)()
        if name not in STATELESS:
            instance._load_scenario(copy.deepcopy(initial_config.get(name, {})), long_context=False)
        instances[name] = instance
    return instances


def render(value: Any) -> str:
    """A call's result as BFCL's executor renders it."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except Exception:
            return str(value)
    return str(value)


def method_tool(class_name: str, method_name: str, method: Any) -> Tool:
    """One tool per API method: validated by the method's own type hints, run on the session's instance."""
    sig = inspect.signature(method)
    params = [p for p in sig.parameters.values() if p.name != "self"]
    hints = {k: v for k, v in typing.get_type_hints(method).items() if k != "return"}

    def call(runtime: ToolRuntime, **kwargs: Any) -> str:
        try:
            return render(getattr(runtime.state[class_name], method_name)(**kwargs))
        except Exception as exc:
            return f"Error during execution: {exc}"

    call.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[*params, inspect.Parameter("runtime", inspect.Parameter.KEYWORD_ONLY, annotation=ToolRuntime)],
        return_annotation=str)
    call.__annotations__ = {**hints, "runtime": ToolRuntime, "return": str}
    call.__doc__ = method.__doc__ or method_name
    return Tool(name=method_name, fn=call)


def all_tools() -> tuple[list[Tool], dict[str, list[str]]]:
    tools: dict[str, Tool] = {}
    params: dict[str, list[str]] = {}
    for class_name in ("GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot",
                       "TravelAPI", "VehicleControlAPI"):
        cls = getattr(importlib.import_module(CLASSES[class_name]), class_name)
        for name, method in inspect.getmembers(cls, predicate=inspect.isfunction):
            if name.startswith("_") or name in SKIP or name in tools:
                continue
            tools[name] = method_tool(class_name, name, method)
            params[name] = [p for p in inspect.signature(method).parameters if p != "self"]
    return [*tools.values(), crash, hang, hang_in_c], params


def parse(call: str, params: dict[str, list[str]], cid: str) -> ToolCall:
    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name), call
    name = node.func.id
    args = {params[name][i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
    args.update({k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})
    return ToolCall(cid, name, args)


def direct(entry: dict[str, Any], turns: list[list[ToolCall]], owners: dict[str, str],
           isolated: bool) -> tuple[list[str], str]:
    """The episode run in this process, call by call (BFCL's way). ``isolated``: its classes' modules are
    loaded again first, so it starts as a session does (some methods have mutable default arguments:
    run one after the other in one process, an episode sees what the ones before it left there)."""
    if isolated:
        for name in entry["involved_classes"]:
            importlib.reload(importlib.import_module(CLASSES[name]))
    state = build_episode(entry["initial_config"], entry["involved_classes"])
    out = []
    for turn in turns:
        for c in turn:
            try:
                out.append(render(getattr(state[owners[c.name]], c.name)(**copy.deepcopy(c.arguments))))
            except Exception as exc:
                out.append(f"Error during execution: {exc}")
    return out, public_state(state)


def text_of(output: Any) -> str:
    return "".join(b.text or "" for b in output.content if b.type == "text")


def public_state(state: dict[str, Any]) -> str:
    return json.dumps({n: {k: v for k, v in vars(i).items() if not k.startswith("_")} for n, i in state.items()},
                      default=repr)


# The injected faults (``--faults``): they run in the session's process.
def crash(runtime: ToolRuntime) -> str:
    """Crash the process."""
    os._exit(3)


def hang(runtime: ToolRuntime) -> str:
    """Hang in Python."""
    while True:
        time.sleep(0.05)


def hang_in_c(runtime: ToolRuntime) -> str:
    """Hang inside C."""
    import hashlib

    hashlib.pbkdf2_hmac("sha256", b"x", b"y", 2**31 - 1)
    return "done"


crash, hang, hang_in_c = (Tool(fn=f) for f in (crash, hang, hang_in_c))  # type: ignore[assignment]
FAULTS = [ToolCall("fault-crash", "crash", {}), ToolCall("fault-hang", "hang", {}, timeout=FAULT_TIMEOUT),
          ToolCall("fault-hang-in-c", "hang_in_c", {}, timeout=FAULT_TIMEOUT)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--threads", type=int, default=None, help="episodes driven at once (default: the workers)")
    ap.add_argument("--faults", action="store_true")
    ap.add_argument("--checkpoint", action="store_true")
    ap.add_argument("--mode", default="fork", choices=["fork", "ray", "sequential"],
                    help="where the sessions live: fork processes, Ray actors, or this process (default: fork)")
    ap.add_argument("--out", type=Path, default=None,
                    help="write every episode's results (per-call texts, lost at, final state) here as JSON, to "
                         "compare two modes' runs")
    ap.add_argument("--category", default="base", choices=["base", "miss_func", "miss_param", "long_context"],
                    help="which multi-turn category's episodes (default: base)")
    a = ap.parse_args()
    tools, params = all_tools()
    owners = {}
    for class_name in CLASSES:
        if class_name.startswith(("WebSearch", "Memory")):
            continue
        cls = getattr(importlib.import_module(CLASSES[class_name]), class_name)
        for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction):
            owners.setdefault(name, class_name)
    data = f"BFCL_v4_multi_turn_{a.category}.json"
    entries = [json.loads(line) for line in (DATA / data).read_text().splitlines()]
    answers = {json.loads(line)["id"]: json.loads(line)["ground_truth"]
               for line in (DATA / "possible_answer" / data).read_text().splitlines()}
    entries = entries[: a.episodes]
    turns = {e["id"]: [[parse(c, params, f"{e['id']}-t{t}-c{i}") for i, c in enumerate(turn)]
                       for t, turn in enumerate(answers[e["id"]])] for e in entries}
    opening: list[float] = []
    # Made before the direct runs: a fork template (and the Ray workers' imports) have pristine modules.
    with Executor(tools, kill_grace=0.2, mode=a.mode) as ex:
        t0 = time.perf_counter()
        shared = {e["id"]: direct(e, turns[e["id"]], owners, False) for e in entries}
        direct_s = time.perf_counter() - t0
        expected = {e["id"]: direct(e, turns[e["id"]], owners, True) for e in entries}
        threads = a.threads or ex.workers

        def episode(entry: dict[str, Any]) -> tuple[list[str], str | None, str]:
            t = time.perf_counter()
            with ex.session(build_episode, entry["initial_config"], entry["involved_classes"],
                            checkpoint=a.checkpoint) as s:
                opening.append(time.perf_counter() - t)
                out: list[str] = []
                try:
                    for k, turn in enumerate(turns[entry["id"]]):
                        for r in s.run(turn):
                            out.append(text_of(r.output) if r.status == "ok" and r.output is not None else
                                       f"{r.status}: {r.error}")
                        if a.faults and k == 0:
                            s.run(FAULTS)
                    return out, None, public_state(s.snapshot())
                except SessionLost as lost:
                    return out, lost.call_id, ""

        alone: list[float] = []  # opening with nothing else running: what one session costs to open
        for entry in entries[:50]:
            t = time.perf_counter()
            with ex.session(build_episode, entry["initial_config"], entry["involved_classes"]):
                alone.append(time.perf_counter() - t)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            got = dict(zip([e["id"] for e in entries], pool.map(episode, entries), strict=True))
        wall = time.perf_counter() - t0
        mode = ex.mode
    # Equal as values (10000 == 10000.0: validation converts an int to the float a method declares, as the
    # tool's type hints say), and equal to the character (no conversion happened).
    same = sum(1 for i, (out, lost, state) in got.items()
               if lost is None and out == expected[i][0] and json.loads(state) == json.loads(expected[i][1]))
    exact = sum(1 for i, (out, lost, state) in got.items() if lost is None and (out, state) == expected[i])
    lost = sum(1 for _out, lost_at, _ in got.values() if lost_at is not None)
    mismatched = [i for i, (out, lost_at, state) in got.items() if lost_at is None and (
        out != expected[i][0] or json.loads(state) != json.loads(expected[i][1]))]
    if a.out is not None:
        a.out.write_text(json.dumps({i: [out, lost_at, state] for i, (out, lost_at, state) in got.items()}))
    opening.sort()
    print(f"mode {mode}, {len(entries)} episodes, {sum(len(c) for t in turns.values() for c in t)} calls, "
          f"{threads} episodes at once, {os.cpu_count()} cores, faults={a.faults} checkpoint={a.checkpoint}")
    print(f"direct run, one process: {direct_s:.2f} s")
    alone.sort()
    print(f"sessions: {wall:.2f} s wall; opening a session: median {statistics.median(opening) * 1000:.1f} ms, "
          f"p95 {opening[int(len(opening) * 0.95) - 1] * 1000:.1f} ms ({threads} at once); one at a time: "
          f"median {statistics.median(alone) * 1000:.1f} ms, p95 {alone[int(len(alone) * 0.95) - 1] * 1000:.1f} ms")
    same_shared = sum(1 for i, (out, lost_at, state) in got.items() if lost_at is None and out == shared[i][0]
                      and json.loads(state) == json.loads(shared[i][1]))
    print(f"equal to one direct run of all episodes in one process: {same_shared}/{len(entries)}")
    print(f"equal to the direct run (per-call results and final state): {same}/{len(entries)}, "
          f"{exact} of them to the character; "
          f"lost (SessionLost): {lost}; differing: {mismatched[:10]}")
    for i in mismatched[:2]:
        a_out, b_out = got[i][0], expected[i][0]
        diff = [(k, x, y) for k, (x, y) in enumerate(zip(a_out, b_out, strict=False)) if x != y]
        print(f"  {i}: first differing call {diff[:1]}; state equal: {got[i][2] == expected[i][1]}")


if __name__ == "__main__":
    main()
