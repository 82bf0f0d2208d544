"""Finds CPython's tests of ``Future``, ``wait`` and ``as_completed`` for this interpreter and adapts them, in
one way only, to toolfork: how their futures are made.

    the interpreter's test.test_concurrent_futures ─┐ (else the vendored copy for this version)
                                                    ├─> FutureTests, WaitTests, AsCompletedTests
    their module namespaces: ``Future()``, ``create_future(...)`` and the ready-made futures (PENDING_FUTURE,
    ...) now make ``CallFuture`` objects; ``self.executor`` is a toolfork Executor whose ``submit(fn, *args)``
    runs ``fn(*args)`` in a forked worker and gives a ``CallFuture`` holding the value, or the exception
    raised (``ValueFuture``: a ToolResult mapped to what a stdlib future holds).

Every assertion is CPython's, unchanged.
"""

from __future__ import annotations

import builtins
import importlib
import itertools
import threading
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING, RUNNING
from types import ModuleType
from typing import Any

import toolfork.executor.singles as singles_module
from toolfork.executor import Executor, ToolCall, ToolResult
from toolfork.executor.singles import CallFuture
from toolfork.tools import tool

_IDS = itertools.count()
_MAKING = threading.Lock()


def new_future() -> CallFuture:
    """What ``Future()`` makes in the tests: a CallFuture no executor runs."""
    return CallFuture(None, ToolCall(f"made-{next(_IDS)}", "none", {}))


def create_future(state: str = PENDING, exception: BaseException | None = None, result: Any = None) -> CallFuture:
    f = new_future()
    f._state = state
    f._exception = exception
    f._result = result
    return f


class ValueFuture(CallFuture):
    """A CallFuture holding what a stdlib future would: the function's value, or the exception it raised."""

    def resolve(self, result: ToolResult) -> None:
        if result.status == "ok":
            self._settle(None if result.output is None else result.output.data, None)
        else:
            kind = getattr(builtins, result.error.type if result.error else "", None)
            error = kind if isinstance(kind, type) and issubclass(kind, BaseException) else Exception
            self._settle(None, error(result.error.message if result.error else result.status))


@tool
def apply(function: str, args: list[Any]) -> Any:
    """Call ``module:qualname`` with ``args``."""
    module, _, name = function.partition(":")
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    return target(*args)


class FunctionExecutor:
    """``submit(fn, *args)`` and ``shutdown`` over a toolfork Executor (fork mode)."""

    def __init__(self, workers: int) -> None:
        self.executor = Executor([apply], mode="fork", workers=workers)

    def submit(self, fn: Any, *args: Any) -> CallFuture:
        call = ToolCall(f"fn-{next(_IDS)}", "apply", {"function": f"{fn.__module__}:{fn.__qualname__}",
                                                     "args": list(args)})
        with _MAKING:  # the one thing adapted: the future this submit makes
            singles_module.CallFuture = ValueFuture  # type: ignore[misc]
            try:
                return self.executor.submit(call)  # type: ignore[return-value]
            finally:
                singles_module.CallFuture = CallFuture  # type: ignore[misc]

    def shutdown(self, wait: bool = True) -> None:
        self.executor.close()


class ToolforkMixin:
    """In place of CPython's executor mixins: ``self.executor`` is a toolfork Executor."""

    worker_count = 5

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]
        self.executor = FunctionExecutor(self.worker_count)

    def tearDown(self) -> None:
        self.executor.shutdown(wait=True)
        super().tearDown()  # type: ignore[misc]


VENDORED = ("v310", "v313")


def modules(source: str) -> list[ModuleType]:
    """The modules that hold the tests: ``source`` "own" (the interpreter's test package; ImportError where
    it is not installed) or a vendored copy."""
    if source == "own":
        own = importlib.import_module("test.test_concurrent_futures")
        if hasattr(own, "FutureTests"):  # 3.10, 3.11: one module
            return [own]
        base = "test.test_concurrent_futures"
    elif source == "v310":
        return [importlib.import_module("tests.executor.cpython_futures.v310.test_concurrent_futures")]
    else:
        base = f"tests.executor.cpython_futures.{source}"
    return [importlib.import_module(f"{base}.{name}") for name in ("test_future", "test_wait", "test_as_completed")]


def sources() -> list[str]:
    """What runs here: the interpreter's own tests where installed, and every vendored copy."""
    try:
        modules("own")
    except ImportError:
        return list(VENDORED)
    return ["own", *VENDORED]


def adapted(source: str) -> dict[str, type]:
    """The test classes of ``source``, their futures made by toolfork: name -> class (a unittest.TestCase)."""
    ready = {"PENDING_FUTURE": create_future(state=PENDING), "RUNNING_FUTURE": create_future(state=RUNNING),
             "CANCELLED_FUTURE": create_future(state=CANCELLED),
             "CANCELLED_AND_NOTIFIED_FUTURE": create_future(state=CANCELLED_AND_NOTIFIED),
             "EXCEPTION_FUTURE": create_future(state=FINISHED, exception=OSError()),
             "SUCCESSFUL_FUTURE": create_future(state=FINISHED, result=42)}
    classes: dict[str, type] = {}
    suffix = source.capitalize()
    for module in modules(source):
        namespace = vars(module)
        namespace["Future"] = new_future
        namespace["create_future"] = create_future
        namespace.update({name: future for name, future in ready.items() if name in namespace})
        base = namespace.get("BaseTestCase") or importlib.import_module(f"{module.__package__}.util").BaseTestCase
        if "FutureTests" in namespace:
            classes[f"FutureTests{suffix}"] = type(f"FutureTests{suffix}", (namespace["FutureTests"],),
                                                   {"__module__": __name__})
        for name in ("WaitTests", "AsCompletedTests"):
            if name in namespace:
                classes[f"Toolfork{name}{suffix}"] = type(f"Toolfork{name}{suffix}",
                                                          (ToolforkMixin, namespace[name], base),
                                                          {"__module__": __name__})
    return classes
