"""A module imported when a test first reads one of its attributes, not when its test module is collected.

Every xdist worker collects every test module, so a module-level ``import anthropic`` costs each worker
about a CPU-second even when another worker runs the tests that use it. A test module that only uses such
an SDK inside its tests binds it with ``lazy_module`` (and sits in an xdist group, so that one worker pays).

Why a proxy and not ``importlib.util.LazyLoader``: a lazily loaded module runs its code on the first
attribute read of any name, and collection reads names: pytest (9.x) looks up ``_mock_name`` and
``__wrapped__`` on every global of a test module while it searches for fixtures. The proxy answers names
that start with an underscore itself (AttributeError), so only a test's own ``anthropic.Anthropic``
imports the module.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any


class LazyModule:
    """Stands for the module ``name``; imports it on the first read of a public attribute."""

    def __init__(self, name: str) -> None:
        self._lazy_name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # a collector's probe (``_mock_name``, ``__wrapped__``...): not the module's API
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._lazy_name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._lazy_name!r}>"


def lazy_module(name: str) -> Any:
    """``name`` as a ``LazyModule``, or a ModuleNotFoundError now when it is not installed (found without
    running its code)."""
    if importlib.util.find_spec(name) is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return LazyModule(name)
