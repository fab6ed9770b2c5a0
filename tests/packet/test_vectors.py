"""Test vectors: MS-MQQB 4.1.7 FRAME 7 (corrected), MS-MQQB 4.1.3/4.1.8 BaseHeaders, and two synthetic
packets built by hand from the MS-MQMQ tables (notes/ms-mqmq-usermessage.md 11.3)."""
from __future__ import annotations

import pathlib
import uuid

import pytest

from shared_adm.message import GUID_NULL, DeliveryGuarantee, Message
from shared_adm.packet import PacketError, UserMessagePacket, deserialize_message_from_buffer, \
    serialize_message_to_buffer

DATA = pathlib.Path(__file__).parent / "data"


def published_frame7() -> bytes:
    """The hex dump printed in MS-MQQB 4.1.7, byte for byte (it stops after 1650 of the 2224 bytes)."""
    return bytes.fromhex((DATA / "mqqb_4_1_7_frame7_published.hex").read_text())


def corrected_frame7() -> bytes:
    """FRAME 7 with the published dump's errors corrected:

    1. 0x34..0x37 SentTime: the dump repeats the BaseHeader signature ``4C 49 4F 52``; the decode above it
       says SentTime = 1141966310 (0x441105E6), so the bytes are ``E6 05 11 44``.
    2. 0x88 MessagePropertiesHeader.Flags: the dump has 0x0F (every ack), the decode says no acks, and
       acks without an AdminQueue (AQ = 0 here) are forbidden by MS-MQMQ 2.2.19.2, so 0x00.
    3. The dump stops at 1650 bytes, inside the body. The decode says MessageSize 2000 (VT_BSTR, every
       WCHAR shown is 'a') and PacketSize 2224: the body continues with 'a' WCHARs to 0x8AE, then 2 zero
       padding bytes (the decode's "Padding: 1 Bytes", AllocatedBodySize 20 and EncryptionAlgorithm
       0x6601 contradict the hex 0x7D0 / 0x6801 / PacketSize, so the hex is kept).
    """
    raw = bytearray(published_frame7())
    assert raw[0x34:0x38] == b"LIOR" and raw[0x88] == 0x0F and len(raw) == 1650
    raw[0x34:0x38] = (0x441105E6).to_bytes(4, "little")
    raw[0x88] = 0x00
    body_end = 0xDE + 2000
    raw += b"a\x00" * ((body_end - len(raw)) // 2)
    raw += bytes(2224 - body_end)
    return bytes(raw)


def test_frame7_published_dump_is_rejected_as_truncated():
    with pytest.raises(PacketError) as e:
        deserialize_message_from_buffer(published_frame7())
    assert e.value.field == "PacketSize" and "2224" in str(e.value) and "1650" in str(e.value)


def test_frame7_without_the_flags_correction_is_rejected_for_acks_without_admin_queue():
    raw = bytearray(corrected_frame7())
    raw[0x88] = 0x0F
    with pytest.raises(PacketError) as e:
        deserialize_message_from_buffer(bytes(raw))
    assert (e.value.header, e.value.field, e.value.offset) == ("MessagePropertiesHeader", "Flags", 0x88)


def test_frame7_fields():
    packet = corrected_frame7()
    p = UserMessagePacket.parse(packet)
    assert (p.base.flags, p.base.packet_size, p.base.time_to_reach_queue) == (0x0003, 2224, 345600)
    assert p.user.flags == 0x00281C00 and (p.user.dq, p.user.aq, p.user.rq) == (7, 0, 0)
    assert p.user.destination_queue == "OS:a04bm02\\q"
    assert p.security.flags == 0x0001 and len(p.security.security_id) == 28
    assert p.transaction is p.debug is p.soap is p.multi_queue is None

    m = deserialize_message_from_buffer(packet)
    # SourceQueueManager: the decode prints {C626EA11-...-9150557358D1}, the 16 wire bytes reversed;
    # the MS-DTYP 2.3.4.2 reading of the same bytes is this GUID.
    source = uuid.UUID("557358d1-9150-9595-4997-b6e611ea26c6")
    assert m.source_machine_identifier == source and m.identifier == (source, 2286)
    assert m.destination_queue_manager_identifier == GUID_NULL
    assert m.priority == 3 and m.delivery_guarantee == DeliveryGuarantee.EXPRESS
    assert m.time_to_reach_queue == 345600 and m.time_to_be_received == 0xFFFFFFFF
    assert m.sent_time == 1141966310
    assert m.destination_queue_format_name == "DIRECT=OS:a04bm02\\q"
    assert m.administration_queue_format_name is None and m.response_queue_format_name is None
    assert not m.positive_journaling_requested and not m.negative_journaling_requested
    assert m.sender_id_type == 1 and m.authentication_level == 0
    assert m.sender_id == bytes.fromhex("010500000000000515000000AD4A9EBD36D9FA3D63A656DAE8030000")  # S-1-5-21-…-1000
    assert m.symmetric_key == m.signature == m.sender_certificate == b""
    assert m.acknowledgements_requested == 0 and m.class_ == 0
    assert m.correlation_identifier == bytes(20)
    assert m.body_type == 8 and m.application_tag == 0
    assert m.privacy_level == 0 and m.hash_algorithm == 0x8004 and m.encryption_algorithm == 0x6801
    assert m.label == "mqsender label" and m.extension == b""
    assert m.body == "a".encode("utf-16-le") * 1000
    assert m.transaction_identifier is None and not m.tracing_requested
    assert m.extra == {}


def test_frame7_reserializes_to_the_same_bytes():
    packet = corrected_frame7()
    assert serialize_message_to_buffer(deserialize_message_from_buffer(packet)) == packet


@pytest.mark.parametrize("frame, reason", [
    # MS-MQQB 4.1.8 SessionAck: Flags 0x001B = PR 3 + IN + SH
    ("10CD1B004C494F5224000000FFFFFFFF0000010001000000000000000000000040000000", "internal packet"),
    # MS-MQQB 4.1.3 EstablishConnection (BaseHeader only): Flags 0x000B = PR 3 + IN
    ("10C00B004C494F523C020000FFFFFFFF", "internal packet"),
])
def test_mqqb_internal_packets_are_not_user_messages(frame, reason):
    with pytest.raises(PacketError) as e:
        deserialize_message_from_buffer(bytes.fromhex(frame))
    assert e.value.field == "Flags.IN" and reason in e.value.reason


SOURCE = uuid.UUID("11223344-5566-7788-99AA-BBCCDDEEFF00")


def dump(text: str) -> bytes:
    """Bytes of a hex dump whose rows start with an offset column."""
    return bytes.fromhex("".join(line.split(None, 1)[1] for line in text.strip().splitlines()))


VECTOR_A = dump("""
0000  10 00 05 00 4C 49 4F 52 C0 00 00 00 00 46 05 00
0010  44 33 22 11 66 55 88 77 99 AA BB CC DD EE FF 00
0020  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0030  80 51 01 00 00 F1 53 65 2A 00 00 00 20 1E 20 00
0040  34 00 4F 00 53 00 3A 00 6D 00 71 00 68 00 6F 00
0050  73 00 74 00 5C 00 70 00 72 00 69 00 76 00 61 00
0060  74 00 65 00 24 00 5C 00 6F 00 72 00 64 00 65 00
0070  72 00 73 00 00 00 00 00 00 06 00 00 00 00 00 00
0080  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0090  00 00 00 00 78 56 34 12 03 00 00 00 03 00 00 00
00A0  00 00 00 00 0E 80 00 00 01 68 00 00 00 00 00 00
00B0  68 00 65 00 6C 00 6C 00 6F 00 00 00 48 69 21 00
""")
VECTOR_B = dump("""
0000  10 00 03 00 4C 49 4F 52 88 00 00 00 FF FF FF FF
0010  44 33 22 11 66 55 88 77 99 AA BB CC DD EE FF 00
0020  D3 C2 B1 A0 F5 E4 17 06 28 39 4A 5B 6C 7D 8E 9F
0030  FF FF FF FF 00 F1 53 65 2B 00 00 00 00 4C 21 00
0040  0B 00 00 00 05 00 00 00 05 00 00 00 00 00 00 00
0050  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0060  11 10 00 00 00 00 00 00 08 00 00 00 08 00 00 00
0070  00 00 00 00 0E 80 00 00 01 68 00 00 00 00 00 00
0080  01 02 03 04 05 06 07 08
""")


def vector_a_message() -> Message:
    return Message(identifier=(SOURCE, 42), source_machine_identifier=SOURCE, sent_time=1700000000,
                   destination_queue_format_name="DIRECT=OS:mqhost\\private$\\orders",
                   delivery_guarantee=DeliveryGuarantee.RECOVERABLE, positive_journaling_requested=True,
                   priority=5, time_to_reach_queue=345600, time_to_be_received=86400, label="hello",
                   body=b"Hi!", application_tag=0x12345678, hash_algorithm=0x800E)


def vector_b_message() -> Message:
    dest_qm = uuid.UUID("A0B1C2D3-E4F5-0617-2839-4A5B6C7D8E9F")
    admin = f"PRIVATE={SOURCE}\\00000005"
    return Message(identifier=(SOURCE, 43), source_machine_identifier=SOURCE, sent_time=1700000000,
                   destination_queue_format_name=f"PRIVATE={dest_qm}\\0000000b",
                   administration_queue_format_name=admin, response_queue_format_name=admin,
                   response_queue_type=1, acknowledgements_requested=0x05, time_to_reach_queue=0xFFFFFFFF,
                   body_type=0x1011, body=bytes(range(1, 9)), hash_algorithm=0x800E)


def test_synthetic_vector_a_direct_name_padding_and_properties_padding():
    assert serialize_message_to_buffer(vector_a_message()) == VECTOR_A
    m = deserialize_message_from_buffer(VECTOR_A)
    assert m.destination_queue_type == 7 and m.label == "hello" and m.body == b"Hi!"


def test_synthetic_vector_b_private_queues_and_same_as_admin_response():
    assert serialize_message_to_buffer(vector_b_message()) == VECTOR_B
    m = deserialize_message_from_buffer(VECTOR_B)
    assert (m.destination_queue_type, m.administration_queue_type, m.response_queue_type) == (3, 2, 1)
    assert m.response_queue_format_name == m.administration_queue_format_name
    assert m.destination_queue_manager_identifier == uuid.UUID("A0B1C2D3-E4F5-0617-2839-4A5B6C7D8E9F")
    assert m.acknowledgements_requested == 0x05
