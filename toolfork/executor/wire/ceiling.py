"""The ceiling on what the host rebuilds from one call: a worker's small budget must not become a large
allocation in the host.

Why: a frame's length says little about what it rebuilds into. A sandboxed call under ``memory_mb=64``
that returns 12,000 references to one row of 1,000 ``{}`` sends 12 MB of data-only bytes (the codec
copies shared references), which rebuild into 850 MB of dicts in the host; a memory file can be
stretched to gigabytes by ``ftruncate`` at no cost to its writer. So every value a call sends back (its
result with its context and error, each progress value) is rebuilt within a per-call ceiling, the
tool's ``max_result_mb`` setting, else ``DEFAULT_MB``::

    worker frame ──> oob: declared length > ceiling? ──────────────> TooLarge (nothing mapped)
                 └─> pipe / memory file ──> dataonly.decode(data, ceiling): rebuilt size counted as
                                            it grows, shared references as copies ──> TooLarge
    TooLarge ──> marker ("!", "ResultTooLarge", message) ──> the call fails, its worker is replaced

Past the ceiling the call fails with ``ResultTooLarge`` and what was rebuilt of it is dropped at once.
A warm (pickle) worker's frames are bounded by their length only: a warm tool is trusted code (a pickle
can run code in the host), and unpickling keeps shared references shared.
"""

from __future__ import annotations

from toolfork.executor.wire.markers import BAD_FRAME

DEFAULT_MB = 256  # the ceiling of a call whose tool sets no ``max_result_mb``
MB = 1 << 20
ERROR_TYPE = "ResultTooLarge"
DEFAULT = DEFAULT_MB * MB


class TooLarge(ValueError):
    """What a call sent back would rebuild past its ceiling (``what``: the size, as far as it was seen)."""

    def __init__(self, what: str, ceiling: int) -> None:
        super().__init__(f"result too large: {what}, over the ceiling of {ceiling / MB:g} MB; raise it with "
                         "the tool setting max_result_mb (toolfork run: --max-result-mb)")


def of(max_result_mb: int | None) -> int:
    """The ceiling in bytes of a tool whose ``max_result_mb`` setting is ``max_result_mb``."""
    return DEFAULT if max_result_mb is None else max_result_mb * MB


def marker(exc: TooLarge) -> tuple[str, str, str]:
    """The marker a frame past its ceiling becomes in the reader (``wire.markers``' shape)."""
    return (BAD_FRAME, ERROR_TYPE, str(exc))


def is_marker(f: object) -> bool:
    return type(f) is tuple and len(f) == 3 and f[0] == BAD_FRAME and f[1] == ERROR_TYPE


__all__ = ["DEFAULT", "DEFAULT_MB", "ERROR_TYPE", "MB", "TooLarge", "is_marker", "marker", "of"]
