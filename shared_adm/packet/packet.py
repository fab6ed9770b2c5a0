"""UserMessagePacket (MS-MQMQ 2.2.20): header order, flag <-> header consistency, PacketSize."""
from __future__ import annotations

from dataclasses import dataclass

from shared_adm.packet.base_header import BaseHeader
from shared_adm.packet.debug_header import DebugHeader
from shared_adm.packet.errors import PacketError
from shared_adm.packet.layout import (
    BASE_DH, BASE_HEADER, BASE_IN, BASE_SH, BASE_TR, MAX_PACKET_SIZE, PROPERTIES_ACKS, SESSION_HEADER_SIZE,
    USER_HH, USER_MQ, USER_SH, USER_TH,
)
from shared_adm.packet.multi_queue_header import MultiQueueFormatHeader
from shared_adm.packet.properties_header import MessagePropertiesHeader
from shared_adm.packet.reader import Reader
from shared_adm.packet.security_header import SecurityHeader
from shared_adm.packet.soap_header import SoapHeader
from shared_adm.packet.transaction_header import TransactionHeader
from shared_adm.packet.user_header import UserHeader

MIN_PACKET_SIZE = BASE_HEADER.size + 48 + 56


@dataclass(slots=True)
class UserMessagePacket:
    """MS-MQMQ 2.2.20: the headers of one packet in wire order. ``session_header`` is the raw 16-byte
    SessionHeader (2.2.20.4) after PacketSize when BaseHeader.Flags.SH is set."""
    base: BaseHeader
    user: UserHeader
    properties: MessagePropertiesHeader
    transaction: TransactionHeader | None = None
    security: SecurityHeader | None = None
    debug: DebugHeader | None = None
    soap: SoapHeader | None = None
    multi_queue: MultiQueueFormatHeader | None = None
    session_header: bytes | None = None

    def pack(self, max_packet_size: int = MAX_PACKET_SIZE) -> bytes:
        """Serialize; BaseHeader.PacketSize is set last to the byte count (2.2.19.1, MS-MQDMPR 3.1.7.1.32)."""
        parts = [b"", self.user.pack()]
        if self.transaction is not None:
            parts.append(self.transaction.pack())
        if self.security is not None:
            parts.append(self.security.pack())
        parts += self.properties.pack_parts()
        for header in (self.debug, self.soap, self.multi_queue):
            if header is not None:
                parts.append(header.pack())
        size = BASE_HEADER.size + sum(map(len, parts))
        if size > max_packet_size:
            raise PacketError("BaseHeader", "PacketSize", None,
                              f"packet would be {size} bytes, more than the maximum {max_packet_size:#x}")
        self.base.packet_size = size
        parts[0] = self.base.pack()
        if self.session_header is not None:
            parts.append(self.session_header)
        return b"".join(parts)

    @classmethod
    def parse(cls, buffer: bytes | bytearray | memoryview,
              max_packet_size: int = MAX_PACKET_SIZE) -> UserMessagePacket:
        """Parse strictly: every announced header must be there, nothing may be left over."""
        if not isinstance(buffer, (bytes, bytearray, memoryview)):
            raise PacketError("UserMessagePacket", "", None, f"expected bytes, got {type(buffer).__name__}")
        view = memoryview(buffer).cast("B")
        base = BaseHeader.parse(view)
        flags, size = base.flags, base.packet_size
        if flags & BASE_IN:
            raise PacketError("BaseHeader", "Flags.IN", 2, "internal packet flag set; not a UserMessage Packet")
        if flags & BASE_TR and not flags & BASE_DH:
            raise PacketError("BaseHeader", "Flags.TR", 2, "tracing requested without a DebugHeader (DH clear)")
        if not MIN_PACKET_SIZE <= size <= max_packet_size:
            raise PacketError("BaseHeader", "PacketSize", 8,
                              f"{size} is outside {MIN_PACKET_SIZE}..{max_packet_size:#x}")
        expected = size + (SESSION_HEADER_SIZE if flags & BASE_SH else 0)
        if len(view) < expected:
            raise PacketError("BaseHeader", "PacketSize", 8, f"packet announces {expected} bytes"
                              f"{' with SessionHeader' if flags & BASE_SH else ''}, buffer holds {len(view)}")
        if len(view) > expected:
            raise PacketError("UserMessagePacket", "", expected, f"{len(view) - expected} bytes after the packet")

        r = Reader(view, BASE_HEADER.size, size, "UserHeader")
        user = UserHeader.parse(r)
        uflags = user.flags
        r.header = "TransactionHeader"
        transaction = TransactionHeader.parse(r) if uflags & USER_TH else None
        r.header = "SecurityHeader"
        security = SecurityHeader.parse(r) if uflags & USER_SH else None
        r.header = "MessagePropertiesHeader"
        properties_at = r.pos
        properties = MessagePropertiesHeader.parse(r)
        if properties.flags & PROPERTIES_ACKS and user.aq == 0:
            raise PacketError("MessagePropertiesHeader", "Flags", properties_at,
                              f"acknowledgements {properties.flags & PROPERTIES_ACKS:#x} requested but the "
                              "UserHeader has no AdminQueue (AQ = 0)")
        r.header = "DebugHeader"
        debug = DebugHeader.parse(r) if flags & BASE_DH else None
        r.header = "SoapHeader"
        soap = SoapHeader.parse(r) if uflags & USER_HH else None
        r.header = "MultiQueueFormatHeader"
        multi = MultiQueueFormatHeader.parse(r) if uflags & USER_MQ else None
        if r.pos != size:
            raise PacketError("BaseHeader", "PacketSize", 8,
                              f"{size}, but the announced headers end at {r.pos} ({size - r.pos} bytes unaccounted)")
        session = bytes(view[size:]) if flags & BASE_SH else None
        return cls(base, user, properties, transaction, security, debug, soap, multi, session)
