"""The host state a tool changes, carried back from its worker: one rule for every adapter.

A tool that runs in a worker runs on a copy of what it closes over. Tools (and frameworks' own tests)
record into a list, dict or set they close over, or count their calls on the callable object itself, and
read that in the host afterwards. Two rules make those changes land on the host's objects:

- Containers: each list, dict (defaultdict, OrderedDict, Counter) and set that a tool's function closes over
  (a closure cell), or that its callable object holds as an attribute, is replaced in the worker, for the
  call, by a mirror (``relay.mirror``). Reads see the copy; every change is made to the copy and, through
  the call's relay session, to the host's container, as it happens and in order (calls running at once all
  land).
- Attributes: an attribute of the callable object that the call rebinds, adds or deletes
  (``self.calls += 1``) is sent back with the result and set in the host's object ``__dict__`` after the
  call. Calls running at once each start from the value the host had when they began; the last to
  finish wins.

"The callable object" is the function itself when it is an object with a ``__call__``, the object of a
bound method, or such an object (or bound method) in the function's closure: the Agents SDK wraps a
callable object in an adapter function that closes over its bound ``__call__``.

Only what pickles is mirrored; a change inside an item of a mirrored container (a dict in a list changed
in place) stays in the worker's copy. docs/adapters.md lists these limits.

Places are named by paths from the tool's function (``("cell", i)``, ``("self",)``, ``("attr", name)``),
so the worker finds the same place in its own copy, and the host in its original.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import pickle
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from toolfork.adapters.relay import CallObjects, Ref, mirror, mirrorable

Path = tuple[tuple[Any, ...], ...]
_MISSING = object()
_NOT_STATE = (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType,
              functools.partial)


@dataclasses.dataclass(frozen=True)
class Mirror:
    """One host container a call mirrors: which of the tool's callables (``owner``), where in it
    (``path``), a copy of its contents, and the relay reference to the host's container."""

    owner: str
    path: Path
    copy: Any
    ref: Ref


@dataclasses.dataclass(frozen=True)
class AttributeChanges:
    """What a call did to its callable object's attributes, per object (by path): the values it set,
    the names it deleted, and the names whose new value could not be sent back."""

    set: dict[Path, dict[str, Any]]
    deleted: dict[Path, list[str]]
    unsent: dict[Path, list[str]]


def _stateful(value: Any) -> bool:
    return hasattr(value, "__dict__") and not isinstance(value, _NOT_STATE)


def _cells(fn: Any) -> Iterator[tuple[int, Any]]:
    for i, cell in enumerate(getattr(fn, "__closure__", None) or ()):
        try:
            yield i, cell.cell_contents
        except ValueError:  # an empty cell
            continue


def holders(fn: Any) -> list[tuple[Path, Any]]:
    """The callable objects whose attributes are ``fn``'s own state (see the module docstring)."""
    found: list[tuple[Path, Any]] = []
    if callable(fn) and _stateful(fn):
        found.append(((), fn))
    if inspect.ismethod(fn) and _stateful(fn.__self__):
        found.append(((("self",),), fn.__self__))
    for i, value in _cells(fn):
        if inspect.ismethod(value) and _stateful(value.__self__):
            found.append(((("cell", i), ("self",)), value.__self__))
        elif callable(value) and _stateful(value):
            found.append(((("cell", i),), value))
    return found


def pickles(value: Any) -> bool:
    """Whether ``value`` can travel as it is (plain pickle: the relay's wire)."""
    try:
        pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return False
    return True


def _held(fn: Any) -> list[tuple[Path, Any]]:
    """The containers ``fn`` closes over or its callable objects hold, by path."""
    found: list[tuple[Path, Any]] = [((("cell", i),), value) for i, value in _cells(fn) if mirrorable(value)]
    for path, obj in holders(fn):
        found.extend(((*path, ("attr", name)), value) for name, value in vars(obj).items() if mirrorable(value))
    return [(path, value) for path, value in found if pickles(value)]


def host_containers(owners: Iterable[tuple[str, Any]],
                    session: CallObjects | Callable[[], CallObjects]) -> list[Mirror]:
    """The host's containers the tool's callables (``(name, callable)`` pairs) can change, each
    registered in ``session`` (or in the one ``session()`` makes, only when there is one to register)."""
    found = [(name, path, value) for name, fn in owners for path, value in _held(fn)]
    if not found:
        return []
    live = session if isinstance(session, CallObjects) else session()
    return [Mirror(name, path, value, live.ref(value)) for name, path, value in found]


def reach(root: Any, path: Path) -> Any:
    """What ``path`` names, starting from ``root``."""
    value = root
    for step in path:
        if step[0] == "cell":
            value = value.__closure__[step[1]].cell_contents
        elif step[0] == "self":
            value = value.__self__
        else:
            value = vars(value)[step[1]]
    return value


@contextlib.contextmanager
def mirrored(mirrors: Iterable[Mirror], resolve: Callable[[str], Any]) -> Iterator[None]:
    """In the worker: the mirrors put in place of the containers for the block, and what was there
    put back after it (``resolve(owner)`` is the worker's callable of that name)."""
    undo: list[Callable[[], None]] = []
    try:
        for m in mirrors:
            parent = reach(resolve(m.owner), m.path[:-1])
            kind, key = m.path[-1]
            if kind == "cell":
                cell = parent.__closure__[key]
                undo.append(functools.partial(setattr, cell, "cell_contents", cell.cell_contents))
                cell.cell_contents = mirror(m.copy, m.ref)
            else:
                space = vars(parent)
                undo.append(functools.partial(_put_back, space, key, space.get(key, _MISSING)))
                space[key] = mirror(m.copy, m.ref)
        yield
    finally:
        for step in reversed(undo):
            step()


def _put_back(space: dict[str, Any], key: str, value: Any) -> None:
    if value is _MISSING:
        space.pop(key, None)
    else:
        space[key] = value


def attribute_state(fn: Any) -> dict[Path, dict[str, Any]]:
    """Before the call, in the worker: each callable object's attributes (the objects, by identity)."""
    return {path: dict(vars(obj)) for path, obj in holders(fn)}


def attribute_changes(fn: Any, before: dict[Path, dict[str, Any]],
                      sendable: Callable[[Any], bool]) -> AttributeChanges | None:
    """After the call, in the worker: the attributes it rebound, added or deleted (None: none)."""
    changed: dict[Path, dict[str, Any]] = {}
    deleted: dict[Path, list[str]] = {}
    unsent: dict[Path, list[str]] = {}
    for path, obj in holders(fn):
        old = before.get(path, {})
        now = vars(obj)
        for name, value in now.items():
            if old.get(name, _MISSING) is not value:
                if sendable(value):
                    changed.setdefault(path, {})[name] = value
                else:
                    unsent.setdefault(path, []).append(name)
        gone = [name for name in old if name not in now]
        if gone:
            deleted[path] = gone
    if not (changed or deleted or unsent):
        return None
    return AttributeChanges(changed, deleted, unsent)


def apply_attribute_changes(fn: Any, changes: AttributeChanges | None, log: logging.Logger) -> None:
    """After the call, in the host: the worker's attribute changes made to the host's objects."""
    if changes is None:
        return
    for path, values in changes.set.items():
        vars(reach(fn, path)).update(values)
    for path, names in changes.deleted.items():
        space = vars(reach(fn, path))
        for name in names:
            space.pop(name, None)
    for path, names in changes.unsent.items():
        log.warning("%s: the call set attribute(s) %s of %r to values that cannot be sent back from the "
                    "worker; the host keeps the old values (run this tool in the host to keep them)",
                    getattr(fn, "__name__", fn), ", ".join(names), reach(fn, path))


__all__ = ["AttributeChanges", "Mirror", "apply_attribute_changes", "attribute_changes", "attribute_state",
           "holders", "host_containers", "mirrored", "pickles", "reach"]
