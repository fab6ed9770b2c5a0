"""DebugHeader (MS-MQMQ 2.2.20.8): the trace queue for a traced message."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from shared_adm.packet.layout import DEBUG_HEADER, DEBUG_QT
from shared_adm.packet.reader import Reader


@dataclass(slots=True)
class DebugHeader:
    """MS-MQMQ 2.2.20.8 (4 bytes, 20 when Flags.QT = 1)."""
    flags: int
    reserved: int = 0
    queue_identifier: uuid.UUID | None = None

    def pack(self) -> bytes:
        """The header bytes; QueueIdentifier is written iff QT = 1."""
        fixed = DEBUG_HEADER.pack(self.flags, self.reserved)
        return fixed + self.queue_identifier.bytes_le if self.flags & DEBUG_QT == 1 else fixed

    @classmethod
    def parse(cls, r: Reader) -> DebugHeader:
        """Parse at the reader's cursor; QT other than 0 or 1 is an error."""
        base = r.pos
        flags, reserved = r.unpack(DEBUG_HEADER, "fixed part")
        qt = flags & DEBUG_QT
        if qt > 1:
            raise r.error("Flags.QT", f"queue type {qt} is invalid (MUST be 0 or 1)", base)
        return cls(flags, reserved, r.guid("QueueIdentifier") if qt == 1 else None)
