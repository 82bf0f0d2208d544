"""``PythonInterpreter``: a code interpreter for agents, one sandboxed session per episode.

Why: the tool that runs the code a model wrote is the one that most needs a boundary. Here every
episode gets a session (``Executor.session``) whose process holds a ``Kernel`` (a namespace that
persists between cells, in a private workspace directory); the session is sandboxed by default (no
network, writes only in its workspace, memory and CPU bounded for every process the cell starts)
and keeps a checkpoint, so a cell that times out, crashes the interpreter or runs out of memory is
rolled back: the next cell sees the variables and imports from before it, and the model is told so.

    PythonInterpreter(...).open(executor) ──> InterpreterSession: a workspace + ex.session(Kernel, ...)
    InterpreterSession.run_cell(code) ──> the ``python`` tool in the session ──> Kernel.run(code)
        ──> plain data ──> ToolOutput: text (stdout, stderr, value, traceback, files) + PNG image blocks
        a timeout, crash or limit ──> the checkpoint takes over ──> an error saying the state was rolled back

Files the cell wrote in the workspace are not rolled back (they live on disk, outside the process).
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from toolfork.governance.limits import Limits
from toolfork.toolkits.interpreter_kernel import LIMIT_EXIT, MAX_STREAM_CHARS, Kernel
from toolfork.tools import Tool, Toolkit, ToolOutput, ToolRuntime
from toolfork.tools.output import ContentBlock

LOST = ("the interpreter is lost: its checkpoint could not take over, so no later cell of this episode can run "
        "(open a new one)")
ROLLED_BACK = ("the interpreter was rolled back to its state before this cell (variables and imports as "
               "they were); files the cell wrote in the workspace stay as it left them")


def _python(code: str, runtime: ToolRuntime) -> ToolOutput:
    """Run a cell of Python in this episode's interpreter and show what a notebook shows: what it
    printed, the value of its last expression, its exception's traceback, its figures and the files it
    wrote. Variables, functions and imports persist between cells; the working directory is the
    episode's workspace.

    Args:
        code: the Python source of the cell
    """
    kernel = runtime.state
    if not isinstance(kernel, Kernel):
        return ToolOutput.error("the python tool runs in an interpreter session: open one with "
                                "PythonInterpreter(...).open(executor) and run cells there")
    return render(kernel.run(code))


def render(cell: dict[str, Any]) -> ToolOutput:
    """A cell's record (``Kernel.run``) as the model reads it: one text block, then one image block each."""
    parts = []
    for key, label in (("stdout", "stdout"), ("stderr", "stderr")):
        if cell[key]:
            parts.append(f"[{label}]\n{cell[key]}")
    if cell["value"] is not None:
        parts.append(f"[value]\n{cell['value']}")
    if cell["error"] is not None:
        parts.append(f"[error]\n{cell['error']['traceback']}")
    if cell["files"]:
        listed = "\n".join(f"{f['path']} ({f['size']} bytes)" for f in cell["files"])
        parts.append(f"[files written in the workspace]\n{listed}")
    if cell["images"]:
        parts.append(f"[{len(cell['images'])} image(s) below]")
    blocks = [ContentBlock("text", "\n".join(parts) if parts else "(no output)")]
    blocks += [ContentBlock("image", data=i["data"], media_type=i["media_type"]) for i in cell["images"]]
    return ToolOutput(blocks, cell["error"] is not None, cell)


# The session's checkpoint (``Executor.session``'s word): the copy from before a cell is ended, and the
# next one forked, after the cell's result is out and before the next cell is read (the model's turn).
CHECKPOINT = "after_result"
SYSTEM_READS = ("/usr", "/lib", "/lib64", "/bin", "/dev/null", "/dev/zero", "/dev/urandom", "/sys/devices/system/cpu")


def readable(workspace: str, extra: Iterable[str] = ()) -> list[str]:
    """What a cell may read: its workspace, ``extra``, the interpreter (its prefixes, the directories on
    ``sys.path``) and the system's libraries; never the directory the workspaces are made in, so one
    episode cannot read another's files."""
    return sorted({*([workspace] if os.path.exists(workspace) else []),
                   *_interpreter_reads(tuple(extra), tuple(sys.path), tempfile.gettempdir(), os.getcwd())})


@functools.lru_cache(maxsize=16)
def _interpreter_reads(extra: tuple[str, ...], path: tuple[str, ...], temp: str, cwd: str) -> tuple[str, ...]:
    """``readable`` but the workspace, for one ``sys.path`` (worked out once: it looks at the disk)."""
    shared = os.path.realpath(temp)
    paths = {*extra, *SYSTEM_READS, sys.prefix, sys.base_prefix, sys.exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    for entry in path:
        where = os.path.realpath(entry or cwd)
        if os.path.isdir(where) and where != "/" and os.path.commonpath([where, shared]) != where:
            paths.add(where)
    return tuple(p for p in paths if os.path.exists(p))


class PythonInterpreter(Toolkit):
    """One tool, ``python``, that runs a cell in the episode's interpreter session (see ``open``).

    ``timeout``: seconds per cell. ``memory_mb``, ``cpu_s``: bounds on the whole cell (every process it
    starts). ``network``: False (the default) gives the cell no network. ``read_paths``: more that the cell
    may read, besides its workspace, the interpreter and the system's libraries (``readable``).
    ``sandbox``: False runs sessions without the sandbox tier (trusted code only: the cell can reach
    everything the host can)."""

    name = "python_interpreter"

    def __init__(self, *, timeout: float | None = 30.0, memory_mb: int | None = 1024, cpu_s: float | None = None,
                 network: bool = False, read_paths: Sequence[str] | None = None, sandbox: bool = True,
                 max_output_chars: int = MAX_STREAM_CHARS) -> None:
        super().__init__()
        if timeout is not None and not timeout > 0:
            raise ValueError(f"PythonInterpreter: timeout={timeout!r}: give seconds (> 0) or None")
        if not isinstance(max_output_chars, int) or max_output_chars < 1:
            raise ValueError(f"PythonInterpreter: max_output_chars={max_output_chars!r}: give a positive int")
        self.timeout = timeout
        self.memory_mb, self.cpu_s, self.network, self.sandbox = memory_mb, cpu_s, network, sandbox
        self.read_paths = None if read_paths is None else [os.path.abspath(p) for p in read_paths]
        self.max_output_chars = max_output_chars
        Limits(memory_mb=memory_mb, cpu_s=cpu_s, network=network)  # a bad setting is refused here, named
        # per executor, the workspace of the episode opened ahead for the next ``open`` (``_prepare_next``)
        self._ahead: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._ahead_lock = threading.Lock()

    def provide(self) -> list[Tool]:
        return [Tool("python", fn=_python, timeout=self.timeout)]

    def guidelines(self) -> str | None:
        return ("`python` runs code in a persistent interpreter: define things in one cell and use them in "
                "the next. Print what you need to see; the last expression's value is shown. "
                f"{'There is no network. ' if not self.network else ''}Write files in the current directory.")

    def limits(self, workspace: str) -> Limits:
        """The session's limits for an episode whose workspace is ``workspace``."""
        return Limits(sandbox=True, network=self.network, write_paths=[workspace],
                      read_paths=readable(workspace, self.read_paths or ()), memory_mb=self.memory_mb,
                      cpu_s=self.cpu_s)

    def open(self, executor: Any, workspace: str | None = None) -> InterpreterSession:
        """An interpreter for one episode on ``executor`` (an ``Executor`` holding this toolkit's tool):
        its own session, in ``workspace`` (None: a new temporary directory, removed at close)."""
        if not self.sandbox and executor.mode != "fork":
            raise RuntimeError(f"PythonInterpreter(sandbox=False).open: this executor's sessions run in "
                               f"{executor.mode} mode, where a cell would not run in a process of its own (it "
                               "would change this process's directory and streams, and a crash would be this "
                               "process's): use mode='fork'")
        made = workspace is None
        where = (self._take_ahead(executor) or _workspace()) if workspace is None else os.path.abspath(workspace)
        try:
            # refused at open, naming why, where the backend or the machine cannot give the sandbox
            session = executor.session(Kernel, where, self.max_output_chars, checkpoint=CHECKPOINT,
                                       **self._options(where))
        except BaseException:
            if made:
                shutil.rmtree(where, ignore_errors=True)
            raise
        if made:
            self._prepare_next(executor)
        return InterpreterSession(session, where, made, self.timeout)

    def _options(self, workspace: str) -> dict[str, Any]:
        return {"limits": self.limits(workspace)} if self.sandbox else {}

    def _take_ahead(self, executor: Any) -> str | None:
        with self._ahead_lock:
            return self._ahead.pop(executor, None)

    def _prepare_next(self, executor: Any) -> None:
        """The next episode on ``executor``, opened ahead in a workspace of its own made now (the executor's
        ``session_ahead``): the next ``open`` with these settings is handed it whole. One at a time; its
        workspace is removed if it is let go unused."""
        ahead = getattr(executor, "session_ahead", None)
        if ahead is None:
            return
        with self._ahead_lock:
            if executor in self._ahead:
                return
            where = _workspace()
            self._ahead[executor] = where
        owner = weakref.ref(executor)

        def discard() -> None:  # unless an open took the workspace meanwhile: it is that episode's then
            ex = owner()
            with self._ahead_lock:
                if ex is not None and self._ahead.get(ex) != where:
                    return
                if ex is not None:
                    del self._ahead[ex]
            shutil.rmtree(where, ignore_errors=True)

        try:
            kept = ahead(Kernel, where, self.max_output_chars, checkpoint=CHECKPOINT, on_discard=discard,
                         **self._options(where))
        except Exception:  # (the executor closed meanwhile): the next open opens its own
            kept = False
        if not kept:
            discard()


def _workspace() -> str:
    return tempfile.mkdtemp(prefix="toolfork-interpreter-")


class InterpreterSession:
    """One episode's interpreter: ``run_cell(code)`` runs a cell; ``run(calls)`` runs the model's
    ``python`` calls in order. A cell that timed out, crashed or hit a limit comes back as an error
    saying the state was rolled back. ``close()`` (or ``with``) ends it."""

    def __init__(self, session: Any, workspace: str, owned: bool, timeout: float | None = None) -> None:
        self.session = session
        self.timeout = timeout  # per cell, the interpreter's (the tool the executor holds may be another's)
        self.workspace = workspace
        self._owned = owned
        self._cells = 0

    def run_cell(self, code: str, timeout: float | None = None) -> Any:
        """Run one cell (``timeout``: seconds, else the interpreter's); its ``ToolResult`` (``output`` is
        what the model reads, ``output.data`` the record)."""
        self._cells += 1  # a call as a dict: toolkits sit beside the executor and never import it
        return self.run([{"id": f"cell-{self._cells}", "name": "python", "arguments": {"code": code},
                          "timeout": self.timeout if timeout is None else timeout}])[0]

    def run(self, calls: Iterable[Any]) -> list[Any]:
        """The session's ``run``, with a rolled-back cell's error saying so (or that the interpreter is lost)."""
        before = self.session.restores
        results = self.session.run(calls)
        for r in results:
            faulted = r.status in ("timeout", "crashed") or (r.error is not None and r.error.type == "LimitExceeded")
            if not faulted or r.error is None:
                continue
            what = ("ran out of memory" if f"code {LIMIT_EXIT}" in r.error.message else "timed out"
                    if r.status == "timeout" else "hit a limit" if r.status == "error" else "crashed")
            if self.session.restores > before:
                r.error.message = f"the cell {what} ({r.error.message}); {ROLLED_BACK}"
            elif self.session.lost is not None:
                r.error.message = f"the cell {what} ({r.error.message}); {LOST}"
        return results

    @property
    def restores(self) -> int:
        return int(self.session.restores)

    def close(self) -> None:
        self.session.close()
        if self._owned:
            shutil.rmtree(self.workspace, ignore_errors=True)

    def __enter__(self) -> InterpreterSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["CHECKPOINT", "ROLLED_BACK", "InterpreterSession", "PythonInterpreter", "render"]
