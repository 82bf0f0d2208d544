"""What the commands load from the user: tools (``--tools SPEC``), hooks (``module:fn``), built-in
toolkits, and the call lines of a JSONL input.

Every command that takes ``--tools`` (run, worker, chat, tools) goes through ``load_tools_spec``, so a
spec means the same everywhere: ``MODULE:ATTR``, ``MODULE``, ``path/to/file.py`` or
``path/to/file.py:ATTR``. Without ``:ATTR`` the module's ``TOOLS`` list is used, else every Tool and
Toolkit it defines. A file is imported under a name that is the same in every process: its dotted path
relative to the current directory when that works, else a digest of its absolute path. Its directory
goes on ``sys.path`` first, as ``python file.py`` does, so it imports the modules beside it.

Every failure here is a usage error, raised as ``UsageError`` with a message that names the spec the
user typed and what was wrong with it, so a command can print it and exit 2. A module that fails to
import is the one exception to "no traceback": the message carries the user's own traceback (their
file and line, not the import machinery's), in one block.

A spec's module part is either a dotted module name (``examples.tools``) or a path to a ``.py`` file
(``examples/tools.py``); both are resolved against the current directory, because the console script's
``sys.path`` does not contain it and users expect ``toolfork run`` to find the file they point at.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import math
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from toolfork.commands._nesting import MAX_JSON_DEPTH, nested_deeper_than

DEFAULT_ATTR = "TOOLS"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class UsageError(Exception):
    """Bad command-line input: the command prints the message and exits with status 2."""


def split_spec(spec: str) -> tuple[str, str | None]:
    """``module:attr`` -> (module, attr); the attribute is optional. A Windows drive letter or a ``:``
    inside the path part would be ambiguous, so only the last ``:`` separates."""
    module, sep, attr = spec.rpartition(":")
    if not sep:
        return spec, None
    if not module or not attr:
        raise UsageError(f"{spec!r}: expected module:attribute (e.g. examples/tools.py:TOOLS)")
    return module, attr


def is_path(module: str) -> bool:
    """Whether a --tools spec names a file (by its .py ending or a path separator), not a module."""
    return module.endswith(".py") or os.sep in module or "/" in module


def _module_name_for(path: Path) -> str:
    """The name a ``.py`` file is imported under, the same in every process (workers, a resumed run,
    Ray workers). Inside the current directory it is the dotted path relative to it when that is a
    valid module name (so dill and Ray can pickle the tools by reference) and does not hide another
    module; otherwise a private name with a digest of the absolute path."""
    cwd = Path.cwd().resolve()
    if path.is_relative_to(cwd):
        rel = path.relative_to(cwd)
        parts = [*rel.parent.parts, rel.stem]
        if all(_IDENT.match(p) for p in parts) and not _shadows(parts[0], cwd):
            return ".".join(parts)
    stem = re.sub(r"\W", "_", path.stem)
    digest = hashlib.sha256(str(path).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"_toolfork_user_{stem}_{digest}"


def _shadows(top: str, cwd: Path) -> bool:
    """Whether ``top`` already names a module that does not live under ``cwd``: a user's
    ``calendar.py`` registered as ``calendar`` would replace the standard library's module for the
    whole process (and every worker forked from it)."""
    module = sys.modules.get(top)
    locations: list[str]
    if module is not None:
        file = getattr(module, "__file__", None)
        locations = [file] if file else list(getattr(module, "__path__", []))
    else:
        try:
            found = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return False
        if found is None:
            return False
        if found.has_location and found.origin:
            locations = [found.origin]
        else:
            locations = list(found.submodule_search_locations or [])
    if not locations:  # built-in or frozen (sys, time, ...)
        return True
    return not all(Path(loc).resolve().is_relative_to(cwd) for loc in locations)


def import_module(module: str) -> ModuleType:
    """Import a dotted module or a ``.py`` file, relative to the current directory."""
    if is_path(module):
        path = Path(module).expanduser().resolve()
        if not path.is_file():
            raise UsageError(f"{module!r}: no such file")
        name = _module_name_for(path)
        existing = sys.modules.get(name)
        if existing is not None and getattr(existing, "__file__", None) == str(path):
            return existing
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"{module!r}: cannot be loaded as a Python module")
        mod = importlib.util.module_from_spec(spec)
        _put_on_path(path.parent)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise UsageError(f"{module!r} failed to import:\n{_describe(exc)}") from exc
        return mod
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            raise UsageError(f"{module!r}: no such module (looked in {cwd} and sys.path)") from exc
        raise UsageError(f"{module!r} failed to import:\n{_describe(exc)}") from exc
    except Exception as exc:
        raise UsageError(f"{module!r} failed to import:\n{_describe(exc)}") from exc


def _put_on_path(directory: Path) -> None:
    """A file's own directory goes first on ``sys.path`` while it imports, as ``python file.py`` puts it:
    a ``tools.py`` that does ``from helpers import double`` finds the ``helpers.py`` beside it. It stays
    there, so workers forked later import the same way."""
    entry = str(directory)
    if entry not in sys.path:
        sys.path.insert(0, entry)


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the first frame of the user's code: the import machinery's frames and ours
    say nothing about where their module went wrong."""
    ours = (__file__, importlib.__file__)
    while tb is not None and (tb.tb_frame.f_code.co_filename.startswith("<frozen")
                              or tb.tb_frame.f_code.co_filename in ours):
        tb = tb.tb_next
    return tb


def _describe(exc: BaseException) -> str:
    """The user's traceback (file, line, code) ending in ``Type: message``, as Python prints it, plus
    the extra to install when an optional package of ours is missing."""
    from toolfork._extras import missing_extra_message

    text = "".join(traceback.format_exception(type(exc), exc, _user_frames(exc.__traceback__))).rstrip("\n")
    hint = missing_extra_message(exc)
    return f"{text} ({hint})" if hint and hint != str(exc) else text


def _attribute(mod: ModuleType, attr: str, spec: str) -> Any:
    obj: Any = mod
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{spec!r}: module {mod.__name__!r} has no attribute {attr!r}") from None
    return obj


def _module_tools(mod: ModuleType, spec: str) -> list[Any]:
    """Without an attribute: the module's ``TOOLS`` list if it has one, else every Tool and Toolkit
    instance defined at module level (imported ones included: a module that imports a tool means it)."""
    from toolfork.tools.tool import Tool
    from toolfork.tools.toolkit import Toolkit

    if hasattr(mod, DEFAULT_ATTR):
        return [getattr(mod, DEFAULT_ATTR)]
    found = [v for k, v in vars(mod).items() if not k.startswith("_") and isinstance(v, (Tool, Toolkit))]
    if not found:
        raise UsageError(
            f"{spec!r}: the module defines no {DEFAULT_ATTR} list and no Tool or Toolkit objects")
    return found


def load_tools_spec(spec: str) -> list[Any]:
    """Tools from one ``--tools`` spec, checked: each item a Tool, Toolkit, function or list of them."""
    from toolfork.tools.errors import ToolError
    from toolfork.tools.registry import collect_tools

    module, attr = split_spec(spec)
    mod = import_module(module)
    items = _module_tools(mod, spec) if attr is None else [_attribute(mod, attr, spec)]
    try:
        collect_tools(items)
    except ToolError as exc:
        raise UsageError(f"{spec!r}: {exc}") from exc
    return items


def load_hook(spec: str, option: str) -> Callable[[], Any]:
    """A ``module:fn`` hook; it must be callable without arguments (the executor calls it so)."""
    module, attr = split_spec(spec)
    if attr is None:
        raise UsageError(f"{option} {spec!r}: expected module:function")
    fn = _attribute(import_module(module), attr, spec)
    if not callable(fn):
        raise UsageError(f"{option} {spec!r}: {type(fn).__name__} object is not callable")
    return fn  # type: ignore[no-any-return]


def toolkit_names() -> list[str]:
    from toolfork.toolkits import TOOLKITS

    return list(TOOLKITS)


def load_toolkit(name: str) -> Any:
    """A built-in toolkit by its registered name, constructed without arguments."""
    from toolfork.toolkits import TOOLKITS

    cls = TOOLKITS.get(name)
    if cls is None:
        known = ", ".join(TOOLKITS) or "(none)"
        raise UsageError(f"--toolkit: unknown toolkit {name!r}; the built-in toolkits are: {known}")
    try:
        return cls()
    except TypeError as exc:
        raise UsageError(
            f"--toolkit {name!r}: {cls.__name__} needs arguments ({exc}); build it in a Python module and "
            f"pass that with --tools module:attr") from exc
    except Exception as exc:
        raise UsageError(f"--toolkit {name!r}: {cls.__name__}() failed: {type(exc).__name__}: {exc}") from exc


def default_tools_file(calls_path: str) -> Path | None:
    """The convention when neither --tools nor --toolkit is given: a ``tools.py`` beside the calls file."""
    if calls_path == "-":
        return None
    candidate = Path(calls_path).expanduser().parent / "tools.py"
    return candidate if candidate.is_file() else None


def load_all_tools(tool_specs: Sequence[str], toolkits: Sequence[str]) -> list[Any]:
    """Everything the user asked for, as one list for ``Executor``; duplicate names are a usage error."""
    from toolfork.tools.errors import ToolError
    from toolfork.tools.registry import collect_tools

    items: list[Any] = [load_toolkit(n) for n in toolkits]
    for spec in tool_specs:
        items.extend(load_tools_spec(spec))
    try:
        collect_tools(items)
    except ToolError as exc:
        raise UsageError(str(exc)) from exc
    return items


# ----------------------------------------------------------------------------------- call lines


@dataclass(slots=True)
class BadLine:
    """A line that is not a usable call. It still gets an output record, so the output keeps one line
    per input line and the caller learns which line was wrong and why."""

    id: str
    name: str | None
    message: str

    def record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "status": "error",
            "output": None,
            "error": {"type": "MalformedCallError", "message": self.message, "traceback": ""},
            "duration_s": 0.0,
            "worker_pid": None,  # nothing ran; started_at: when the record was made
            "started_at": round(time.time(), 6),
        }


def _kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number" if isinstance(value, (int, float)) else type(value).__name__)


def _arguments(value: Any, where: str, *, json_string: bool) -> dict[str, Any]:
    """Arguments must end up a JSON object. OpenAI sends them as a JSON-encoded string (and an empty
    string for a call without arguments), so a string is decoded where that shape allows it."""
    if value is None:
        return {}
    if isinstance(value, str) and json_string:
        if not value.strip():
            return {}
        if nested_deeper_than(value):  # the interpreter's own limit differs between Pythons
            raise RecursionError(f"{where} is nested more than {MAX_JSON_DEPTH} levels deep")
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a JSON object, got {_kind(value)}")
    return value


def _call_id(value: Any, lineno: int) -> str:
    if value is None:
        return f"line-{lineno}"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f'"id" must be a string or an integer, got {_kind(value)}')
    return str(value)


_DECODER = json.JSONDecoder()


@functools.cache
def _tool_call_class() -> Any:
    """``ToolCall``, imported on first use (loading tools must not import the executor) and then kept:
    an import statement in ``parse_call`` would run once per line of a job."""
    from toolfork.executor.types import ToolCall

    return ToolCall


def parse_call(raw: bytes | str, lineno: int, *, sessions: bool = False) -> Any:
    """One input line -> a ``ToolCall`` or a ``BadLine``. Accepted shapes:

    * ``{"id", "name", "arguments", "timeout"?}`` (arguments an object; a JSON string is decoded too);
    * an OpenAI Chat Completions ``tool_calls`` item ``{"id", "type": "function", "function": {"name",
      "arguments": "<JSON>"}}`` and a Responses API ``{"type": "function_call", "call_id", "name",
      "arguments"}`` item;
    * an Anthropic ``{"type": "tool_use", "id", "name", "input"}`` block.

    A missing id becomes ``line-N`` (1-based), stable across runs of the same file, so ``--resume``
    works for hand-written inputs too. A line with a ``"session"`` key is refused unless ``sessions``
    (the job has a session factory, which reads that key itself).
    """
    ToolCall = _tool_call_class()
    try:
        if type(raw) is bytes and raw[:1] == b"{" and raw[1:2] != b"\0":
            # What json.loads does with bytes that are UTF-8 (as a line opening with "{" is), minus its
            # encoding detection: this runs once per line of a job.
            text = raw.decode("utf-8", "surrogatepass")
            obj, end = _DECODER.raw_decode(text)  # no leading whitespace to skip: it opens with "{"
            if end != len(text) and not text[end:].isspace():
                obj = _DECODER.decode(text)  # raises json's own "Extra data" error
        else:
            obj = json.loads(raw)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        return BadLine(f"line-{lineno}", None, f"line {lineno}: not valid JSON: {exc}")
    if type(obj) is dict and len(obj) == 3:  # the plain shape and nothing else: the common line
        call_id, name, arguments = obj.get("id"), obj.get("name"), obj.get("arguments")
        if type(call_id) is str and type(name) is str and name and type(arguments) is dict:
            return ToolCall(call_id, name, arguments)
    here = f"line {lineno}"
    if not isinstance(obj, dict):
        return BadLine(f"line-{lineno}", None, f"{here}: expected a JSON object, got {_kind(obj)}")
    raw_id = obj.get("call_id") if obj.get("type") == "function_call" else obj.get("id")
    try:
        call_id = _call_id(raw_id, lineno)
    except ValueError as exc:
        return BadLine(f"line-{lineno}", None, f"{here}: {exc}")
    fn = obj.get("function")
    if obj.get("type") == "function" or isinstance(fn, dict):  # OpenAI chat tool_calls item
        if not isinstance(fn, dict):
            what = "missing" if fn is None else f"must be an object, got {_kind(fn)}"
            return BadLine(call_id, None, f'{here}: "function" {what}')
        name_where = '"function.name"'
        name = fn.get("name")
        args_value, args_where, json_string = fn.get("arguments"), '"function.arguments"', True
    elif obj.get("type") == "tool_use":  # Anthropic
        name_where, name = '"name"', obj.get("name")
        args_value, args_where, json_string = obj.get("input"), '"input"', False
    else:  # plain, or an OpenAI Responses function_call item
        name_where, name = '"name"', obj.get("name")
        args_value, args_where, json_string = obj.get("arguments"), '"arguments"', True
    if not isinstance(name, str) or not name:
        what = "missing" if name is None else f"must be a non-empty string, got {_kind(name)}"
        return BadLine(call_id, None, f"{here}: {name_where} {what}")
    if not sessions and ("session" in obj or "session_args" in obj):
        return BadLine(call_id, name, f'{here}: a line with a "session" key runs in a session, which needs '
                                      "--session-factory module:function (the function that builds its state)")
    try:
        arguments = _arguments(args_value, args_where, json_string=json_string)
    except ValueError as exc:
        return BadLine(call_id, name, f"{here}: {exc}")
    timeout = obj.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):  # NaN is no number of seconds either
        return BadLine(call_id, name,
                       f'{here}: "timeout" must be a positive number of seconds, got {timeout!r}')
    try:  # ToolCall checks "meta" (string keys and values), naming what is wrong
        return ToolCall(call_id, name, arguments, None if timeout == math.inf else timeout,  # Infinity: no limit
                        obj.get("meta"))
    except TypeError as exc:
        return BadLine(call_id, name, f"{here}: {exc}")


__all__ = [
    "BadLine",
    "UsageError",
    "default_tools_file",
    "import_module",
    "load_all_tools",
    "load_hook",
    "load_toolkit",
    "load_tools_spec",
    "parse_call",
    "split_spec",
    "toolkit_names",
]
