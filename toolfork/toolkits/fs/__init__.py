"""The FileSystem toolkit's parts: confinement, bounded reading, globbing, and the tools' bodies.

``toolfork.toolkits.filesystem.FileSystemToolkit`` is the toolkit; the modules here are what it is
made of, each importable on its own (the readers and writers are plain functions of a ``Root``).
"""

from .confine import Root
from .errors import FileSystemError, PathRefused
from .globbing import Glob

__all__ = ["FileSystemError", "Glob", "PathRefused", "Root"]
