"""What the vendored CPython tests use of ``test.support``, for an interpreter installed without its ``test``
package: the same names, doing what the tests need of them (and nothing about the tests' assertions).

``threading_helper`` and ``reap_children`` check the interpreter's own threads and children in CPython's
suite; here the executor's threads and processes are checked by our own suite (tests/conftest.py), so they
do nothing."""

from __future__ import annotations

import contextlib
import gc
import io
import sys
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, TypeVar

SHORT_TIMEOUT = 30.0
verbose = False
F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def captured_stderr() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    with contextlib.redirect_stderr(stream):
        yield stream


def gc_collect() -> None:
    for _ in range(3):
        gc.collect()


def reap_children() -> None:
    pass


def check_sanitizer(**kinds: bool) -> bool:
    return False


def requires_resource(name: str) -> Callable[[F], F]:
    return lambda test: test


def setswitchinterval(interval: float) -> None:
    sys.setswitchinterval(interval)


threading_helper = SimpleNamespace(threading_setup=lambda: (), threading_cleanup=lambda *key: None)
