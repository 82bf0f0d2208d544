"""Every byte between the host and its workers.

Bottom up: ``pipes``: ``write_all``, ``drain`` and the ``WakePipe``; ``frames``: the frame header (a tag
and a bounded length), the frame kinds as named constants, each encoder beside its decoder;
``markers``: the marker a frame that cannot be rebuilt becomes; ``callitem``: a call as the worker gets
it; ``dataonly``: the codec of sandboxed calls. On top: ``oob``, large frames in memory files over the
side socket, and ``framing``, the host's ``FrameReader`` and the worker's ``FrameWriter``. This package's
``__init__`` and the lower modules import neither of the two on top (they import the lower ones)."""

from toolfork.executor.wire.frames import (
    EXIT_CHANNEL_DAMAGED,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    MAX_FRAME,
    OOB_HEADER,
    ChannelDamaged,
    FrameTooLarge,
    check_header,
    frame,
)
from toolfork.executor.wire.markers import BAD_FRAME, bad_frame_marker, loads_or_marker
from toolfork.executor.wire.pipes import WakePipe, drain, write_all

__all__ = ["BAD_FRAME", "EXIT_CHANNEL_DAMAGED", "HEADER", "HEADER_SIZE", "MAGIC", "MAX_FRAME", "OOB_HEADER",
           "ChannelDamaged", "FrameTooLarge", "WakePipe", "bad_frame_marker", "check_header", "drain", "frame",
           "loads_or_marker", "write_all"]
