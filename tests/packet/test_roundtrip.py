"""Property tests: Message -> bytes -> Message and bytes -> Message -> bytes (MS-MQDMPR 3.1.7.1.31–32)."""
from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared_adm.packet import (
    PacketError, UserMessagePacket, construct_user_message_packet, deserialize_message_from_buffer,
    serialize_message_to_buffer,
)
from tests.packet.strategies import messages

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
QUEUE_TYPES = {"destination_queue_type", "administration_queue_type", "response_queue_type"}


def expected_types(name: str | None) -> set[int]:
    """The Queue Format Type codes that can stand for a format-name string (2.2.19.2 tables)."""
    if name is None:
        return {0}
    if name.startswith("DIRECT="):
        return {7}
    if name.startswith("PUBLIC="):
        return {5}
    return {2, 3, 4, 6}


@SETTINGS
@given(messages())
def test_message_bytes_message_keeps_every_carried_attribute(m):
    packet = serialize_message_to_buffer(m)
    back = deserialize_message_from_buffer(packet)
    for f in dataclasses.fields(m):
        if f.name in QUEUE_TYPES and getattr(m, f.name) is None:
            continue
        assert getattr(back, f.name) == getattr(m, f.name), f.name
    assert back.destination_queue_type in expected_types(m.destination_queue_format_name)
    assert back.administration_queue_type in expected_types(m.administration_queue_format_name)
    if m.response_queue_type is None:
        assert back.response_queue_type in expected_types(m.response_queue_format_name)


@SETTINGS
@given(messages())
def test_bytes_message_bytes_identical_for_packets_we_produce(m):
    packet = serialize_message_to_buffer(m)
    assert serialize_message_to_buffer(deserialize_message_from_buffer(packet)) == packet


@SETTINGS
@given(messages())
def test_packet_size_equals_length_and_every_header_is_4_aligned(m):
    packet = serialize_message_to_buffer(m)
    assert int.from_bytes(packet[8:12], "little") == len(packet)
    parsed = UserMessagePacket.parse(packet)
    sizes = [16, len(parsed.user.pack())]
    for h in (parsed.transaction, parsed.security):
        if h is not None:
            sizes.append(len(h.pack()))
    sizes.append(sum(map(len, parsed.properties.pack_parts())))
    for h in (parsed.debug, parsed.soap, parsed.multi_queue):
        if h is not None:
            sizes.append(len(h.pack()))
    assert all(s % 4 == 0 for s in sizes), sizes
    assert sum(sizes) == len(packet)


@SETTINGS
@given(messages())
def test_construct_user_message_packet_equals_serialize(m):
    assert construct_user_message_packet(m) == serialize_message_to_buffer(m)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages(), st.data())
def test_damaged_packets_raise_packet_error_or_parse_to_a_stable_message(m, data):
    packet = bytearray(serialize_message_to_buffer(m))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(packet) - 1))
        packet[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(packet)))
    for candidate in (bytes(packet), bytes(packet[:cut])):
        try:
            accepted = deserialize_message_from_buffer(candidate)
        except PacketError:
            continue
        again = serialize_message_to_buffer(accepted, max_packet_size=1 << 30)
        assert deserialize_message_from_buffer(again, max_packet_size=1 << 30) == accepted
