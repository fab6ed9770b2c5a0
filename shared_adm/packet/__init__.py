"""UserMessage Packet codec (MS-MQMQ 2.2.19–2.2.20) and the MS-MQDMPR 3.1.7.1.30–32 events."""
from shared_adm.packet.codec import (
    build_user_message_packet, construct_user_message_packet, deserialize_message_from_buffer,
    message_from_packet, serialize_message_to_buffer,
)
from shared_adm.packet.errors import PacketError
from shared_adm.packet.packet import UserMessagePacket

__all__ = [
    "PacketError", "UserMessagePacket", "build_user_message_packet", "construct_user_message_packet",
    "deserialize_message_from_buffer", "message_from_packet", "serialize_message_to_buffer",
]
