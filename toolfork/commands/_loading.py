"""What the commands load from the user: tools (``--tools SPEC``, read by ``toolfork.tools.specs``),
hooks (``module:fn``), built-in toolkits, and the call lines of a JSONL input.

Every command that takes ``--tools`` (run, worker, chat, tools) goes through ``load_all_tools``, so a
spec means the same everywhere, and in the benchmark's workers too (the spec rules, ``UsageError``
included, are ``toolfork.tools.specs``'s). Every failure here is a ``UsageError``: the command prints
it and exits 2.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolfork.commands._nesting import MAX_JSON_DEPTH, nested_deeper_than
from toolfork.tools.specs import (  # the spec rules; re-exported for the commands' other modules
    UsageError,
    attribute,
    import_module,
    load_tools_spec,
    split_spec,
)


def load_hook(spec: str, option: str) -> Callable[[], Any]:
    """A ``module:fn`` hook; it must be callable without arguments (the executor calls it so)."""
    module, attr = split_spec(spec)
    if attr is None:
        raise UsageError(f"{option} {spec!r}: expected module:function")
    fn = attribute(import_module(module), attr, spec)
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
