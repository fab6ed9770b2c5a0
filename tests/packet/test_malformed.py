"""Malformed UserMessage Packets (MS-MQMQ 2.2.19–2.2.20): each gives a PacketError naming header, field, offset."""
from __future__ import annotations

import struct
import uuid

import pytest

from shared_adm.message import DeliveryGuarantee, Message
from shared_adm.packet import PacketError, UserMessagePacket, deserialize_message_from_buffer, \
    serialize_message_to_buffer

SRC = uuid.UUID("11223344-5566-7788-99aa-bbccddeeff00")
OTHER = uuid.UUID("a0b1c2d3-e4f5-0617-2839-4a5b6c7d8e9f")
USER_FLAGS = 0x3C


def full_message() -> Message:
    """A message that makes every optional header appear."""
    return Message(
        identifier=(SRC, 7), source_machine_identifier=SRC, sent_time=1700000000,
        destination_queue_format_name="DIRECT=OS:host\\private$\\dest",
        administration_queue_format_name=f"PRIVATE={OTHER}\\00000009",
        response_queue_format_name="DIRECT=TCP:10.0.0.1\\r",
        acknowledgements_requested=0x0F, delivery_guarantee=DeliveryGuarantee.RECOVERABLE, priority=0,
        label="label", body=b"body-bytes", extension=b"ext",
        transaction_identifier=0x12345, transactional_message_sequence_identifier=(1, 2),
        transaction_sequence_number=3, transaction_previous_sequence_number=2,
        connector_queue_manager_identifier=OTHER, connector_type_identifier=OTHER,
        sender_id_type=1, sender_id=b"\x01\x01\x00\x00\x00\x00\x00\x05\x12\x00\x00\x00",
        signature=b"sig", authentication_provider_name="prov", authentication_provider_type=7,
        authentication_level=3, tracing_requested=True, tracing_queue_identifier=OTHER,
        soap_header="<h/>", soap_body="<b/>",
        destination_multi_queue_format_name=["DIRECT=OS:a\\b", f"PUBLIC={OTHER}", f"PRIVATE={SRC}\\00000001",
                                             f"DL={OTHER}"],
        administration_multi_queue_format_name=[f"PUBLIC={SRC}"], multiple_destination_signature=b"mqsig",
    )


FULL = serialize_message_to_buffer(full_message())


def boundaries(packet: bytes) -> list[tuple[str, int]]:
    """(header name, start offset) of every header of a packet we produced."""
    p = UserMessagePacket.parse(packet)
    out, at = [("UserHeader", 16)], 16 + len(p.user.pack())
    for name, h in (("TransactionHeader", p.transaction), ("SecurityHeader", p.security)):
        if h is not None:
            out.append((name, at))
            at += len(h.pack())
    out.append(("MessagePropertiesHeader", at))
    at += sum(map(len, p.properties.pack_parts()))
    for name, h in (("DebugHeader", p.debug), ("SoapHeader", p.soap), ("MultiQueueFormatHeader", p.multi_queue)):
        if h is not None:
            out.append((name, at))
            at += len(h.pack())
    assert at == len(packet)
    return out


BOUNDS = boundaries(FULL)
START = dict(BOUNDS)


def with_size(packet: bytes | bytearray, size: int | None = None) -> bytes:
    out = bytearray(packet)
    out[8:12] = struct.pack("<I", len(out) if size is None else size)
    return bytes(out)


def patch(offset: int, fmt: str, value: int, base: bytes = FULL) -> bytes:
    out = bytearray(base)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def user_flags(set_bits: int = 0, clear_bits: int = 0, base: bytes = FULL) -> bytes:
    (flags,) = struct.unpack_from("<I", base, USER_FLAGS)
    return patch(USER_FLAGS, "<I", flags & ~clear_bits | set_bits, base)


def test_full_message_has_every_optional_header():
    assert [name for name, _ in BOUNDS] == ["UserHeader", "TransactionHeader", "SecurityHeader",
                                            "MessagePropertiesHeader", "DebugHeader", "SoapHeader",
                                            "MultiQueueFormatHeader"]
    assert all(start % 4 == 0 for _, start in BOUNDS)


@pytest.mark.parametrize("name, start", BOUNDS)
def test_truncation_at_header_boundary_is_reported_against_packet_size(name, start):
    with pytest.raises(PacketError) as e:
        deserialize_message_from_buffer(FULL[:start])
    assert e.value.header == "BaseHeader" and e.value.field == "PacketSize"


@pytest.mark.parametrize("name, start", BOUNDS[1:])
def test_packet_ending_at_header_boundary_names_the_missing_header(name, start):
    with pytest.raises(PacketError) as e:
        deserialize_message_from_buffer(with_size(FULL[:start]))
    assert e.value.header == name and e.value.offset == start and "truncated" in e.value.reason


def test_every_truncation_point_raises_packet_error():
    for cut in range(len(FULL)):
        for candidate in (FULL[:cut], with_size(FULL[:cut]) if cut >= 12 else FULL[:cut]):
            with pytest.raises(PacketError):
                deserialize_message_from_buffer(candidate)


def direct_only(name: str = "OS:h\\q") -> bytes:
    return serialize_message_to_buffer(Message(destination_queue_format_name="DIRECT=" + name))


MP_START = 0x40 + 2 + 14  # direct_only(): 'OS:h\q' + NUL = 14 bytes, 2 + 14 = 16, no padding

CASES = [
    # (id, packet, header, field, reason fragment)
    ("version", patch(0, "<B", 0x11), "BaseHeader", "VersionNumber", "MUST be 0x10"),
    ("signature", patch(4, "<I", 0x52494F4C), "BaseHeader", "Signature", "LIOR"),
    ("in-flag", patch(2, "<H", 0x0008), "BaseHeader", "Flags.IN", "internal packet"),
    ("tr-without-dh", patch(2, "<H", 0x0100, direct_only()), "BaseHeader", "Flags.TR", "DebugHeader"),
    ("size-over-max", patch(8, "<I", 0x00400001), "BaseHeader", "PacketSize", "outside"),
    ("size-under-min", patch(8, "<I", 100), "BaseHeader", "PacketSize", "outside"),
    ("trailing-bytes", FULL + b"\0\0\0\0", "UserMessagePacket", "", "4 bytes after the packet"),
    ("unaccounted-bytes", with_size(FULL + bytes(8)), "BaseHeader", "PacketSize", "8 bytes unaccounted"),
    ("dq-1", user_flags(1 << 10, 7 << 10), "UserHeader", "Flags.DQ", "type 1 is invalid"),
    ("dq-2", user_flags(2 << 10, 7 << 10), "UserHeader", "Flags.DQ", "type 2 is invalid"),
    ("dq-4", user_flags(4 << 10, 7 << 10), "UserHeader", "Flags.DQ", "type 4 is invalid"),
    ("dq-6", user_flags(6 << 10, 7 << 10), "UserHeader", "Flags.DQ", "type 6 is invalid"),
    ("aq-1", user_flags(1 << 13, 7 << 13), "UserHeader", "Flags.AQ", "type 1 is invalid"),
    ("aq-4", user_flags(4 << 13, 7 << 13), "UserHeader", "Flags.AQ", "type 4 is invalid"),
    ("mp-clear", user_flags(0, 0x00200000), "UserHeader", "Flags.MP", "MUST always be set"),
    ("ah-set", user_flags(0x02000000), "UserHeader", "Flags.AH", "SRMP"),
    ("dm-2", user_flags(2 << 5, 3 << 5), "UserHeader", "Flags.DM", "delivery mode 2"),
    ("th-express", user_flags(0, 3 << 5), "UserHeader", "Flags.TH", "express"),
    ("rc-over-1d", user_flags(0x1E), "UserHeader", "Flags.RC", "exceeds 0x1D"),
    ("rq1-no-admin", user_flags(1 << 16, 7 << 16, direct_only()), "UserHeader", "Flags.RQ", "no admin queue"),
    ("rq4-admin-not-private", user_flags((4 << 16) | (7 << 13), 7 << 16, direct_only()), "UserHeader",
     "Flags.RQ", "not private"),
    ("direct-count-odd", patch(0x40, "<H", 13, direct_only()), "UserHeader", "DestinationQueue.DirectFormatName",
     "not a whole"),
    ("direct-count-past-end", patch(0x40, "<H", 0xFFFE, direct_only()), "UserHeader",
     "DestinationQueue.DirectFormatName", "truncated"),
    ("direct-no-nul", patch(0x40 + 2 + 12, "<H", 0x41, direct_only()), "UserHeader",
     "DestinationQueue.DirectFormatName", "not NUL-terminated"),
    ("direct-embedded-nul", patch(0x40 + 2, "<H", 0, direct_only()), "UserHeader",
     "DestinationQueue.DirectFormatName", "embedded NUL"),
    ("label-length-over-fa", patch(MP_START + 1, "<B", 0xFB, direct_only()), "MessagePropertiesHeader",
     "LabelLength", "exceeds 0xFA"),
    ("label-past-end", patch(MP_START + 1, "<B", 0xF0, direct_only()), "MessagePropertiesHeader", "Label",
     "truncated"),
    ("message-size-past-end", patch(MP_START + 32, "<I", 1000, patch(MP_START + 36, "<I", 1000, direct_only())),
     "MessagePropertiesHeader", "MessageBody", "truncated"),
    ("allocation-below-size", patch(MP_START + 32, "<I", 4, direct_only()), "MessagePropertiesHeader",
     "AllocationBodySize", "less than MessageSize"),
    ("extension-size-past-end", patch(MP_START + 52, "<I", 0x7FFFFFFF, direct_only()), "MessagePropertiesHeader",
     "ExtensionData", "truncated"),
    ("acks-without-admin", patch(MP_START, "<B", 0x01, direct_only()), "MessagePropertiesHeader", "Flags",
     "no AdminQueue"),
    ("security-st-3", patch(START["SecurityHeader"], "<H", 0x0303), "SecurityHeader", "Flags.ST", "invalid"),
    ("security-sizes-zero", FULL[:START["SecurityHeader"] + 2] + bytes(14) + FULL[START["SecurityHeader"] + 16:],
     "SecurityHeader", "SenderIdSize", "all SecurityData sizes are zero"),
    ("security-cert-over-ffff", patch(START["SecurityHeader"] + 8, "<I", 0x10000), "SecurityHeader",
     "SenderCertSize", "exceeds 0xFFFF"),
    ("debug-qt-2", patch(START["DebugHeader"], "<H", 2), "DebugHeader", "Flags.QT", "queue type 2"),
    ("soap-header-id", patch(START["SoapHeader"], "<H", 0x0321), "SoapHeader", "HeaderSectionID", "MUST be 0x0320"),
    ("soap-length-past-end", patch(START["SoapHeader"] + 4, "<I", 0x10000000), "SoapHeader", "HeaderDataLength",
     "past the end"),
    ("mqf-header-id", patch(START["MultiQueueFormatHeader"] + 4, "<H", 0x0065), "MultiQueueFormatHeader",
     "Destination.HeaderID", "MUST be 0x0064"),
    ("mqf-header-size-small", patch(START["MultiQueueFormatHeader"], "<I", 8), "MultiQueueFormatHeader",
     "Destination.HeaderSize", "outside"),
    ("mqf-element-count", patch(START["MultiQueueFormatHeader"] + 8, "<I", 5), "MultiQueueFormatHeader",
     "Destination.FormatNameList[4].FormatType", "0 left in Destination MQFAddressHeader (HeaderSize)"),
    ("mqf-element-type", patch(START["MultiQueueFormatHeader"] + 12, "<H", 4), "MultiQueueFormatHeader",
     "Destination.FormatNameList[0].FormatType", "not 1, 2, 3 or 6"),
]


@pytest.mark.parametrize("packet, header, field, reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_packet(packet, header, field, reason):
    with pytest.raises(PacketError) as e:
        deserialize_message_from_buffer(packet)
    err = e.value
    assert err.header == header and err.field.startswith(field) and reason in err.reason, str(err)
    assert err.offset is not None and 0 <= err.offset <= len(packet)


def test_st_zero_with_sender_id_is_rejected():
    packet = patch(START["SecurityHeader"], "<H", 0x0300)   # ST 0, AS 3, SenderIdSize still 12
    with pytest.raises(PacketError) as e:
        deserialize_message_from_buffer(packet)
    assert e.value.field == "SenderIdSize"


@pytest.mark.parametrize("value", [None, 42, "text", [1, 2]])
def test_non_buffer_input_is_rejected(value):
    with pytest.raises(PacketError) as e:
        deserialize_message_from_buffer(value)
    assert "expected bytes" in e.value.reason


def test_bytearray_and_memoryview_are_accepted():
    assert deserialize_message_from_buffer(bytearray(FULL)) == deserialize_message_from_buffer(memoryview(FULL))


def test_error_message_names_header_field_and_offset():
    with pytest.raises(PacketError) as e:
        deserialize_message_from_buffer(user_flags(1 << 10, 7 << 10))
    assert str(e.value) == ("UserHeader.Flags.DQ at offset 0x3c: destination queue type 1 is invalid "
                            "(MUST be 0, 3, 5 or 7)")
