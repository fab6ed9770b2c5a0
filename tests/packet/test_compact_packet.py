"""serialize_compact (MS-MQDMPR 3.1.7.1.32 from the compact form) gives the bytes of Serialize Message to Buffer
of the unpacked Message, or None; never other bytes."""
from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared_adm import compact
from shared_adm.message import GUID_NULL, DeliveryGuarantee, Message
from shared_adm.packet import PacketError, deserialize_message_from_buffer, serialize_message_to_buffer
from shared_adm.packet import codec as codec_module
from shared_adm.packet.compact_packet import HANDLED, IGNORED, serialize_compact
from shared_adm.packet.layout import MAX_PACKET_SIZE
from tests.packet.strategies import messages

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOURCE = uuid.UUID("11223344-5566-7788-99aa-bbccddeeff00")


def general_path(blob: bytes, max_packet_size: int = MAX_PACKET_SIZE) -> bytes:
    """What qm2qm.remote_read.packets did before: unpack, then Serialize Message to Buffer."""
    return serialize_message_to_buffer(compact.unpack(blob), max_packet_size)


def plain(m: Message) -> Message:
    """The headers serialize_compact handles: no transaction, security, tracing, SOAP, multi-queue, connector."""
    m.connector_type_identifier = None
    m.tracing_requested, m.tracing_queue_identifier = False, None
    m.soap_header = m.soap_body = None
    return m


def assert_same_or_none(m: Message) -> bytes | None:
    blob = compact.pack(m)
    fast = serialize_compact(blob, MAX_PACKET_SIZE)
    if fast is None:
        return None
    assert fast[0] == general_path(blob)
    assert fast[1:] == (m.arrival_time, m.lookup_identifier)
    return fast[0]


@SETTINGS
@given(messages())
def test_any_message_gives_the_general_paths_bytes_or_none(m):
    assert_same_or_none(m)


@SETTINGS
@given(messages(transactional=False, security=False, multi=False).map(plain),
       st.integers(0, 2**40), st.integers(0, 0xFFFFFFFF), st.booleans())
def test_a_plain_message_takes_the_compact_path_with_the_same_bytes(m, lookup_id, arrival, peek_when_locked):
    m.lookup_identifier, m.arrival_time, m.allow_peek_when_locked = lookup_id, arrival, peek_when_locked
    assert assert_same_or_none(m) is not None


@SETTINGS
@given(messages())
def test_a_parsed_packet_gives_the_general_paths_bytes_or_none(m):
    # a message received as a packet keeps its packet-only bits in Message.extra
    assert_same_or_none(deserialize_message_from_buffer(serialize_message_to_buffer(m)))


def message(**kw) -> Message:
    fields = dict(identifier=(SOURCE, 7), source_machine_identifier=SOURCE, sent_time=1700000000,
                  destination_queue_format_name="DIRECT=OS:host\\private$\\orders", label="order 42",
                  body=bytes(100))
    fields.update(kw)
    return Message(**fields)


@pytest.mark.parametrize("attribute, value", [
    ("priority", 8), ("priority", -1), ("sent_time", 1 << 32), ("class_", 0x10000), ("body_type", "x"),
    ("label", "a\x00b"), ("label", "x" * 250), ("label", 5), ("correlation_identifier", bytes(19)),
    ("acknowledgements_requested", 4), ("source_machine_identifier", None), ("identifier", (SOURCE, -1)),
    ("identifier", (uuid.UUID(int=5), 1)), ("destination_queue_type", 3), ("delivery_guarantee", 2),
    ("extra", {"UserHeader.Flags.RC": 1}), ("transaction_identifier", 3), ("sender_id_type", 1),
    ("body", bytearray(b"abc")), ("acknowledgements_requested", "x"), ("priority", 1.5), ("sent_time", 2.0),
    ("destination_queue_format_name", ["DIRECT=OS:a\\b"]), ("label", None), ("time_to_reach_queue", None),
])
def test_what_the_general_path_refuses_or_adds_is_left_to_it(attribute, value):
    m = message(**{attribute: value})
    blob = compact.pack(m)
    assert serialize_compact(blob, MAX_PACKET_SIZE) is None or serialize_compact(blob, MAX_PACKET_SIZE)[0] == \
        general_path(blob)
    if attribute not in ("body", "delivery_guarantee", "extra", "transaction_identifier", "sender_id_type"):
        with pytest.raises(PacketError):
            general_path(blob)


def test_a_packet_over_the_limit_is_left_to_the_general_path():
    blob = compact.pack(message(body=bytes(4000)))
    size = len(general_path(blob))
    assert serialize_compact(blob, size)[0] == general_path(blob, size)
    assert serialize_compact(blob, size - 1) is None
    with pytest.raises(PacketError):
        general_path(blob, size - 1)


def test_a_pickled_compact_form_is_left_to_the_general_path():
    blob = compact.pack(message(extra={"x": object()}))
    assert blob[:1] == b"P"
    assert serialize_compact(blob, MAX_PACKET_SIZE) is None


def test_a_null_source_takes_the_identifier_lineage_as_the_general_path_does():
    m = message(source_machine_identifier=GUID_NULL, delivery_guarantee=DeliveryGuarantee.RECOVERABLE)
    assert assert_same_or_none(m) is not None


def test_the_ignored_attributes_are_never_read_by_the_general_path():
    source = Path(codec_module.__file__).read_text()
    read = set(re.findall(r"\bm\.([a-z_]+)", source)) | set(re.findall(r'"([a-z_]+)"', source))
    assert not IGNORED & read
    assert set(HANDLED) <= read


@SETTINGS
@given(st.lists(messages(transactional=False, security=False, multi=False).map(plain), min_size=2, max_size=6))
def test_forms_of_one_shape_share_its_serializer_and_keep_their_own_values(batch):
    """The serializer of a shape is made once (compact_packet._SERIALIZERS) and reads each form's own values."""
    for m in batch:
        m.label = "same shape"
    first = [assert_same_or_none(m) for m in batch]
    assert [assert_same_or_none(m) for m in batch] == first         # now every shape has its serializer


@pytest.mark.parametrize("flat", [(0,), (0, b"x", 0, b"y"), (10_000, 1), [0, b"x"], ([0], b"x"), (None, 1)])
def test_an_odd_flat_form_is_left_to_the_general_path(flat):
    import marshal
    assert serialize_compact(b"M\x00" + marshal.dumps(flat), MAX_PACKET_SIZE) is None


def test_a_form_of_every_default_takes_the_serializer_of_the_empty_shape():
    import marshal
    blob = b"M\x00" + marshal.dumps(())
    fast = serialize_compact(blob, MAX_PACKET_SIZE)
    assert fast is None or fast[0] == general_path(blob)


def test_the_ignored_attributes_of_a_form_do_not_change_its_packet():
    """A form holding attributes Serialize Message to Buffer never reads (IGNORED) unpacks them to nothing."""
    plain_form = assert_same_or_none(message())
    assert plain_form is not None
    assert assert_same_or_none(message(allow_peek_when_locked=True, soap_envelope="<e/>", arrival_time=5,
                                       lookup_identifier=9)) == plain_form


def test_forms_of_shapes_beyond_the_serializer_table_are_left_to_the_general_path(monkeypatch):
    """Compiling a shape's serializer costs more than the general path, so a stream of ever new shapes stops being
    compiled once the table is full; the shapes already in it keep their serializers."""
    from shared_adm.packet import compact_packet
    monkeypatch.setattr(compact_packet, "_SERIALIZERS", {})
    monkeypatch.setattr(compact_packet, "_SERIALIZERS_MAX", 1)
    first = compact.pack(message())
    assert serialize_compact(first, MAX_PACKET_SIZE)[0] == general_path(first)
    other_shape = compact.pack(message(priority=5))
    assert serialize_compact(other_shape, MAX_PACKET_SIZE) is None
    assert list(compact_packet._SERIALIZERS) == [tuple(marshal_fields(first))]
    assert serialize_compact(first, MAX_PACKET_SIZE)[0] == general_path(first)


def test_compact_tells_each_attributes_number_and_packed_default():
    import dataclasses
    names = [f.name for f in dataclasses.fields(Message)]
    assert [compact.field_index(name) for name in names] == list(range(len(names)))
    blob = compact.pack(Message(label="x"))
    assert marshal_fields(blob) == {compact.field_index("label"): "x"}
    assert compact.packed_default("label") == Message().label
    assert compact.packed_default("destination_queue_manager_identifier") == \
        Message().destination_queue_manager_identifier.bytes


def marshal_fields(blob: bytes) -> dict:
    import marshal
    flat = marshal.loads(blob[2:])
    return dict(zip(flat[::2], flat[1::2]))
