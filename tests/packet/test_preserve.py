"""Bits a receiver MUST ignore (MS-MQMQ 2.2.19–2.2.20 reserved fields) are kept in Message.extra so a foreign
packet re-serializes byte for byte."""
from __future__ import annotations

import struct
import uuid

import pytest

from shared_adm.packet import PacketError, UserMessagePacket, deserialize_message_from_buffer, \
    serialize_message_to_buffer
from shared_adm.message import GUID_NULL
from shared_adm.packet import codec
from tests.packet.test_malformed import FULL, START, patch, user_flags


def same_after_round_trip(packet: bytes) -> dict:
    m = deserialize_message_from_buffer(packet)
    assert serialize_message_to_buffer(m) == packet
    return m.extra


def or16(offset: int, bits: int, base: bytes = FULL) -> bytes:
    return patch(offset, "<H", struct.unpack_from("<H", base, offset)[0] | bits, base)


def or32(offset: int, bits: int, base: bytes = FULL) -> bytes:
    return patch(offset, "<I", struct.unpack_from("<I", base, offset)[0] | bits, base)


@pytest.mark.parametrize("packet, key, value", [
    (patch(1, "<B", 0xC0), codec.X_BASE_RESERVED, 0xC0),
    (or16(2, 0x8240), codec.X_BASE_FLAGS, 0x8240),
    (or16(2, 0x0005), codec.X_BASE_PR, 5),                       # PR of a transactional packet
    (user_flags(0x03), codec.X_USER_RC, 3),
    (user_flags(0x01000080), codec.X_USER_FLAGS, 0x01000080),
    (or32(START["TransactionHeader"], 0x80000000), codec.X_TX_FLAGS, 0x80000000),
    (or16(START["SecurityHeader"], 0x0080), codec.X_SEC_FLAGS, 0x0080),                # AI
    (or16(START["SecurityHeader"], 0x0040), codec.X_SEC_FLAGS, 0x0040),                # DE with a provider
    (patch(START["MessagePropertiesHeader"], "<B", 0xFF), codec.X_MPH_FLAGS, 0xF0),
    (or16(START["DebugHeader"], 0x0100), codec.X_DEBUG, (0x0100, 0)),
    (patch(START["DebugHeader"] + 2, "<H", 7), codec.X_DEBUG, (0, 7)),
    (patch(START["SoapHeader"] + 2, "<H", 9), codec.X_SOAP, (9, 0)),
    (patch(START["MultiQueueFormatHeader"] + 6, "<H", 3), codec.X_MQF, (3, 0, 0, 0)),
])
def test_ignored_bits_are_kept(packet, key, value):
    extra = same_after_round_trip(packet)
    assert extra == {key: value}


def test_transactional_priority_is_ignored():
    m = deserialize_message_from_buffer(or16(2, 0x0005))
    assert m.priority == 0


def test_session_header_after_packet_size_is_kept():
    session = bytes(range(16))
    packet = or16(2, 0x0010) + session
    assert same_after_round_trip(packet) == {codec.X_SESSION: session}
    with pytest.raises(PacketError) as e:
        deserialize_message_from_buffer(packet[:-1])
    assert "with SessionHeader" in e.value.reason


def test_allocation_body_size_beyond_message_size_is_kept():
    m = deserialize_message_from_buffer(FULL)
    packet_parsed = UserMessagePacket.parse(FULL)
    packet_parsed.properties.body_tail = b"\xAA\xBB"
    packet = packet_parsed.pack()
    back = deserialize_message_from_buffer(packet)
    assert back.body == m.body and back.extra == {codec.X_BODY_TAIL: b"\xAA\xBB"}
    assert serialize_message_to_buffer(back) == packet


def test_empty_label_with_nul_is_kept():
    p = UserMessagePacket.parse(FULL)
    p.properties.label = ""
    packet = p.pack()
    assert UserMessagePacket.parse(packet).properties.label == ""
    m = deserialize_message_from_buffer(packet)
    assert m.label == "" and m.extra == {codec.X_LABEL_NUL: True}
    assert serialize_message_to_buffer(m) == packet


def test_address_beside_a_direct_destination_is_kept_but_not_taken_as_destination_qm():
    qma = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")
    packet = bytearray(FULL)
    packet[0x20:0x30] = qma.bytes_le
    m = deserialize_message_from_buffer(bytes(packet))
    assert m.destination_queue_manager_identifier == GUID_NULL and m.extra == {codec.X_DIRECT_QMA: qma}
    assert serialize_message_to_buffer(m) == bytes(packet)


def test_direct_destination_always_gets_a_null_queue_manager_address():
    m = deserialize_message_from_buffer(FULL)
    m.destination_queue_manager_identifier = uuid.uuid4()
    assert serialize_message_to_buffer(m)[0x20:0x30] == bytes(16)


def test_empty_debug_header_is_kept():
    packet = patch(2, "<H", 0x0020, FULL)        # DH without TR; the DebugHeader has QT 0
    packet = patch(START["DebugHeader"], "<H", 0, packet)
    packet = packet[:START["DebugHeader"] + 4] + packet[START["DebugHeader"] + 20:]
    packet = patch(8, "<I", len(packet), packet)
    m = deserialize_message_from_buffer(packet)
    assert not m.tracing_requested and m.tracing_queue_identifier is None
    assert m.extra == {codec.X_DEBUG: (0, 0)}
    assert serialize_message_to_buffer(m) == packet


def provider_packet(info: bytes, flags: int = 0x0001) -> bytes:
    """A packet whose SecurityHeader has a 4-byte SID and the given raw ProviderInfo."""
    p = UserMessagePacket.parse(FULL)
    p.security.flags = flags
    p.security.security_id = b"SID!"
    p.security.signature = b""
    p.security.provider_info = None
    packet = p.pack()
    start = START["SecurityHeader"]
    header = struct.pack("<HHHHII", flags, 4, 0, 0, 0, len(info)) + b"SID!" + info + bytes(-len(info) & 3)
    old_len = 16 + 4
    return patch(8, "<I", len(packet) - old_len + len(header),
                 packet[:start] + header + packet[start + old_len:])


def test_provider_info_extension_after_the_name_is_kept():
    ext = struct.pack("<HH", 1, 13) + b"\x01\x00\x00\x00\x09\x00\x05\x00" + b"X"   # SecInfoEx data, odd length
    info = struct.pack("<I", 1) + "Prov\0".encode("utf-16-le") + ext
    packet = provider_packet(info, flags=0x0081)                                    # ST 1 + AI
    m = deserialize_message_from_buffer(packet)
    assert m.authentication_provider_name == "Prov" and m.authentication_provider_type == 1
    assert m.extra == {codec.X_PROVIDER_EXTENSION: ext, codec.X_SEC_FLAGS: 0x0080}
    assert serialize_message_to_buffer(m) == packet


def test_provider_info_with_empty_name_is_kept():
    packet = provider_packet(struct.pack("<I", 24) + b"\0\0")
    m = deserialize_message_from_buffer(packet)
    assert m.authentication_provider_name == "" and m.authentication_provider_type == 24
    assert serialize_message_to_buffer(m) == packet


@pytest.mark.parametrize("info, reason", [
    (struct.pack("<I", 1), "cannot hold"),
    (struct.pack("<I", 1) + "ab".encode("utf-16-le"), "no terminating NUL"),
    (struct.pack("<I", 1) + b"a\0\0", "no terminating NUL"),
])
def test_bad_provider_info(info, reason):
    with pytest.raises(PacketError) as e:
        deserialize_message_from_buffer(provider_packet(info))
    assert e.value.header == "SecurityHeader" and reason in e.value.reason
