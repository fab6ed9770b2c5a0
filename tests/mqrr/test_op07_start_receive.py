"""R_StartReceive (MS-MQRR 3.1.4.7, opnum 7), with the ppPacketSections rules (2.2.5–2.2.7)."""
from __future__ import annotations

import struct

import pytest

from qm2qm.mqrr.constants import (PEEK_ACCESS, stBinaryFirstSection, stBinarySecondSection, stFullPacket)
from qm2qm.mqrr.sections import body_span
from qm2qm.remote_read.actions import (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE,
                                       MQ_LOOKUP_PEEK_CURRENT, MQ_LOOKUP_PEEK_NEXT, MQ_LOOKUP_PEEK_PREV,
                                       MQ_LOOKUP_RECEIVE_CURRENT, MQ_LOOKUP_RECEIVE_NEXT)
from shared_adm import status as st
from shared_adm.enums import PositionState
from shared_adm.packet import serialize_message_to_buffer

INFINITE = 0xFFFFFFFF


def ttrq(packet: bytes) -> int:
    return struct.unpack_from("<I", packet, 12)[0]


@pytest.mark.parametrize("lookup_id, cursor, action, timeout", [
    (0, 0, MQ_LOOKUP_PEEK_CURRENT, 0),          # a lookup action with LookupId 0
    (5, 0, MQ_LOOKUP_PEEK_CURRENT, 10),         # a lookup action with a timeout
    (5, 1, MQ_LOOKUP_RECEIVE_CURRENT, 0),       # a lookup action with a cursor
    (5, 0, MQ_ACTION_RECEIVE, 0),               # a cursor/head action with a LookupId
    (0, 0, MQ_ACTION_PEEK_NEXT, 0),             # PEEK_NEXT without a cursor
    (0, 0, 0x12345678, 0),                      # no such action
])
async def test_start_receive_invalid_input_returns_invalid_parameter(env, lookup_id, cursor, action, timeout):
    env.enqueue()
    c, h = await env.opened()
    r = await env.call(c.read, h, action, lookup_id=lookup_id, cursor=cursor, timeout=timeout)
    assert (r.status, r.sections) == (st.MQ_ERROR_INVALID_PARAMETER, [])
    assert set(env.positions().values()) == {PositionState.AVAILABLE}


async def test_start_receive_request_id_in_use_on_the_handle_returns_invalid_parameter(env):
    env.enqueue(b"a")
    env.enqueue(b"b")
    c, h = await env.opened()
    assert (await env.call(c.read, h, request_id=3)).status == st.MQ_OK
    assert (await env.call(c.read, h, request_id=3)).status == st.MQ_ERROR_INVALID_PARAMETER


async def test_start_receive_unknown_cursor_returns_status_invalid_handle(env):
    env.enqueue()
    c, h = await env.opened()
    assert (await env.call(c.read, h, MQ_ACTION_PEEK_CURRENT, cursor=0x7777)).status == st.STATUS_INVALID_HANDLE


async def test_start_receive_closed_cursor_returns_status_invalid_handle(env):
    env.enqueue()
    c, h = await env.opened()
    _, cursor = await env.call(c.create_cursor, h)
    assert await env.call(c.close_cursor, h, cursor) == st.MQ_OK
    assert (await env.call(c.read, h, MQ_ACTION_RECEIVE, cursor=cursor)).status == st.STATUS_INVALID_HANDLE


async def test_start_receive_receive_adds_a_pending_request_entry_with_the_lookup_identifier(env):
    m = env.enqueue()
    c, h = await env.opened()
    r = await env.call(c.read, h, request_id=42)
    assert r.status == st.MQ_OK
    [d] = env.queue.open_queue_descriptor_collection
    entry = env.service.table.find(d.handle, 42)
    assert (entry.request_id, entry.descriptor_handle, entry.lookup_identifier) == (42, d.handle, m.lookup_identifier)


async def test_start_receive_receive_is_dequeue_message_begin_the_message_stays_locked(env):
    m = env.enqueue()
    c, h = await env.opened()
    assert (await env.call(c.read, h)).status == st.MQ_OK
    assert env.positions() == {m.lookup_identifier: PositionState.LOCKED}


async def test_start_receive_pending_request_cleanup_timer_returns_the_message_when_it_expires(env):
    m = env.enqueue()
    c, h = await env.opened()
    assert (await env.call(c.read, h, request_id=1)).status == st.MQ_OK
    env.scheduler.advance(env.service.cleanup_ms - 1)
    assert env.positions() == {m.lookup_identifier: PositionState.LOCKED}
    env.scheduler.advance(1)
    assert env.positions() == {m.lookup_identifier: PositionState.AVAILABLE}
    assert len(env.service.table) == 0
    assert await env.call(c.end, h, 1) == st.MQ_ERROR_INVALID_HANDLE


async def test_start_receive_waits_up_to_ultimeout_then_io_timeout(env):
    c, h = await env.opened()
    pending = await env.blocked(c.read, h, timeout=5000, request_id=1)
    env.scheduler.advance(4999)
    assert not pending.done()
    env.scheduler.advance(1)
    assert (await pending).status == st.MQ_ERROR_IO_TIMEOUT
    assert len(env.service.table) == 0


async def test_start_receive_waiting_receive_completes_when_a_message_arrives(env):
    c, h = await env.opened()
    pending = await env.blocked(c.read, h, timeout=INFINITE, request_id=1)
    m = env.enqueue(b"late")
    r = await pending
    assert (r.status, r.sequence_id) == (st.MQ_OK, m.lookup_identifier & ((1 << 56) - 1))
    assert await env.call(c.end, h, 1) == st.MQ_OK
    assert env.positions() == {}


async def test_start_receive_peek_current_is_peek_message_the_message_stays_available(env):
    m = env.enqueue(b"peeked")
    c, h = await env.opened(PEEK_ACCESS)
    r = await env.call(c.read, h, MQ_ACTION_PEEK_CURRENT)
    assert r.status == st.MQ_OK and b"peeked" in r.packet
    assert env.positions() == {m.lookup_identifier: PositionState.AVAILABLE}
    assert len(env.service.table) == 0              # a peek has no PendingRequestEntry


async def test_start_receive_peek_next_is_peek_next_message_on_the_cursor(env):
    env.enqueue(b"first")
    env.enqueue(b"second")
    c, h = await env.opened()
    _, cursor = await env.call(c.create_cursor, h)
    assert b"first" in (await env.call(c.read, h, MQ_ACTION_PEEK_CURRENT, cursor=cursor)).packet
    assert b"second" in (await env.call(c.read, h, MQ_ACTION_PEEK_NEXT, cursor=cursor)).packet


async def test_start_receive_cursor_receive_reads_at_the_cursor(env):
    env.enqueue(b"first")
    env.enqueue(b"second")
    c, h = await env.opened()
    _, cursor = await env.call(c.create_cursor, h)
    await env.call(c.read, h, MQ_ACTION_PEEK_CURRENT, cursor=cursor)
    await env.call(c.read, h, MQ_ACTION_PEEK_NEXT, cursor=cursor)
    r = await env.call(c.read, h, MQ_ACTION_RECEIVE, cursor=cursor, request_id=2)
    assert b"second" in r.packet
    assert env.bodies() == [b"first", b"second"]
    assert await env.call(c.end, h, 2) == st.MQ_OK
    assert env.bodies() == [b"first"]


@pytest.mark.parametrize("action, expected", [
    (MQ_LOOKUP_PEEK_CURRENT, b"two"), (MQ_LOOKUP_PEEK_NEXT, b"three"), (MQ_LOOKUP_PEEK_PREV, b"one")])
async def test_start_receive_lookup_peeks_are_read_message_by_lookup_identifier(env, action, expected):
    env.enqueue(b"one")
    two = env.enqueue(b"two")
    env.enqueue(b"three")
    c, h = await env.opened()
    r = await env.call(c.read, h, action, lookup_id=two.lookup_identifier)
    assert r.status == st.MQ_OK and expected in r.packet
    assert set(env.positions().values()) == {PositionState.AVAILABLE}


async def test_start_receive_lookup_receive_locks_the_message_and_end_receive_deletes_it(env):
    one = env.enqueue(b"one")
    two = env.enqueue(b"two")
    c, h = await env.opened()
    r = await env.call(c.read, h, MQ_LOOKUP_RECEIVE_NEXT, lookup_id=one.lookup_identifier, request_id=9)
    assert r.status == st.MQ_OK and b"two" in r.packet
    assert env.positions()[two.lookup_identifier] is PositionState.LOCKED
    assert await env.call(c.end, h, 9) == st.MQ_OK
    assert env.bodies() == [b"one"]


async def test_start_receive_lookup_of_a_missing_message_fails(env):
    env.enqueue()
    c, h = await env.opened()
    r = await env.call(c.read, h, MQ_LOOKUP_RECEIVE_CURRENT, lookup_id=0x1234567)
    assert r.status == st.MQ_ERROR_MESSAGE_NOT_FOUND


async def test_start_receive_sets_arrive_time_and_the_low_seven_bytes_of_the_lookup_identifier(env):
    m = env.enqueue()
    c, h = await env.opened()
    r = await env.call(c.read, h, MQ_ACTION_PEEK_CURRENT)
    assert r.arrive_time == m.arrival_time & 0xFFFFFFFF and r.arrive_time != 0
    assert r.sequence_id == m.lookup_identifier & ((1 << 56) - 1)


async def test_start_receive_body_within_dwmaxbodysize_is_one_full_packet_section(env):
    m = env.enqueue(b"x" * 100, sent_time=1_000_000, time_to_reach_queue=60)
    c, h = await env.opened()
    r = await env.call(c.read, h, MQ_ACTION_PEEK_CURRENT, max_body=100)
    [(kind, alloc, buffer)] = r.sections
    full = serialize_message_to_buffer(m)
    assert (kind, alloc, len(buffer)) == (stFullPacket, len(full), len(full))
    assert buffer[:12] + buffer[16:] == full[:12] + full[16:]


async def test_start_receive_time_to_reach_queue_becomes_sent_time_plus_time_to_reach_queue(env):
    env.enqueue(sent_time=1_000_000, time_to_reach_queue=60)
    c, h = await env.opened()
    r = await env.call(c.read, h, MQ_ACTION_PEEK_CURRENT)
    assert ttrq(r.packet) == 1_000_060


async def test_start_receive_infinite_time_to_reach_queue_stays_infinite(env):
    env.enqueue(sent_time=1_000_000, time_to_reach_queue=INFINITE)
    c, h = await env.opened()
    assert ttrq((await env.call(c.read, h, MQ_ACTION_PEEK_CURRENT)).packet) == INFINITE


async def test_start_receive_body_over_dwmaxbodysize_gives_two_sections_whose_concatenation_is_the_packet(env):
    body = bytes(range(256)) + b"tail"
    m = env.enqueue(body, label="cut", soap_header="<h/>", soap_body="<b/>", sent_time=5, time_to_reach_queue=7)
    c, h = await env.opened()
    r = await env.call(c.read, h, MQ_ACTION_RECEIVE, max_body=10, request_id=1)
    assert r.status == st.MQ_OK
    [(t1, alloc1, first), (t2, alloc2, second)] = r.sections
    full = serialize_message_to_buffer(m)
    full = full[:12] + struct.pack("<I", 12) + full[16:]          # the absolute TimeToReachQueue, 5 + 7
    start, end, properties_end = body_span(full)
    assert (t1, t2) == (stBinaryFirstSection, stBinarySecondSection)
    assert first == full[:start + 10]                              # the headers and the first 10 body bytes
    assert alloc1 == start + len(body)                             # headers + the whole body
    assert second == full[properties_end:] and alloc2 == len(second) > 0   # the trailers (SoapHeader)
    # the sections are the packet without the body bytes not transferred (and the header's 0-3 pad bytes)
    assert first + full[start + 10:properties_end] + second == full
    assert alloc1 - len(first) == len(body) - 10


async def test_start_receive_cut_body_without_trailers_is_one_first_section(env):
    env.enqueue(b"y" * 64)
    c, h = await env.opened()
    r = await env.call(c.read, h, MQ_ACTION_PEEK_CURRENT, max_body=0)
    [(kind, alloc, first)] = r.sections
    assert kind == stBinaryFirstSection and alloc == len(first) + 64


async def test_start_receive_failure_returns_no_sections(env):
    c, h = await env.opened()
    r = await env.call(c.read, h, MQ_ACTION_RECEIVE)
    assert (r.status, r.sections, r.arrive_time) == (st.MQ_ERROR_IO_TIMEOUT, [], 0)
