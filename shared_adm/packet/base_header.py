"""BaseHeader (MS-MQMQ 2.2.19.1): version, flags, signature, PacketSize, TimeToReachQueue."""
from __future__ import annotations

from dataclasses import dataclass

from shared_adm.packet.errors import PacketError
from shared_adm.packet.layout import BASE_HEADER, SIGNATURE, VERSION_NUMBER


@dataclass(slots=True)
class BaseHeader:
    """MS-MQMQ 2.2.19.1 BaseHeader (16 bytes)."""
    flags: int
    packet_size: int
    time_to_reach_queue: int
    reserved: int = 0
    version_number: int = VERSION_NUMBER
    signature: int = SIGNATURE

    def pack(self) -> bytes:
        """The 16 header bytes."""
        return BASE_HEADER.pack(self.version_number, self.reserved, self.flags, self.signature,
                                self.packet_size, self.time_to_reach_queue)

    @classmethod
    def parse(cls, view: memoryview) -> BaseHeader:
        """Parse and check VersionNumber and Signature (2.2.19.1)."""
        if len(view) < BASE_HEADER.size:
            raise PacketError("BaseHeader", "", 0, f"truncated: needs 16 bytes, packet has {len(view)}")
        version, reserved, flags, signature, size, ttrq = BASE_HEADER.unpack_from(view, 0)
        if version != VERSION_NUMBER:
            raise PacketError("BaseHeader", "VersionNumber", 0, f"{version:#04x}, MUST be 0x10")
        if signature != SIGNATURE:
            raise PacketError("BaseHeader", "Signature", 4, f"{signature:#010x}, MUST be 0x524f494c ('LIOR')")
        return cls(flags, size, ttrq, reserved, version, signature)
