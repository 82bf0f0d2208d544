"""The bytes between the host and its workers, below ``framing`` (pipes) and ``oob`` (the side port).

``pipes``: ``write_all``, ``drain`` and the ``WakePipe``; ``frames``: the frame header (a tag and a
bounded length), the frame kinds as named constants, each encoder beside its decoder; ``markers``: the
marker a frame that cannot be rebuilt becomes. Nothing here imports ``framing`` or ``oob``.
"""

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
