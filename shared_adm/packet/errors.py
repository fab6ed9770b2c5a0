"""PacketError: the one error a malformed or unserializable UserMessage Packet raises (MS-MQMQ 2.2.20)."""
from __future__ import annotations


class PacketError(ValueError):
    """A UserMessage Packet that is truncated, inconsistent or cannot be built (MS-MQMQ 2.2.19–2.2.20).

    ``header`` and ``field`` name the spec structure and field, ``offset`` is the byte offset in the
    packet (None when serializing), ``reason`` says what is wrong.
    """

    def __init__(self, header: str, field: str, offset: int | None, reason: str) -> None:
        self.header = header
        self.field = field
        self.offset = offset
        self.reason = reason
        where = f"{header}.{field}" if field else header
        at = f" at offset {offset:#x}" if offset is not None else ""
        super().__init__(f"{where}{at}: {reason}")
