"""The user's tools from a spec: ``MODULE:ATTR``, ``MODULE``, ``path/to/file.py`` or
``path/to/file.py:ATTR``, read the same way by every command and by the benchmark's workers.

Why here, below the commands and the benchmark: both load the user's tools (``toolfork run --tools``,
``toolfork bench --tools``, and each benchmark worker again), so the rule lives where both may import
it. The commands add built-in toolkits and hooks on top (``commands/_loading.py``)::

    spec ──> split_spec ──> import_module (a dotted name, or a file imported under a name that is the
              │              same in every process; its directory first on ``sys.path``)
              └─ ATTR ──> attribute, else the module's ``TOOLS`` list, else its Tool and Toolkit objects
    ──> load_tools_spec: checked with collect_tools ──> a list for ``Executor``

Without ``:ATTR`` the module's ``TOOLS`` list is used, else every Tool and Toolkit it defines. Every
failure is a ``UsageError`` whose message names the spec the user typed and what was wrong with it
(a command prints it and exits 2). A module that fails to import is the one exception to "no
traceback": the message carries the user's own traceback (their file and line, not the import
machinery's), in one block.

A spec's module part is either a dotted module name (``examples.tools``) or a path to a ``.py`` file
(``examples/tools.py``); both are resolved against the current directory, because the console script's
``sys.path`` does not contain it and users expect ``toolfork run`` to find the file they point at.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
import traceback
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

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


def attribute(mod: ModuleType, attr: str, spec: str) -> Any:
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
    items = _module_tools(mod, spec) if attr is None else [attribute(mod, attr, spec)]
    try:
        collect_tools(items)
    except ToolError as exc:
        raise UsageError(f"{spec!r}: {exc}") from exc
    return items


__all__ = ["DEFAULT_ATTR", "UsageError", "attribute", "import_module", "is_path", "load_tools_spec", "split_spec"]
