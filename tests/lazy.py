"""A module imported when a test first reads one of its attributes, not when its test module is collected.

Every xdist worker collects every test module, so a module-level ``import anthropic`` costs each worker
about a CPU-second even when another worker runs the tests that use it. A test module that only uses such
an SDK inside its tests binds it with ``lazy_module`` (and sits in an xdist group, so that one worker pays).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """``name`` as a module object whose code runs on first attribute access (``importlib.util.LazyLoader``);
    the module itself when it is already imported."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
