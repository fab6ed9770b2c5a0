"""Messages that cannot become a UserMessage Packet give a PacketError naming the field (MS-MQDMPR 3.1.7.1.32)."""
from __future__ import annotations

import uuid
import zlib

import pytest

from shared_adm.message import DeliveryGuarantee, Message
from shared_adm.packet import PacketError, deserialize_message_from_buffer, serialize_message_to_buffer
from shared_adm.packet.layout import MAX_PACKET_SIZE

SRC = uuid.UUID("11223344-5566-7788-99aa-bbccddeeff00")
DST = uuid.UUID("a0b1c2d3-e4f5-0617-2839-4a5b6c7d8e9f")
DIRECT = "DIRECT=OS:h\\q"


def msg(**kw) -> Message:
    base = dict(identifier=(SRC, 1), source_machine_identifier=SRC, destination_queue_format_name=DIRECT)
    base.update(kw)
    return Message(**base)


def test_label_of_249_characters_is_accepted():
    packet = serialize_message_to_buffer(msg(label="x" * 249))
    assert deserialize_message_from_buffer(packet).label == "x" * 249


@pytest.mark.parametrize("label", ["x" * 250, "\U0001F600" * 125])
def test_label_over_249_wchars_is_rejected(label):
    with pytest.raises(PacketError) as e:
        serialize_message_to_buffer(msg(label=label))
    assert (e.value.header, e.value.field) == ("MessagePropertiesHeader", "Label")
    assert "at most 249" in e.value.reason


CASES = [
    ("label-nul", dict(label="a\0b"), "MessagePropertiesHeader", "Label", "embedded NUL"),
    ("label-type", dict(label=b"bytes"), "MessagePropertiesHeader", "Label", "must be a str"),
    ("priority-8", dict(priority=8), "BaseHeader", "Flags.PR", "outside 0..0x7"),
    ("sent-time-negative", dict(sent_time=-1), "UserHeader", "SentTime", "outside"),
    ("ttrq-too-big", dict(time_to_reach_queue=1 << 32), "BaseHeader", "TimeToReachQueue", "outside"),
    ("class-too-big", dict(class_=0x10000), "MessagePropertiesHeader", "MessageClass", "outside"),
    ("acks-high-bits", dict(acknowledgements_requested=0x10, administration_queue_format_name=DIRECT),
     "MessagePropertiesHeader", "Flags", "outside"),
    ("acks-without-admin", dict(acknowledgements_requested=1), "MessagePropertiesHeader", "Flags",
     "no administration queue"),
    ("correlation-length", dict(correlation_identifier=b"short"), "MessagePropertiesHeader", "CorrelationID",
     "MUST be 20"),
    ("machine-format-name", dict(destination_queue_format_name=f"MACHINE={SRC}"), "FormatName",
     "DestinationQueue", "cannot be carried"),
    ("private-with-suffix", dict(destination_queue_format_name=f"PRIVATE={DST}\\1;JOURNAL"), "FormatName",
     "DestinationQueue", "no suffix"),
    ("bad-guid", dict(destination_queue_format_name="PUBLIC=zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz"), "FormatName",
     "DestinationQueue", "malformed GUID"),
    ("no-equals", dict(destination_queue_format_name="OS:h\\q"), "FormatName", "DestinationQueue", "no '='"),
    ("dl-in-user-header", dict(administration_queue_format_name=f"DL={SRC}"), "FormatName", "AdminQueue",
     "cannot be carried"),
    ("dl-domain-in-mqf", dict(destination_multi_queue_format_name=[f"DL={SRC}@dom"]), "FormatName",
     "MultiQueueFormatHeader.Destination", "domain"),
    ("direct-embedded-nul", dict(destination_queue_format_name="DIRECT=a\0b"), "UserHeader", "DestinationQueue",
     "embedded NUL"),
    ("direct-too-long", dict(destination_queue_format_name="DIRECT=" + "x" * 40000), "UserHeader",
     "DestinationQueue", "exceeds Count"),
    ("explicit-type-mismatch", dict(destination_queue_type=5), "UserHeader", "DestinationQueue",
     "cannot carry"),
    ("type-without-name", dict(administration_queue_type=7), "UserHeader", "AdminQueue", "no format name"),
    ("same-as-admin-differs", dict(administration_queue_format_name=DIRECT, response_queue_format_name="DIRECT=x",
                                   response_queue_type=1), "UserHeader", "ResponseQueue", "cannot carry"),
    ("admin-on-source-elsewhere", dict(administration_queue_format_name=f"PRIVATE={DST}\\1",
                                       administration_queue_type=2), "UserHeader", "AdminQueue", "cannot carry"),
    ("private-destination-other-qm", dict(destination_queue_format_name=f"PRIVATE={DST}\\1",
                                          destination_queue_manager_identifier=SRC), "UserHeader",
     "QueueManagerAddress", "is not on"),
    ("identifier-lineage", dict(identifier=(DST, 1)), "UserHeader", "SourceQueueManager", "differs"),
    ("identifier-ordinal", dict(identifier=(SRC, -1)), "UserHeader", "MessageID", "not a uint32"),
    ("transactional-express", dict(transaction_identifier=1), "UserHeader", "Flags.DM", "MUST be recoverable"),
    ("tx-id-21-bits", dict(transaction_identifier=1 << 20, delivery_guarantee=DeliveryGuarantee.RECOVERABLE),
     "TransactionHeader", "Flags.ID", "20-bit"),
    ("tx-id-negative", dict(transaction_identifier=-1, delivery_guarantee=DeliveryGuarantee.RECOVERABLE),
     "TransactionHeader", "Flags.ID", "20-bit"),
    ("tx-id-float", dict(transaction_identifier=1.5, delivery_guarantee=DeliveryGuarantee.RECOVERABLE),
     "TransactionHeader", "Flags.ID", "not an int, bytes or str"),
    ("security-empty", dict(authentication_level=3), "SecurityHeader", "", "at least one"),
    ("sender-id-without-type", dict(sender_id=b"S"), "SecurityHeader", "SenderIdSize", "sender_id_type None"),
    ("sender-id-type-3", dict(sender_id=b"S", sender_id_type=3), "SecurityHeader", "Flags.ST", "not 0, 1 or 2"),
    ("signature-too-big", dict(signature=bytes(0x10000)), "SecurityHeader", "SignatureSize", "exceeds"),
    ("body-too-big", dict(body=bytes(MAX_PACKET_SIZE)), "BaseHeader", "PacketSize", "more than the maximum"),
    ("body-wrong-type", dict(body="text"), "UserMessagePacket", "", "wrong type"),
    ("guid-wrong-type", dict(tracing_queue_identifier="not a uuid"), "DebugHeader", "QueueIdentifier",
     "expected a uuid.UUID"),
]


@pytest.mark.parametrize("attrs, header, field, reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_unserializable_message(attrs, header, field, reason):
    with pytest.raises(PacketError) as e:
        serialize_message_to_buffer(msg(**attrs))
    err = e.value
    assert err.header == header and err.field.startswith(field) and reason in err.reason, str(err)
    assert err.offset is None


def test_max_packet_size_can_be_raised_for_oversized_bodies():
    body = bytes(4 << 20)
    packet = serialize_message_to_buffer(msg(body=body), max_packet_size=8 << 20)
    assert deserialize_message_from_buffer(packet, max_packet_size=8 << 20).body == body
    with pytest.raises(PacketError):
        deserialize_message_from_buffer(packet)


def test_format_names_are_canonicalized():
    m = msg(destination_queue_format_name=f"private={str(DST).upper()}\\B",
            administration_queue_format_name=f"Public={str(SRC).upper()}",
            response_queue_format_name="direct=OS:h\\q")
    back = deserialize_message_from_buffer(serialize_message_to_buffer(m))
    assert back.destination_queue_format_name == f"PRIVATE={DST}\\0000000b"
    assert back.administration_queue_format_name == f"PUBLIC={SRC}"
    assert back.response_queue_format_name == "DIRECT=OS:h\\q"


@pytest.mark.parametrize("key", [bytes(range(16)), "xact-42"])
def test_queue_manager_transaction_keys_become_a_stable_20_bit_id(key):
    raw = key.encode() if isinstance(key, str) else key
    packets = [serialize_message_to_buffer(msg(transaction_identifier=key, label=label,
                                               delivery_guarantee=DeliveryGuarantee.RECOVERABLE))
               for label in ("first", "second")]
    ids = {deserialize_message_from_buffer(p).transaction_identifier for p in packets}
    assert ids == {zlib.crc32(raw) & 0xFFFFF}
