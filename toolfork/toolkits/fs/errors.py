"""The FileSystem toolkit's errors, and the one rule that turns them into error outputs.

Expected failures (a missing file, a bad pattern, a refused path) go back to the model as an error
output saying what was wrong, so it can try something else; only bugs raise.
"""

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from toolfork.tools import ToolOutput

__all__ = ["FileSystemError", "PathRefused", "bounded", "guard"]

F = TypeVar("F", bound=Callable[..., Any])


class FileSystemError(ValueError):
    """A problem the model can fix (missing file, bad pattern); becomes an error output."""


class PathRefused(FileSystemError):
    """A path that would leave the root directory, or a file that could be a door out of it."""


def guard(fn: F) -> F:
    """Expected failures become error outputs; the model reads them and tries something else."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FileSystemError as exc:
            return ToolOutput.error(str(exc))
        except PermissionError as exc:
            return ToolOutput.error(f"permission denied: {exc.strerror or exc}")
        except IsADirectoryError:
            return ToolOutput.error("expected a file but the path is a directory")
        except OSError as exc:
            return ToolOutput.error(f"file system error: {exc.strerror or exc}")

    return wrapper  # type: ignore[return-value]


def bounded(name: str, value: int, low: int, high: int | None) -> None:
    """Refuse an integer argument outside ``low..high``, naming it."""
    if value < low or (high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f">= {low}"
        raise FileSystemError(f"invalid {name} {value}: must be {span}")
