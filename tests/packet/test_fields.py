"""Every flag and queue-name encoding of the UserMessage Packet, checked at its byte offset
(MS-MQMQ 2.2.19.1–2.2.19.3, 2.2.20.5–2.2.20.8; MS-MQDMPR 3.1.7.1.32 attribute -> field table)."""
from __future__ import annotations

import struct
import uuid

import pytest

from shared_adm.message import GUID_NULL, DeliveryGuarantee, Message
from shared_adm.packet import UserMessagePacket, deserialize_message_from_buffer, serialize_message_to_buffer

SRC = uuid.UUID("11223344-5566-7788-99aa-bbccddeeff00")
DST = uuid.UUID("a0b1c2d3-e4f5-0617-2839-4a5b6c7d8e9f")
OTH = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
ADM = uuid.UUID("deadbeef-0000-1111-2222-333344445555")
DIRECT = "DIRECT=OS:h\\q"


def msg(**kw) -> Message:
    base = dict(identifier=(SRC, 1), source_machine_identifier=SRC, destination_queue_format_name=DIRECT)
    base.update(kw)
    return Message(**base)


def user_flags(packet: bytes) -> int:
    return struct.unpack_from("<I", packet, 0x3C)[0]


def base_flags(packet: bytes) -> int:
    return struct.unpack_from("<H", packet, 2)[0]


@pytest.mark.parametrize("attrs, mask, value", [
    (dict(delivery_guarantee=DeliveryGuarantee.RECOVERABLE), 0x00000060, 0x00000020),
    (dict(negative_journaling_requested=True), 0x00000100, 0x00000100),
    (dict(positive_journaling_requested=True), 0x00000200, 0x00000200),
    (dict(sender_id_type=1, sender_id=b"\x01\x00"), 0x00080000, 0x00080000),        # SH
    (dict(transaction_identifier=1, delivery_guarantee=DeliveryGuarantee.RECOVERABLE), 0x00100000, 0x00100000),
    (dict(), 0x00200000, 0x00200000),                                                # MP always
    (dict(connector_type_identifier=OTH), 0x00400000, 0x00400000),                   # CQ
    (dict(destination_multi_queue_format_name=[DIRECT]), 0x00800000, 0x00800000),   # MQ
    (dict(soap_body="<b/>"), 0x10000000, 0x10000000),                                # HH
])
def test_user_header_flag(attrs, mask, value):
    plain = serialize_message_to_buffer(msg())
    packet = serialize_message_to_buffer(msg(**attrs))
    assert user_flags(packet) & mask == value
    if attrs:
        assert user_flags(plain) & mask == 0
    back = deserialize_message_from_buffer(packet)
    assert all(getattr(back, k) == v for k, v in attrs.items())


@pytest.mark.parametrize("priority", range(8))
def test_base_header_priority(priority):
    assert base_flags(serialize_message_to_buffer(msg(priority=priority))) == priority


def test_transactional_packet_has_priority_zero():
    packet = serialize_message_to_buffer(msg(priority=6, transaction_identifier=5,
                                             delivery_guarantee=DeliveryGuarantee.RECOVERABLE))
    assert base_flags(packet) & 7 == 0
    assert deserialize_message_from_buffer(packet).priority == 0


@pytest.mark.parametrize("attrs, flags", [
    (dict(tracing_requested=True), 0x0120),                       # TR + DH, DebugHeader with QT 0
    (dict(tracing_queue_identifier=OTH), 0x0020),                 # DH only, QT 1
    (dict(tracing_requested=True, tracing_queue_identifier=OTH), 0x0120),
])
def test_base_header_tracing_flags_and_debug_header(attrs, flags):
    packet = serialize_message_to_buffer(msg(priority=0, **attrs))
    assert base_flags(packet) == flags
    debug = UserMessagePacket.parse(packet).debug
    queue = attrs.get("tracing_queue_identifier")
    assert debug.flags == (queue is not None) and debug.queue_identifier == queue
    assert packet[-16:] == queue.bytes_le if queue else packet[-4:] == b"\0\0\0\0"


@pytest.mark.parametrize("acks", [0x01, 0x02, 0x04, 0x08, 0x05, 0x0E, 0x0F])
def test_message_properties_ack_flags(acks):
    packet = serialize_message_to_buffer(msg(acknowledgements_requested=acks,
                                             administration_queue_format_name=DIRECT))
    assert UserMessagePacket.parse(packet).properties.flags == acks
    assert deserialize_message_from_buffer(packet).acknowledgements_requested == acks


@pytest.mark.parametrize("attrs, flags", [
    (dict(), 0x0),
    (dict(final_ack_required=True), 0x2),
    (dict(first_in_transaction=True), 0x4),
    (dict(last_in_transaction=True), 0x8),
    (dict(connector_queue_manager_identifier=OTH), 0x1),
])
def test_transaction_header_flags(attrs, flags):
    packet = serialize_message_to_buffer(msg(transaction_identifier=0xABCDE, transaction_sequence_number=2,
                                             transaction_previous_sequence_number=1,
                                             transactional_message_sequence_identifier=(7, 9),
                                             delivery_guarantee=DeliveryGuarantee.RECOVERABLE, **attrs))
    tx = UserMessagePacket.parse(packet).transaction
    assert tx.flags == 0xABCDE << 4 | flags
    raw = packet[0x50:0x50 + (36 if flags & 1 else 20)]     # UserHeader is 0x40 + 16 bytes for OS:h\q
    assert raw[:20] == struct.pack("<IIIII", tx.flags, 7, 9, 2, 1)
    if flags & 1:
        assert raw[20:] == OTH.bytes_le
    back = deserialize_message_from_buffer(packet)
    assert back.transaction_identifier == 0xABCDE and back.transactional_message_sequence_identifier == (7, 9)
    assert all(getattr(back, k) == v for k, v in attrs.items())


@pytest.mark.parametrize("attrs, flags", [
    (dict(sender_id_type=1, sender_id=b"S"), 0x0001),
    (dict(sender_id_type=2, sender_id=SRC.bytes_le), 0x0002),
    (dict(authentication_level=1, signature=b"x"), 0x0110 | 0x0040),     # AU, AS=1, DE (system signature)
    (dict(authentication_level=3, signature=b"x"), 0x0310 | 0x0040),
    (dict(authentication_level=5, signature=b"x", authentication_provider_name="P"), 0x0510),  # DE clear
    (dict(privacy_level=3, symmetric_key=b"k"), 0x0020),                                       # EB
])
def test_security_header_flags(attrs, flags):
    packet = serialize_message_to_buffer(msg(**attrs))
    assert UserMessagePacket.parse(packet).security.flags == flags
    back = deserialize_message_from_buffer(packet)
    assert all(getattr(back, k) == v for k, v in attrs.items())
    assert back.extra == {}


def test_security_data_items_are_4_aligned_and_in_spec_order():
    m = msg(sender_id_type=1, sender_id=b"12345", symmetric_key=b"k", signature=b"sig!", sender_certificate=b"ce",
            authentication_provider_name="AB", authentication_provider_type=0x18)
    packet = serialize_message_to_buffer(m)
    start = 0x50
    assert struct.unpack_from("<HHHHII", packet, start)[1:] == (5, 1, 4, 2, 4 + 6)
    data = packet[start + 16:start + 16 + 8 + 4 + 4 + 4 + 12]
    assert data == (b"12345\0\0\0" + b"k\0\0\0" + b"sig!" + b"ce\0\0"
                    + struct.pack("<I", 0x18) + "AB\0".encode("utf-16-le") + b"\0\0")


@pytest.mark.parametrize("name, dq, field, qma", [
    (None, 0, b"", GUID_NULL),
    (f"PRIVATE={DST}\\0000002a", 3, struct.pack("<I", 42), DST),
    (f"PUBLIC={OTH}", 5, OTH.bytes_le, DST),
    ("DIRECT=TCP:1.2.3.4\\q", 7, struct.pack("<H", 28) + "TCP:1.2.3.4\\q\0".encode("utf-16-le")
     + b"\0\0", GUID_NULL),
    ("DIRECT=OS:ab\\q", 7, struct.pack("<H", 16) + "OS:ab\\q\0".encode("utf-16-le") + b"\0\0", GUID_NULL),
    ("DIRECT=OS:abc\\q", 7, struct.pack("<H", 18) + "OS:abc\\q\0".encode("utf-16-le"), GUID_NULL),
])
def test_destination_queue_encodings(name, dq, field, qma):
    m = msg(destination_queue_format_name=name, destination_queue_manager_identifier=qma)
    packet = serialize_message_to_buffer(m)
    assert (user_flags(packet) >> 10) & 7 == dq
    assert packet[0x20:0x30] == qma.bytes_le
    assert packet[0x40:0x40 + len(field)] == field and (0x40 + len(field)) % 4 == 0
    back = deserialize_message_from_buffer(packet)
    assert back.destination_queue_format_name == name and back.destination_queue_type == dq


def test_private_destination_sets_queue_manager_address_from_the_name():
    packet = serialize_message_to_buffer(msg(destination_queue_format_name=f"PRIVATE={DST}\\1"))
    assert packet[0x20:0x30] == DST.bytes_le


@pytest.mark.parametrize("name, aq, field", [
    (f"PRIVATE={SRC}\\00000005", 2, struct.pack("<I", 5)),
    (f"PRIVATE={DST}\\00000006", 3, struct.pack("<I", 6)),
    (f"PUBLIC={OTH}", 5, OTH.bytes_le),
    (f"PRIVATE={OTH}\\00000007", 6, OTH.bytes_le + struct.pack("<I", 7)),
    ("DIRECT=OS:a\\b", 7, struct.pack("<H", 14) + "OS:a\\b\0".encode("utf-16-le")),
])
def test_admin_queue_encodings(name, aq, field):
    m = msg(destination_queue_format_name=f"PRIVATE={DST}\\1", administration_queue_format_name=name)
    packet = serialize_message_to_buffer(m)
    assert (user_flags(packet) >> 13) & 7 == aq
    assert packet[0x44:0x44 + len(field)] == field
    back = deserialize_message_from_buffer(packet)
    assert back.administration_queue_format_name == name and back.administration_queue_type == aq


@pytest.mark.parametrize("name, wanted, rq, field", [
    (None, None, 0, b""),
    (f"PRIVATE={ADM}\\00000003", 1, 1, b""),
    (f"PRIVATE={SRC}\\00000005", None, 2, struct.pack("<I", 5)),
    (f"PRIVATE={DST}\\00000006", None, 3, struct.pack("<I", 6)),
    (f"PRIVATE={ADM}\\00000009", None, 4, struct.pack("<I", 9)),
    (f"PUBLIC={OTH}", None, 5, OTH.bytes_le),
    (f"PRIVATE={OTH}\\00000007", None, 6, OTH.bytes_le + struct.pack("<I", 7)),
    ("DIRECT=OS:a\\b", None, 7, struct.pack("<H", 14) + "OS:a\\b\0".encode("utf-16-le")),
    (f"PRIVATE={ADM}\\00000003", None, 4, struct.pack("<I", 3)),     # same as admin, but 1 only when asked
    (f"PRIVATE={ADM}\\00000003", 6, 6, ADM.bytes_le + struct.pack("<I", 3)),
])
def test_response_queue_encodings(name, wanted, rq, field):
    admin = f"PRIVATE={ADM}\\00000003"
    m = msg(destination_queue_format_name=f"PRIVATE={DST}\\1", administration_queue_format_name=admin,
            response_queue_format_name=name, response_queue_type=wanted)
    packet = serialize_message_to_buffer(m)
    assert (user_flags(packet) >> 16) & 7 == rq
    at = 0x44 + 20                     # after the PrivateQueueFormatName admin queue (AQ 6)
    assert packet[at:at + len(field)] == field
    back = deserialize_message_from_buffer(packet)
    assert back.response_queue_format_name == name and back.response_queue_type == rq


def test_connector_type_follows_the_queue_fields():
    packet = serialize_message_to_buffer(msg(connector_type_identifier=OTH))
    assert packet[0x50:0x60] == OTH.bytes_le


def test_label_length_counts_wchars_with_nul_and_empty_label_is_absent():
    packet = serialize_message_to_buffer(msg(label="abc"))
    assert packet[0x51] == 4
    assert packet[0x50 + 56:0x50 + 64] == "abc\0".encode("utf-16-le")
    assert serialize_message_to_buffer(msg(label=""))[0x51] == 0


def test_properties_header_padding_and_field_order():
    packet = serialize_message_to_buffer(msg(label="L", extension=b"EXT", body=b"BODY", body_type=0x11,
                                             application_tag=0xA1B2C3D4, class_=0x4000,
                                             correlation_identifier=bytes(range(20)), privacy_level=1,
                                             hash_algorithm=0x8003, encryption_algorithm=0x6602))
    mp = packet[0x50:]
    assert struct.unpack_from("<BBH20sIIIIIIII", mp) == (0, 2, 0x4000, bytes(range(20)), 0x11, 0xA1B2C3D4, 4, 4,
                                                         1, 0x8003, 0x6602, 3)
    assert mp[56:] == "L\0".encode("utf-16-le") + b"EXT" + b"BODY" + b"\0"      # 56 + 4 + 3 + 4, padded to 68
    assert len(packet) % 4 == 0


def test_soap_header_layout():
    packet = serialize_message_to_buffer(msg(soap_header="h", soap_body="bo"))
    soap = packet[-28:]
    assert soap == (struct.pack("<HHI", 0x0320, 0, 2) + "h\0".encode("utf-16-le")
                    + struct.pack("<HHI", 0x0384, 0, 3) + "bo\0".encode("utf-16-le") + b"\0\0")


def test_multi_queue_format_header_layout():
    packet = serialize_message_to_buffer(msg(
        destination_multi_queue_format_name=[f"PUBLIC={OTH}", f"PRIVATE={DST}\\2", "DIRECT=OS:x\\y", f"DL={ADM}"],
        response_multi_queue_format_name=["DIRECT=a"], multiple_destination_signature=b"SIG"))
    p = UserMessagePacket.parse(packet)
    raw = p.multi_queue.pack()
    assert packet.endswith(raw)
    dest = (struct.pack("<H", 1) + b"\0\0" + OTH.bytes_le                   # 12..32 GUID padded to 16
            + struct.pack("<H", 2) + b"\0\0" + DST.bytes_le + struct.pack("<I", 2)  # 32..56 GUID padded to 36
            + struct.pack("<H", 3) + "OS:x\\y\0".encode("utf-16-le")           # 56..72 string at 58 (2-aligned)
            + struct.pack("<H", 6) + b"\0\0" + ADM.bytes_le)                    # 72..92 GUID padded to 76
    assert raw[:12] == struct.pack("<IHHI", 12 + len(dest), 0x64, 0, 4) and raw[12:12 + len(dest)] == dest
    at = 12 + len(dest)
    assert raw[at:at + 12] == struct.pack("<IHHI", 12, 0xC8, 0, 0)
    resp = struct.pack("<H", 3) + "a\0".encode("utf-16-le")
    assert raw[at + 12:at + 32] == struct.pack("<IHHI", 20, 0x12C, 0, 1) + resp + b"\0\0"
    assert raw[at + 32:] == struct.pack("<HHI", 0x15E, 0, 3) + b"SIG\0"
    back = deserialize_message_from_buffer(packet)
    assert back.destination_multi_queue_format_name == [f"PUBLIC={OTH}", f"PRIVATE={DST}\\00000002",
                                                        "DIRECT=OS:x\\y", f"DL={ADM}"]
    assert back.administration_multi_queue_format_name is None
    assert back.response_multi_queue_format_name == ["DIRECT=a"]
    assert back.multiple_destination_signature == b"SIG"
