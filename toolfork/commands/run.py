"""``toolfork run CALLS.jsonl``: a batch job, one result line per input line, in input order.

Data flow::

    LineSource ──(lineno, bytes)──> parse_call ──ToolCall──> Executor.imap ──ToolResult──┐
        │ (a thread for pipes,          │ BadLine / duplicate id                          │ call order
        │  so idle input is visible)    └──> record, queued behind the calls before it ───┴─> OutFile
                                                                                              (one write a line)

Memory stays bounded whatever the input size: ``imap`` keeps at most ``--window`` calls in flight,
the pipe reader's queue is bounded, and the only thing that grows with the input is the set of ids
seen (16 bytes an id, see ``IdSet``).

When the input is a pipe (``toolfork run - -o -`` driven as a co-process) the feeder stops pulling
as soon as no further line is waiting, so the calls already read finish and their results are written
instead of waiting for input that the other side only sends after reading them.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import stat
import sys
import threading
import time
from array import array
from collections import deque
from collections.abc import Iterator
from typing import IO, Any

from toolfork.commands._loading import (
    BadLine,
    UsageError,
    default_tools_file,
    load_all_tools,
    load_hook,
    parse_call,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# Records of bad lines held back behind running calls before the feeder pauses to let them out.
MAX_HELD_RECORDS = 1024
READ_AHEAD_LINES = 1024
# Default window floor: quick calls travel to the workers in chunks no larger than the window, so a
# batch job with thousands of trivial calls needs a wide one (measured on 2 workers: window 8 ->
# 16k calls/s, 512 -> 44k calls/s). What it costs is at most this many results held in memory.
MIN_DEFAULT_WINDOW = 256


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("calls", metavar="CALLS.jsonl",
                        help="one tool call per line ('-' = stdin): plain, OpenAI tool_calls or Anthropic "
                             "tool_use shape. Without --tools/--toolkit, the tools.py next to it is loaded")
    parser.add_argument("-o", "--output", metavar="OUT.jsonl", default="-",
                        help="where result lines go ('-' = stdout, the default)")
    add_common_arguments(parser)
    parser.add_argument("--resume", action="store_true",
                        help="skip ids already in OUT (complete lines) and append the rest")
    parser.add_argument("--window", type=positive_int, default=None, metavar="N",
                        help="calls in flight or buffered at most (default 4 x workers, at least "
                             f"{MIN_DEFAULT_WINDOW}); lower it when single results are very large")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--progress-interval", type=positive_float, default=2.0, metavar="S",
                        help="seconds between plain progress lines when stderr is not a terminal (2)")


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``run`` and ``worker`` share: where tools come from and how they are executed."""
    from toolfork.executor.modes import MODES

    parser.add_argument("--tools", action="append", default=[], metavar="MODULE:ATTR",
                        help="tools to load: a Tool, Toolkit, function or list of them, from a module "
                             "(examples.tools) or a file (examples/tools.py); repeatable. Without :ATTR "
                             "the module's TOOLS list is used")
    parser.add_argument("--toolkit", action="append", default=[], metavar="NAME",
                        help="a built-in toolkit by name (e.g. calculator); repeatable")
    parser.add_argument("--workers", type=positive_int, default=None, metavar="N",
                        help="worker processes (default: 4 x CPUs, between 4 and 32)")
    parser.add_argument("--timeout", type=positive_float, default=None, metavar="S",
                        help="per-call timeout in seconds when neither the call nor the tool sets one")
    parser.add_argument("--mode", choices=MODES, default="auto", help="where calls run (default auto)")
    parser.add_argument("--address", default=None, metavar="ADDR",
                        help="Ray cluster address (implies --mode ray)")
    parser.add_argument("--before-child", default=None, metavar="MODULE:FN",
                        help="called in the worker right before each call")
    parser.add_argument("--after-child", default=None, metavar="MODULE:FN",
                        help="called in the worker right after each call")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


# ----------------------------------------------------------------------------------------- setup


def build_executor(args: argparse.Namespace, tools: list[Any]) -> Any:
    """The Executor the options describe; any refusal (mode impossible here, Ray missing) is a usage
    error because the user can fix it on the command line."""
    from toolfork.executor import Executor

    mode = args.mode
    if args.address is not None:
        if mode not in ("auto", "ray"):
            raise UsageError(f"--address is for --mode ray, not --mode {mode}")
        mode = "ray"
    before = load_hook(args.before_child, "--before-child") if args.before_child else None
    after = load_hook(args.after_child, "--after-child") if args.after_child else None
    try:
        return Executor(tools, mode=mode, workers=args.workers, timeout=args.timeout,
                        before_child=before, after_child=after, address=args.address)
    except (ValueError, RuntimeError, ImportError) as exc:
        raise UsageError(f"cannot start the executor: {exc}") from exc


def resolve_tools(args: argparse.Namespace, calls_path: str | None) -> tuple[list[Any], str]:
    """(tools, where they came from). With neither --tools nor --toolkit, a ``tools.py`` next to the
    calls file is the convention, so ``toolfork run examples/calls.jsonl`` just works."""
    specs, toolkits = list(args.tools), list(args.toolkit)
    if not specs and not toolkits:
        found = default_tools_file(calls_path) if calls_path is not None else None
        if found is None:
            beside = "" if calls_path in (None, "-") else " (or put a tools.py next to the calls file)"
            raise UsageError(f"no tools: pass --tools MODULE:ATTR or --toolkit NAME{beside}")
        specs = [str(found)]
    tools = load_all_tools(specs, toolkits)
    return tools, ", ".join([*specs, *(f"toolkit {n}" for n in toolkits)])


# ----------------------------------------------------------------------------------------- ids


class IdSet:
    """The ids a job has seen, at 16 bytes each, so a million-line input does not hold a million str
    objects (~90 bytes each in a set). It keeps 64-bit hashes in an open-addressing table: two distinct
    ids collide with probability ~n²/2⁶⁵ (3e-8 for a million ids), a risk worth the memory."""

    __slots__ = ("_count", "_mask", "_table")

    def __init__(self) -> None:
        self._table = array("Q", bytes(8 * 1024))
        self._mask = 1023
        self._count = 0

    @staticmethod
    def _hash(key: str) -> int:
        return (hash(key) & 0xFFFF_FFFF_FFFF_FFFF) or 1  # 0 marks an empty slot

    def __contains__(self, key: str) -> bool:
        h, table, mask = self._hash(key), self._table, self._mask
        i = h & mask
        while True:
            v = table[i]
            if v == h:
                return True
            if v == 0:
                return False
            i = (i + 1) & mask

    def add(self, key: str) -> bool:
        """Add ``key``; False when it was already there."""
        h = self._hash(key)
        if not self._put(h):
            return False
        self._count += 1
        if self._count * 2 > self._mask:
            old = self._table
            self._table = array("Q", bytes(16 * len(old)))
            self._mask = 2 * len(old) - 1
            for v in old:
                if v:
                    self._put(v)
        return True

    def _put(self, h: int) -> bool:
        table, mask = self._table, self._mask
        i = h & mask
        while True:
            v = table[i]
            if v == h:
                return False
            if v == 0:
                table[i] = h
                return True
            i = (i + 1) & mask

    def __len__(self) -> int:
        return self._count


# ----------------------------------------------------------------------------------------- input


_EOF = object()


class LineSource:
    """The input's lines with their 1-based numbers. ``ready()`` tells whether the next line (or the
    end) is there without waiting: always for a regular file; for a pipe or terminal a reader thread
    fills a bounded queue, so the caller can stop feeding the executor while the other side is idle."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lineno = 0
        self._queue: queue.Queue[Any] | None = None
        if not _is_regular(stream):
            self._queue = queue.Queue(maxsize=READ_AHEAD_LINES)
            threading.Thread(target=self._read, name="toolfork-run-reader", daemon=True).start()

    def _read(self) -> None:
        assert self._queue is not None
        try:
            for line in self._stream:
                self._queue.put(line)
            self._queue.put(_EOF)
        except BaseException as exc:  # handed to the main thread, which reports it
            self._queue.put(exc)

    def ready(self) -> bool:
        return self._queue is None or not self._queue.empty()

    def next(self) -> tuple[int, bytes] | None:
        """The next line, waiting for it if need be; None at the end."""
        if self._queue is None:
            line = self._stream.readline()
            if not line:
                return None
        else:
            item = self._queue.get()
            if item is _EOF:
                self._queue.put(_EOF)  # stay at the end for any later call
                return None
            if isinstance(item, BaseException):
                raise OSError(f"reading the input failed: {item}") from item
            line = item
        self._lineno += 1
        return self._lineno, line


def _is_regular(stream: IO[bytes]) -> bool:
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both
        return True  # an in-memory stream without a descriptor never blocks


def count_lines(path: str) -> int | None:
    """Lines in a regular file, for the progress bar's total (a fast byte scan, constant memory)."""
    try:
        n, last = 0, b"\n"
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                n += chunk.count(b"\n")
                last = chunk[-1:]
        return n + (last != b"\n")
    except OSError:
        return None


# ----------------------------------------------------------------------------------------- output


def result_failed(record: dict[str, Any]) -> bool:
    """A call failed when its status is not ok, or it is ok with an error output (the tool reported
    a failure the model could act on: for a batch job that is still a failure)."""
    if record.get("status") != "ok":
        return True
    output = record.get("output")
    return isinstance(output, dict) and bool(output.get("is_error"))


class OutFile:
    """Result lines, each written with one ``write`` of a complete line and flushed at once (no
    buffer), so a reader or a killed job never sees half a line written by us."""

    def __init__(self, fd: int | None, name: str, close: bool) -> None:
        self.fd = fd  # None: sys.stdout has no descriptor (redirected in-process), write through it
        self.name = name
        self._close = close

    @classmethod
    def open(cls, path: str, *, append: bool) -> OutFile:
        if path == "-":
            sys.stdout.flush()
            try:
                fd: int | None = sys.stdout.fileno()
            except (AttributeError, OSError, ValueError):
                fd = None
            return cls(fd, "<stdout>", close=False)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        try:
            return cls(os.open(path, flags, 0o666), path, close=True)
        except OSError as exc:
            raise UsageError(f"cannot write {path!r}: {exc.strerror}") from exc

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        if self.fd is None:
            sys.stdout.write(line)
            sys.stdout.flush()
            return
        view = memoryview(line.encode("utf-8", "surrogatepass"))
        while view:
            view = view[os.write(self.fd, view):]

    def close(self) -> None:
        if self._close and self.fd is not None:
            os.close(self.fd)


def scan_previous(path: str) -> tuple[IdSet, int, int]:
    """For --resume: the ids of OUT's complete lines, how many there are and how many failed. A
    trailing partial line (the job was killed mid-write) is cut off so the appended lines start clean;
    a complete line that is not a JSON record is left alone and its call runs again."""
    done = IdSet()
    count = failed = 0
    keep = 0
    try:
        with open(path, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break
                keep += len(line)
                try:
                    record = json.loads(line)
                    call_id = record["id"]
                except (ValueError, KeyError, TypeError):
                    continue
                if done.add(str(call_id)):
                    count += 1
                    failed += result_failed(record)
        if os.path.getsize(path) > keep:
            os.truncate(path, keep)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise UsageError(f"--resume: cannot read {path!r}: {exc.strerror}") from exc
    return done, count, failed


# ----------------------------------------------------------------------------------------- progress


class Progress:
    """Calls done, rate and failures on stderr: a bar redrawn in place on a terminal, otherwise a plain
    line every ``interval`` seconds while calls finish, and one at the end."""

    BAR = 24

    def __init__(self, stream: IO[str] | None, total: int | None, interval: float) -> None:
        self.stream = stream
        self.total = total
        self.tty = bool(stream is not None and stream.isatty())
        self.interval = 0.1 if self.tty else interval
        self.start = time.monotonic()
        self.last = self.start
        self.done = self.failed = self.skipped = self.position = 0
        self._ran = 0

    def note(self, *, failed: bool, lineno: int, ran: bool = True) -> None:
        self.done += 1
        self.failed += failed
        self._ran += ran
        self.position = max(self.position, lineno)
        now = time.monotonic()
        if self.stream is not None and now - self.last >= self.interval:
            self.last = now
            self._show(now, final=False)

    def skip(self, lineno: int) -> None:
        self.skipped += 1
        self.position = max(self.position, lineno)

    def message(self, text: str) -> None:
        if self.stream is not None:
            self.stream.write(("\r\x1b[K" if self.tty else "") + text + "\n")
            self.stream.flush()

    def finish(self, note: str = "") -> None:
        if self.stream is not None:
            self._show(time.monotonic(), final=True, note=note)

    def _show(self, now: float, *, final: bool, note: str = "") -> None:
        assert self.stream is not None
        elapsed = max(now - self.start, 1e-9)
        rate = self._ran / elapsed
        parts = [f"{self.done} done", f"{self.failed} failed"]
        if self.skipped:
            parts.append(f"{self.skipped} skipped (in OUT)")
        parts.append(f"{rate:.1f} calls/s")
        if final:
            parts.append(f"{elapsed:.1f} s")
        elif self.total and rate > 0:
            left = max(self.total - self.position, 0) / rate
            parts.append(f"ETA {int(left) // 60}:{int(left) % 60:02d}")
        text = ", ".join(parts) + (f" ({note})" if note else "")
        if self.tty:
            bar = ""
            if self.total:
                filled = min(self.BAR, self.BAR * self.position // max(self.total, 1))
                bar = f"[{'#' * filled}{'.' * (self.BAR - filled)}] {100 * self.position // self.total:3d}% "
            self.stream.write(f"\r\x1b[K{bar}{text}" + ("\n" if final else ""))
        else:
            percent = f"{100 * self.position // self.total}%, " if self.total and not final else ""
            self.stream.write(f"toolfork run: {percent}{text}\n")
        self.stream.flush()


# ----------------------------------------------------------------------------------------- the job


class Job:
    """Feeds the executor from the input and writes every line's record in input order.

    ``held`` lists what is owed to the output in input order: ``None`` for a call whose result the
    executor has not returned yet, or a ready record (a bad line) that must wait behind those calls.
    """

    def __init__(self, executor: Any, source: LineSource, out: OutFile, progress: Progress,
                 done: IdSet, window: int) -> None:
        self.executor = executor
        self.source = source
        self.out = out
        self.progress = progress
        self.done = done
        self.seen = IdSet()
        self.window = window
        self.held: deque[tuple[int, dict[str, Any] | None]] = deque()
        self.held_records = 0
        self.exhausted = False

    def run(self) -> None:
        while not self.exhausted:
            for result in self.executor.imap(self._calls(), window=self.window):
                self._emit_held()
                lineno, placeholder = self.held.popleft()
                assert placeholder is None, "results and calls out of step"
                record = result.to_dict()
                self._write(record, lineno, ran=True)
                self._emit_held()
            self._emit_held()
            assert not self.held, "a call got no result"

    def _calls(self) -> Iterator[Any]:
        while True:
            if self.held and (not self.source.ready() or self.held_records >= MAX_HELD_RECORDS):
                return  # let the calls in flight finish (idle co-process input, or too much held)
            item = self.source.next()
            if item is None:
                self.exhausted = True
                return
            lineno, raw = item
            if not raw.strip():
                continue
            call = parse_call(raw, lineno)
            if isinstance(call, BadLine):
                if call.id in self.done:
                    self.progress.skip(lineno)
                    continue
                if not self.seen.add(call.id):
                    call.message += f"; its id {call.id!r} is also used by an earlier line"
                self._hold_or_write(call.record(), lineno)
                continue
            if call.id in self.done:
                self.seen.add(call.id)
                self.progress.skip(lineno)
                continue
            if not self.seen.add(call.id):
                bad = BadLine(call.id, call.name,
                              f"line {lineno}: duplicate id {call.id!r}: an earlier line has the same id")
                self._hold_or_write(bad.record(), lineno)
                continue
            self.held.append((lineno, None))
            yield call

    def _hold_or_write(self, record: dict[str, Any], lineno: int) -> None:
        if self.held:
            self.held.append((lineno, record))
            self.held_records += 1
        else:
            self._write(record, lineno, ran=False)

    def _emit_held(self) -> None:
        while self.held and self.held[0][1] is not None:
            lineno, record = self.held.popleft()
            self.held_records -= 1
            assert record is not None
            self._write(record, lineno, ran=False)

    def _write(self, record: dict[str, Any], lineno: int, *, ran: bool) -> None:
        self.out.write(record)
        self.progress.note(failed=result_failed(record), lineno=lineno, ran=ran)


def default_window(workers: int) -> int:
    return max(4 * workers, MIN_DEFAULT_WINDOW)


def _open_input(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")  # closed by main
    except OSError as exc:
        raise UsageError(f"cannot read {path!r}: {exc.strerror}") from exc


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def error(command: str, message: str) -> int:
    print(f"toolfork {command}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(args: argparse.Namespace) -> int:
    if args.resume and args.output == "-":
        return error("run", "--resume needs -o OUT.jsonl: the ids already done are read from that file")
    if args.calls != "-" and args.output != "-" and _same_file(args.calls, args.output):
        return error("run", f"-o {args.output!r} is the input file; it would be overwritten")
    try:
        tools, origin = resolve_tools(args, args.calls)
        stream = _open_input(args.calls)
    except UsageError as exc:
        return error("run", str(exc))
    executor = out = None
    try:
        done, previous, previous_failed = scan_previous(args.output) if args.resume else (IdSet(), 0, 0)
        executor = build_executor(args, tools)
        out = OutFile.open(args.output, append=args.resume)
    except UsageError as exc:
        if executor is not None:
            executor.close()
        stream.close()
        return error("run", str(exc))
    total = count_lines(args.calls) if args.calls != "-" else None
    progress = Progress(None if args.quiet else sys.stderr, total, args.progress_interval)
    reason = f" ({executor.fallback_reason})" if executor.fallback_reason else ""
    progress.message(f"toolfork run: {len(executor.tools)} tools from {origin}; {executor.mode} mode{reason}, "
                     f"{executor.workers} workers" + (f"; resuming after {previous} done" if args.resume else ""))
    window = args.window or default_window(executor.workers)
    job = Job(executor, LineSource(stream), out, progress, done, window)
    code = EXIT_OK
    try:
        job.run()
    except KeyboardInterrupt:
        progress.finish("interrupted; rerun with --resume to continue")
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        code = EXIT_FAILED  # the reader of our output went away: nothing left to do
    except OSError as exc:
        progress.finish()
        code = error("run", str(exc))
    else:
        progress.finish()
        code = EXIT_FAILED if progress.failed or previous_failed else EXIT_OK
    finally:
        executor.close()
        out.close()
        if stream is not sys.stdin.buffer:
            stream.close()
    return code


__all__ = ["IdSet", "Job", "LineSource", "OutFile", "Progress", "add_arguments", "main", "scan_previous"]
