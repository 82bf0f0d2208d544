"""The state of a code interpreter session: a Python namespace and a cell runner that records what a
notebook shows.

Why: agent-written code must run where nothing it does reaches the host (a sandboxed session, see
``toolfork.toolkits.interpreter``), and what it printed, returned, raised, drew and wrote must come
back as plain data: a sandboxed session's results cross on the data-only wire, which rebuilds no
object. So ``Kernel`` lives in the session's process (built there by the session's factory) and
``Kernel.run`` returns a ``dict`` of strings, numbers and lists only.

    run(code) ──> parse: body + last expression ──> exec body, eval last (stdout/stderr captured, bounded)
              ──> value's repr | PIL image | traceback ──> open matplotlib figures as PNG
              ──> files the cell created or changed in the workspace ──> a dict of plain data

A ``MemoryError`` ends the process (``LIMIT_EXIT``) instead of coming back as an exception: the cell
may have changed the namespace half way, and the session's checkpoint, which takes over when the
process ends, gives back the state from before the cell.
"""

from __future__ import annotations

import ast
import base64
import importlib
import io
import linecache
import os
import sys
import traceback
from typing import Any

MAX_STREAM_CHARS = 20_000  # each of stdout, stderr, the value's repr and the traceback
MAX_IMAGES = 8  # figures and images one cell returns
MAX_FILES = 100  # files listed per cell
MAX_WALK = 10_000  # directory entries looked at to find them
LIMIT_EXIT = 86  # exit status of a session process whose cell ran out of memory (75 is the wire's)


class Bounded(io.TextIOBase):
    """A text stream that keeps its first ``limit`` characters and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(s[:room])
            self.kept += min(room, len(s))
        self.dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def text(self) -> str:
        return cut("".join(self.parts), self.dropped)


def cut(text: str, dropped: int) -> str:
    """``text`` with the cut said at its end, when something was left out."""
    return text if not dropped else f"{text}\n[... {dropped} more characters not shown]"


def bounded(text: str, limit: int = MAX_STREAM_CHARS) -> str:
    return cut(text[:limit], max(0, len(text) - limit))


def _is_ours(exc: BaseException) -> bool:
    """An exception by which toolfork or the user stops the cell: it must pass, not become output."""
    return isinstance(exc, (KeyboardInterrupt, GeneratorExit)) or type(exc).__module__.startswith("toolfork.")


class Kernel:
    """A namespace that persists between cells, in a workspace directory the cells run in."""

    def __init__(self, workspace: str, max_chars: int = MAX_STREAM_CHARS, whole: tuple[str, ...] = (),
                 preload: tuple[str, ...] = ()) -> None:
        if not os.path.isdir(workspace):
            raise FileNotFoundError(f"the interpreter's workspace {workspace!r} is not a directory")
        for module in preload:  # imported now (a session opened ahead: before anyone waits), not bound to a name
            try:
                importlib.import_module(module)
            except Exception:  # a cell that imports it gets the error itself, then
                continue
        self.workspace = os.path.abspath(workspace)
        os.chdir(self.workspace)
        os.environ.setdefault("MPLBACKEND", "Agg")  # figures are drawn into PNGs, never to a screen
        os.environ.setdefault("MPLCONFIGDIR", os.path.join(self.workspace, ".matplotlib"))
        self.namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        self.cells = 0
        self.max_chars = max_chars
        self.whole = whole  # names of exception types whose message crosses whole (an answer, not a report)

    def run(self, code: str) -> dict[str, Any]:
        """Run one cell; what it showed, as plain data (see the module's docstring)."""
        max_chars = self.max_chars
        self.cells += 1
        name = f"<cell {self.cells}>"
        before = self._files()
        out, err = Bounded(max_chars), Bounded(max_chars)
        value: Any = None
        error: dict[str, str] | None = None
        saved = sys.stdin, sys.stdout, sys.stderr
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(), out, err  # type: ignore[assignment]  # input(): EOFError
        try:
            value = self._execute(code, name)
        except MemoryError:
            os._exit(LIMIT_EXIT)
        except BaseException as exc:
            if _is_ours(exc):
                raise
            error = self._error(exc, None if type(exc).__name__ in self.whole else max_chars)
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved
        text: str | None = None
        value_image = False  # the last expression was an image: it is the first of ``images``
        shown = value is not None and _is_open_figure(value)  # drawn with the open figures below
        images = self._figures()
        if value is not None and not shown:
            png = _png(value)
            if png is not None:
                images.insert(0, png)
                value_image = True
            else:
                try:
                    text = bounded(repr(value), max_chars)
                except Exception as exc:  # a repr that raises is the cell's error, not the kernel's
                    error = self._error(exc, max_chars)
        return {"stdout": out.text(), "stderr": err.text(), "value": text, "value_image": value_image, "error": error,
                "images": images[:MAX_IMAGES], "files": self._changed(before)}

    def _execute(self, code: str, name: str) -> Any:
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)  # tracebacks show the lines
        tree = ast.parse(code, name, "exec")
        last: ast.expr | None = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = tree.body.pop().value  # type: ignore[attr-defined]
        exec(compile(tree, name, "exec"), self.namespace)
        if last is None:
            return None
        return eval(compile(ast.Expression(last), name, "eval"), self.namespace)

    @staticmethod
    def _error(exc: BaseException, max_chars: int | None) -> dict[str, str]:
        tb = exc.__traceback__
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell"):
            tb = tb.tb_next  # the kernel's own frames are not the cell's business
        lines = traceback.format_exception(type(exc), exc, tb)
        message = str(exc) if max_chars is None else bounded(str(exc), max_chars)
        return {"type": type(exc).__name__, "message": message,
                "traceback": bounded("".join(lines), max_chars or MAX_STREAM_CHARS)}

    @staticmethod
    def _figures() -> list[dict[str, str]]:
        """The open matplotlib figures as PNGs, closed once drawn (a notebook shows each once)."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return []
        images = []
        for number in plt.get_fignums()[:MAX_IMAGES]:
            buffer = io.BytesIO()
            plt.figure(number).savefig(buffer, format="png")
            images.append({"media_type": "image/png", "data": base64.b64encode(buffer.getvalue()).decode()})
        plt.close("all")
        return images

    def _files(self) -> dict[str, tuple[int, int]]:
        seen: dict[str, tuple[int, int]] = {}
        looked = 0
        for root, dirs, files in os.walk(self.workspace):
            dirs[:] = [d for d in dirs if d != ".matplotlib"]
            for f in files:
                looked += 1
                if looked > MAX_WALK:
                    return seen
                path = os.path.join(root, f)
                try:
                    st = os.stat(path, follow_symlinks=False)
                except OSError:
                    continue
                seen[os.path.relpath(path, self.workspace)] = (st.st_size, st.st_mtime_ns)
        return seen

    def _changed(self, before: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
        after = self._files()
        changed = sorted(p for p, stat in after.items() if before.get(p) != stat)
        return [{"path": p, "size": after[p][0]} for p in changed[:MAX_FILES]]


def _is_open_figure(value: Any) -> bool:
    plt = sys.modules.get("matplotlib.pyplot")
    return plt is not None and getattr(value, "number", None) in plt.get_fignums()


def _png(value: Any) -> dict[str, str] | None:
    """A PIL image or a matplotlib figure as a PNG; None for any other value."""
    image_module = sys.modules.get("PIL.Image")
    buffer = io.BytesIO()
    if image_module is not None and isinstance(value, image_module.Image):
        value.save(buffer, format="PNG")
    elif type(value).__name__ == "Figure" and hasattr(value, "savefig"):
        value.savefig(buffer, format="png")
    else:
        return None
    return {"media_type": "image/png", "data": base64.b64encode(buffer.getvalue()).decode()}


__all__ = ["LIMIT_EXIT", "MAX_STREAM_CHARS", "Kernel"]
