"""``with x:`` for the executor's objects that hold something until ``close()``.

Why: an ``Executor``, a ``Journal`` and a ``Session`` are each used as
``with ...:`` blocks whose end is their ``close()``; the two dunder methods that say so are written
once, here, not once per class::

    with Executor(...) as ex:   ──__enter__──> ex itself
        ...                     ──__exit__───> ex.close()   (on any exit, exception or not)
"""

from __future__ import annotations

import abc
from typing import TypeVar

_C = TypeVar("_C", bound="Closable")


class Closable(abc.ABC):
    """A base whose ``with`` block ends in ``close()``, which each subclass must define."""

    __slots__ = ()

    @abc.abstractmethod
    def close(self) -> None:
        """Let go of what this object holds; calling it again does nothing."""

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Closable"]
