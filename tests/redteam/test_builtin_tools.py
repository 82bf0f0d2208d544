"""Red team #10: bad input to the built-in tools, through a real forked executor. Every bound must
answer at once with an error naming it; a write must never be sent twice."""

from __future__ import annotations

import os
import socket
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.toolkits.fakeservers import FakeZep, Recorded, Reply
from tests.toolkits.helpers import in_bounded_child
from toolfork import tool
from toolfork.executor import Executor, ToolCall
from toolfork.toolkits import CalculatorToolkit, ZepMemoryToolkit
from toolfork.toolkits.calculator import MAX_NUMBERS, MAX_ROUND_DIGITS
from toolfork.toolkits.http import RetryPolicy

# Each of these took minutes of a worker's CPU (or would, unbounded); with a 20 s timeout a regression
# shows as "timeout" instead of hanging the suite.
EXPENSIVE = [
    ("round(7, -10**8)", f"|ndigits| <= {MAX_ROUND_DIGITS}"),
    ("round(1, -(10**9))", f"|ndigits| <= {MAX_ROUND_DIGITS}"),
    ("9**9**9**9", "too large"),
    ("(10**3000)**4", "too large"),
    ("factorial(10**6)", "factorial is limited"),
    ("2**9999 * 2**9999", "too large"),
    ("pow(3, 10**8)", "too large"),
    ("1 << 10**9", "not allowed"),
    ("1" + "0" * 2000, "longer than"),
]


def test_calculator_bounds_every_argument_that_scales_work() -> None:
    calls = [ToolCall(f"e{i}", "evaluate", {"expression": e}) for i, (e, _) in enumerate(EXPENSIVE)]
    calls += [ToolCall("sum", "sum", {"numbers": [1.0] * (MAX_NUMBERS + 1)}),
              ToolCall("var", "variance", {"numbers": [1.0] * (MAX_NUMBERS + 1)}),
              ToolCall("fine", "evaluate", {"expression": "round(123456, -3) + round(2.5678, 2)"})]
    with Executor([CalculatorToolkit()], mode="fork", workers=2, timeout=20) as ex:
        results = ex.run(calls)
    for r, (expression, bound) in zip(results, EXPENSIVE, strict=False):
        assert r.status == "ok" and r.output is not None and r.output.is_error, (expression, r)
        assert bound in r.output.as_text(), (expression, r.output.as_text())
    for r in results[len(EXPENSIVE):-1]:
        assert r.output is not None and r.output.is_error and f"the limit is {MAX_NUMBERS}" in r.output.as_text()
    assert results[-1].output is not None and results[-1].output.data == 123002.57


class ZepThatStoresThenFails(FakeZep):
    """Stores the memory, then answers 502 (a proxy timing out after the write): the worst case for a
    client that retries."""

    def handle(self, req: Recorded) -> Reply:
        reply = super().handle(req)
        if req.method == "POST" and req.path.endswith("/graph") and reply.status < 300:
            return Reply(502, {"message": "bad gateway"})
        return reply


def test_zep_add_memory_is_not_sent_twice_after_a_5xx() -> None:
    with ZepThatStoresThenFails() as server:
        server.users["u1"] = {"user_id": "u1", "uuid": "uuid-u1"}
        toolkit = ZepMemoryToolkit("u1", server.api_key, base_url=server.url + "/api/v2",
                                   retry=RetryPolicy(retries=3, backoff=0.01))
        with Executor([toolkit], mode="fork", workers=1, timeout=30) as ex:
            [add] = ex.run([ToolCall("a", "zep_add_memory", {"content": "likes tea"})])
            # A search is a POST too, but only reads: it is retried after a 5xx.
            server.script(Reply(503, {"message": "busy"}))
            [search] = ex.run([ToolCall("s", "zep_search_memory", {"query": "tea"})])
        posts = [r for r in server.requests if r.method == "POST" and r.path.endswith("/graph")]
        searches = [r for r in server.requests if r.path.endswith("/graph/search")]
        assert len(posts) == 1 and len(server.episodes["u1"]) == 1  # stored once, never resent
        assert add.output is not None and add.output.is_error and "not retried" in add.output.as_text()
        assert len(searches) == 2
        assert search.status == "ok" and search.output is not None and not search.output.is_error
        assert "likes tea" in search.output.as_text()


@tool
def backoff_draws() -> list[float]:
    """The first backoff delays this worker would wait."""
    time.sleep(0.05)  # long enough that a batch spreads over both workers
    policy = RetryPolicy(retries=3, backoff=1.0)
    return [os.getpid(), *(policy.delay(0, None) for _ in range(3))]


def test_forked_workers_do_not_back_off_in_lockstep() -> None:
    with Executor([backoff_draws], mode="fork", workers=2) as ex:
        first = ex.run([ToolCall("a", "backoff_draws", {})])[0]
        results = ex.run([ToolCall(f"c{i}", "backoff_draws", {}) for i in range(8)])
    draws: dict[Any, list[float]] = {}
    for r in [first, *results]:
        assert r.output is not None
        pid, *delays = r.output.data
        assert all(0.5 <= d <= 1.0 for d in delays)
        draws.setdefault(pid, []).extend(delays)
    assert len(draws) == 2  # both workers, forked from one template, drew
    every = [d for ds in draws.values() for d in ds]
    assert len(set(every)) == len(every)  # no two draws alike, within a worker or across workers


@pytest.mark.parametrize("expression", ["round(7, -4000)", "round(7.5, 4000)"])
def test_the_round_bound_still_allows_its_limit(expression: str) -> None:
    from toolfork.toolkits.calculator import evaluate_expression

    assert evaluate_expression(expression) in (0, 7.5)


# ---------------------------------------------------------------- FileSystemToolkit: escapes and bombs

SECRET = "TOP-SECRET-VALUE"


def _fs_tree(tmp_path: Path) -> tuple[Path, Path]:
    """root/ with an ordinary file; outside/ next to it holds the secret every attack is after."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (root / "notes.txt").write_text("inside\n")
    return root, outside


def _fs_tools(root: Path) -> dict[str, Any]:
    from toolfork.toolkits import FileSystemToolkit

    return {t.name: t for t in FileSystemToolkit(root).tools()}


class Swapper(threading.Thread):
    """Swaps ``root/swap`` between something inside the root and a symbolic link out of it, as fast
    as it goes, until stopped: a regular file <-> a link to the secret (atomic renames), or a real
    directory <-> a link to the outside directory (two renames each way)."""

    def __init__(self, root: Path, outside: Path, kind: str) -> None:
        super().__init__(daemon=True)
        self.root, self.outside, self.kind = root, outside, kind
        self.stop = threading.Event()
        self.swaps = 0
        name = root / "swap"
        if kind == "file":
            name.write_text("inside\n")
        else:
            name.mkdir()
            (name / "secret.txt").write_text("inside\n")
            (root / "swap.link").symlink_to(outside)

    def run(self) -> None:
        name, spare = self.root / "swap", self.root / "swap.next"
        while not self.stop.is_set():
            if self.kind == "file":
                spare.symlink_to(self.outside / "secret.txt")
                os.replace(spare, name)  # now a link out
                spare.write_text("inside\n")
                os.replace(spare, name)  # a regular file again
            else:
                os.rename(name, self.root / "swap.dir")
                os.rename(self.root / "swap.link", name)  # now a link out
                os.rename(name, self.root / "swap.link")
                os.rename(self.root / "swap.dir", name)  # the real directory again
            self.swaps += 1


@pytest.mark.parametrize("swapped", ["file", "directory"])
def test_a_symlink_swapped_during_reads_and_writes_never_reaches_outside(tmp_path: Path, swapped: str) -> None:
    root, outside = _fs_tree(tmp_path)
    fs = _fs_tools(root)
    if swapped == "file":  # root/swap: a regular file | a link to outside/secret.txt
        reads = [("read_file", {"path": "swap"}), ("preview_file", {"path": "swap"}),
                 ("parse_file", {"path": "swap"}), ("grep_file_content", {"pattern": "SECRET", "path": "swap"})]
        writes = [("edit_file", {"path": "swap", "search": "inside", "replace": "edited"}),
                  ("write_file", {"path": "swap", "content": "overwritten\n"})]
    else:  # root/swap: a directory holding secret.txt | a link to outside/
        (outside / "outside-only.txt").write_text(SECRET + "\n")
        reads = [("read_file", {"path": "swap/secret.txt"}), ("preview_file", {"path": "swap/secret.txt"}),
                 ("parse_file", {"path": "swap/secret.txt"}),
                 ("grep_file_content", {"pattern": "SECRET", "path": "swap"}),
                 ("describe_directory_content", {"path": "swap"}), ("glob_path", {"pattern": "*", "path": "swap"})]
        writes = [("edit_file", {"path": "swap/secret.txt", "search": "inside", "replace": "edited"}),
                  ("write_file", {"path": "swap/new.txt", "content": "planted\n", "create_dirs": False}),
                  ("delete_file", {"path": "swap/outside-only.txt"})]
    swapper = Swapper(root, outside, swapped)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # the swapper gets the GIL between any two steps of a tool
    swapper.start()
    outcomes = {"done inside": 0, "refused": 0}
    deadline = time.monotonic() + 30
    try:
        rounds = 0
        # 2,000 rounds at least, and on until the swapper has swapped often (a loaded machine gives it
        # fewer turns), within the deadline
        while (rounds < 2000 or swapper.swaps <= 200) and time.monotonic() < deadline:
            rounds += 1
            for tool_name, args in reads + writes:
                out = fs[tool_name].invoke(args)
                text = out.as_text().replace(str(args.get("path")), "")  # errors echo the path asked for
                assert SECRET not in text and "outside-only" not in text, (tool_name, text)
                outcomes["refused" if out.is_error else "done inside"] += 1
    finally:
        swapper.stop.set()
        swapper.join(10)
        sys.setswitchinterval(interval)
    assert (outside / "secret.txt").read_text() == SECRET + "\n"
    assert sorted(p.name for p in outside.iterdir()) == (
        ["secret.txt"] if swapped == "file" else ["outside-only.txt", "secret.txt"]
    )
    assert swapper.swaps > 100 and outcomes["done inside"] > 0, (swapper.swaps, outcomes)


def test_a_hard_link_to_a_file_outside_is_neither_read_nor_changed(tmp_path: Path) -> None:
    root, outside = _fs_tree(tmp_path)
    os.link(outside / "secret.txt", root / "hard.txt")
    fs = _fs_tools(root)
    for tool_name, args in [
        ("read_file", {"path": "hard.txt"}),
        ("preview_file", {"path": "hard.txt"}),
        ("parse_file", {"path": "hard.txt"}),
        ("grep_file_content", {"pattern": "SECRET", "path": "hard.txt"}),
        ("edit_file", {"path": "hard.txt", "search": "SECRET", "replace": "changed"}),
        ("write_file", {"path": "hard.txt", "content": "changed\n"}),
    ]:
        out = fs[tool_name].invoke(args)
        assert out.is_error and "2 hard links" in out.as_text(), (tool_name, out.as_text())
        assert SECRET not in out.as_text()
    walked = fs["grep_file_content"].invoke({"pattern": "SECRET"}).as_text()
    assert walked.startswith("No match") and "skipped 1 file(s)" in walked and SECRET not in walked
    listing = fs["describe_directory_content"].invoke({}).as_text()
    assert "hard.txt  [file, 17 B, 2 hard links: not readable here]" in listing
    assert (outside / "secret.txt").read_text() == SECRET + "\n"
    # Deleting removes the name inside the root only; the file outside stays.
    assert not fs["delete_file"].invoke({"path": "hard.txt"}).is_error
    assert not (root / "hard.txt").exists() and (outside / "secret.txt").read_text() == SECRET + "\n"


def _special_files(root: Path) -> list[tuple[str, str]]:
    """A FIFO and a listening socket's file in the tree (and a character device when we may make one)."""
    os.mkfifo(root / "pipe")
    made = [("pipe", "FIFO (named pipe)")]
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "sock"))  # the file stays after close
    server.close()
    made.append(("sock", "socket"))
    if os.geteuid() == 0:
        os.mknod(root / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: endless
        made.append(("zero", "character device"))
    return made


def test_a_fifo_socket_or_device_in_the_tree_hangs_no_tool(tmp_path: Path) -> None:
    from toolfork.toolkits import FileSystemToolkit

    root, _ = _fs_tree(tmp_path)
    specials = _special_files(root)
    calls, expected = [], []
    for name, kind in specials:
        for tool_name, args in [
            ("read_file", {"path": name}),
            ("preview_file", {"path": name}),
            ("parse_file", {"path": name}),
            ("grep_file_content", {"pattern": "x", "path": name}),
            ("edit_file", {"path": name, "search": "x", "replace": "y"}),
            ("write_file", {"path": name, "content": "x"}),
        ]:
            calls.append(ToolCall(f"{tool_name}-{name}", tool_name, args))
            expected.append(kind)
    walks = [ToolCall("grep-all", "grep_file_content", {"pattern": "inside"}),
             ToolCall("list", "describe_directory_content", {}),
             ToolCall("glob", "glob_path", {"pattern": "*"})]
    # A hang shows as "timeout" rather than hanging the suite.
    with Executor([FileSystemToolkit(root)], mode="fork", workers=2, timeout=20) as ex:
        results = ex.run(calls + walks)
    for r, kind in zip(results, expected, strict=False):
        assert r.status == "ok" and r.output is not None and r.output.is_error, (r.call_id, r.status, r.error)
        assert f"is a {kind}, not a regular file" in r.output.as_text(), (r.call_id, r.output.as_text())
    grep, listing, globbed = (r.output.as_text() for r in results[len(calls):] if r.output is not None)
    assert grep.startswith("notes.txt:1: inside") and f"skipped {len(specials)} file(s)" in grep
    assert "pipe  [FIFO (named pipe): not readable here]" in listing and "sock  [socket: not readable here]" in listing
    assert globbed.splitlines() == sorted(["notes.txt", *(name for name, _ in specials)])


def test_a_sparse_gigabyte_file_is_read_in_bounded_memory(tmp_path: Path) -> None:
    from toolfork.toolkits import FileSystemToolkit

    root, _ = _fs_tree(tmp_path)
    sparse = root / "sparse.txt"
    with sparse.open("w") as handle:
        handle.write("a text head, longer than what the binary check reads\n" * 400)  # 22 KB of text
        handle.truncate(1 << 30)  # then a billion NUL bytes that take no disk

    def attack() -> list[str]:
        fs = {t.name: t for t in FileSystemToolkit(root).tools()}
        outs = [fs["preview_file"].invoke({"path": "sparse.txt"}),
                fs["grep_file_content"].invoke({"pattern": "NOTHING-MATCHES"}),
                fs["grep_file_content"].invoke({"pattern": "text head", "path": "sparse.txt", "max_matches": 5000}),
                fs["parse_file"].invoke({"path": "sparse.txt", "max_chars": 1000}),
                fs["read_file"].invoke({"path": "sparse.txt", "max_bytes": 1000}),
                fs["edit_file"].invoke({"path": "sparse.txt", "search": "head", "replace": "x"})]
        return [o.as_text()[:300] + o.as_text()[-300:] for o in outs]

    texts, grown = in_bounded_child(attack)
    preview, nothing, grep, parsed, read, edit = texts
    assert '"line_count": null' in preview and '"size": "1.0 GB"' in preview
    assert nothing.startswith("No match") and grep.startswith("sparse.txt:1: a text head")
    assert "[truncated: showed 1000 of the characters of a 1.0 GB file]" in parsed
    assert "of 1073741824" in read
    assert "is 1.0 GB; the limit for this is" in edit
    assert grown < 300, f"peak RSS grew by {grown:.0f} MB reading a sparse 1 GB file"


GLOB_BOMBS = ["*a" * 28 + "*b", "**/" + "*a" * 40 + "*b", "?*" * 40 + "b"]


def test_glob_patterns_match_in_linear_time(tmp_path: Path) -> None:
    from toolfork.toolkits import FileSystemToolkit

    root, _ = _fs_tree(tmp_path)
    deep = root / "a"
    for _ in range(3):
        deep = deep / ("a" * 60)
    deep.mkdir(parents=True)
    (deep / ("a" * 200)).write_text("x")
    calls = [ToolCall(f"g{i}", "glob_path", {"pattern": p}) for i, p in enumerate(GLOB_BOMBS)]
    calls.append(ToolCall("grep", "grep_file_content", {"pattern": "x", "file_glob": GLOB_BOMBS[0]}))
    calls.append(ToolCall("long", "glob_path", {"pattern": "*" * 1001}))
    # Each of these took seconds to hours with a backtracking regex; a regression shows as "timeout".
    with Executor([FileSystemToolkit(root)], mode="fork", workers=2, timeout=20) as ex:
        results = ex.run(calls)
    for r in results[:-1]:
        assert r.status == "ok" and r.output is not None, (r.call_id, r.status)
        assert r.output.as_text().startswith(("No path matches", "No match")), r.output.as_text()
    last = results[-1].output
    assert last is not None and last.is_error and "the limit is 1000" in last.as_text()
