"""``IdSet`` for the commands: the ids a ``run`` job has seen (it lives in ``toolfork.executor.idset``,
which the journal shares)."""

from toolfork.executor.idset import IdSet

__all__ = ["IdSet"]
