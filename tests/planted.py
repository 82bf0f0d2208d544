"""An object whose unpickling runs code: ``Planted(marker)`` writes ``marker`` wherever it is unpickled.
The attack tests send it where only data may go and check that the marker never appears."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plant(marker: str) -> None:
    Path(marker).write_text("ran where it was unpickled")


class Planted:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (plant, (self.marker,))
