"""Every byte between the host and its workers.

Bottom up: ``pipes``: ``write_all``, ``drain`` and the ``WakePipe``; ``frames``: the frame header (a tag
and a bounded length), the frame kinds as named constants, each encoder beside its decoder;
``markers``: the marker a frame that cannot be rebuilt becomes; ``callitem``: a call as the worker gets
it; ``dataonly``: the codec of sandboxed calls. On top: ``oob``, large frames in memory files over the
side socket, and ``framing``, the host's ``FrameReader`` and the worker's ``FrameWriter``. This package's
``__init__`` and the lower modules import neither of the two on top (they import the lower ones); it
names only what other rooms use: the pipes' helpers, and the header's bytes the red team forges."""

from toolfork.executor.wire.frames import HEADER, MAGIC
from toolfork.executor.wire.pipes import WakePipe, drain, write_all

__all__ = ["HEADER", "MAGIC", "WakePipe", "drain", "write_all"]
