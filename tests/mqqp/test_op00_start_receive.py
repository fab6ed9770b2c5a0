"""RemoteQMStartReceive (MS-MQQP 3.1.4.1, opnum 0) through the RPC path: one test per processing bullet."""
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE, RR_NACK
from qm2qm.mqqp.handlers._read import MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT
from qm2qm.mqqp.handlers.start_receive import start_receive
from shared_adm import status as st
from shared_adm.enums import PositionState
from shared_adm.packet import serialize_message_to_buffer

from tests.mqqp.conftest import NULL_HANDLE


async def test_start_receive_returns_invalid_handle_when_lpremotereaddesc_is_null(env):
    # lpRemoteReadDesc is a [ref] pointer: NDR cannot carry NULL, so the bullet is checked below the stub.
    assert (await start_receive(env.service, None, None)).status == st.MQ_ERROR_INVALID_HANDLE


async def test_start_receive_returns_invalid_parameter_when_dwqueue_is_zero(env):
    c, d, _ = await env.session()
    env.enqueue()
    r = await c.call(c.start_receive, d.handle, dw_queue=0)
    assert (r.status, r.context) == (st.MQ_ERROR_INVALID_PARAMETER, NULL_HANDLE)


async def test_start_receive_returns_invalid_parameter_when_dwqueue_differs_from_hremotequeue(env):
    c, d, _ = await env.session()
    env.enqueue()
    r = await c.call(c.start_receive, d.handle, dw_queue=d.handle + 1)
    assert r.status == st.MQ_ERROR_INVALID_PARAMETER
    assert set(env.positions().values()) == {PositionState.AVAILABLE}


async def test_start_receive_returns_invalid_parameter_when_request_id_is_already_pending(env):
    c, d, _ = await env.session()
    other = await env.connect()
    pending = await env.blocked(c, c.start_receive, d.handle, timeout=0xFFFFFFFF, request_id=7)
    r = await other.call(other.start_receive, d.handle, timeout=0xFFFFFFFF, request_id=7)
    assert r.status == st.MQ_ERROR_INVALID_PARAMETER
    assert await other.call(other.cancel_receive, d.handle, 7) == st.MQ_OK
    assert (await pending).status == MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT


async def test_start_receive_accepts_a_request_id_again_once_its_read_has_returned(env):
    c, d, _ = await env.session()
    env.enqueue(b"one")
    env.enqueue(b"two")
    first = await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT, request_id=5)
    second = await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT, request_id=5)
    assert (first.status, second.status) == (st.MQ_OK, st.MQ_OK)


async def test_start_receive_returns_status_invalid_parameter_for_peek_next_without_cursor(env):
    c, d, _ = await env.session()
    env.enqueue()
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_NEXT, cursor=0)
    assert r.status == st.STATUS_INVALID_PARAMETER


async def test_start_receive_returns_invalid_parameter_when_no_open_queue_entry(env):
    c = await env.connect()
    d = env.open_descriptor()                       # opened by qmcomm, but no RemoteQMOpenQueue
    env.enqueue()
    r = await c.call(c.start_receive, d.handle)
    assert r.status == st.MQ_ERROR_INVALID_PARAMETER
    assert set(env.positions().values()) == {PositionState.AVAILABLE}


async def test_start_receive_returns_invalid_handle_when_the_descriptor_is_gone(env):
    c, d, _ = await env.session()
    env.qm.close_queue(d)
    r = await c.call(c.start_receive, d.handle)
    assert r.status == st.MQ_ERROR_INVALID_HANDLE


async def test_start_receive_returns_status_invalid_parameter_when_cursor_not_found(env):
    c, d, _ = await env.session()
    env.enqueue()
    r = await c.call(c.start_receive, d.handle, cursor=0x7777)
    assert r.status == st.STATUS_INVALID_PARAMETER


async def test_start_receive_returns_invalid_parameter_for_an_unknown_action(env):
    c, d, _ = await env.session()
    env.enqueue()
    r = await c.call(c.start_receive, d.handle, 0x40000010)      # a lookup action is not valid here
    assert r.status == st.MQ_ERROR_INVALID_PARAMETER


async def test_start_receive_receive_returns_the_serialized_user_message_packet(env):
    c, d, _ = await env.session()
    message = env.enqueue(b"body bytes", label="hello")
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert r.status == st.MQ_OK
    stored = next(iter(env.queue.message_position_list)).message
    assert r.buffer == serialize_message_to_buffer(stored)
    assert r.size == len(r.buffer) == int.from_bytes(r.buffer[8:12], "little")      # BaseHeader.PacketSize
    assert r.arrive_time == message.arrival_time == env.qm.scheduler.wall_time() // 1
    assert r.reserved == 1
    assert r.context != NULL_HANDLE
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}


async def test_start_receive_receive_sets_a_context_handle_for_end_receive(env):
    c, d, _ = await env.session()
    env.enqueue()
    r = await c.call(c.start_receive, d.handle)
    assert await c.call(c.end_receive, r.context, RR_NACK) == (st.MQ_OK, NULL_HANDLE)


async def test_start_receive_peek_current_returns_the_front_message_without_removing_it(env):
    c, d, _ = await env.session()
    env.enqueue(b"first")
    env.enqueue(b"second")
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT)
    assert (r.status, r.context) == (st.MQ_OK, NULL_HANDLE)
    assert b"first" in r.buffer
    assert set(env.positions().values()) == {PositionState.AVAILABLE}


async def test_start_receive_peek_current_with_cursor_does_not_move_the_cursor(env):
    c, d, _ = await env.session()
    env.enqueue(b"first")
    env.enqueue(b"second")
    cursor = env.qm.open_cursor(d)
    a = await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT, cursor=cursor.handle)
    b = await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT, cursor=cursor.handle)
    assert b"first" in a.buffer and a.buffer == b.buffer


async def test_start_receive_peek_next_moves_the_cursor_to_the_next_message(env):
    c, d, _ = await env.session()
    for body in (b"m1", b"m2", b"m3"):
        env.enqueue(body)
    cursor = env.qm.open_cursor(d)
    first = await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT, cursor=cursor.handle)
    second = await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_NEXT, cursor=cursor.handle)
    third = await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_NEXT, cursor=cursor.handle)
    assert [b"m1" in first.buffer, b"m2" in second.buffer, b"m3" in third.buffer] == [True] * 3
    assert (await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT, cursor=cursor.handle)).buffer \
        == third.buffer


async def test_start_receive_receive_with_cursor_removes_the_message_at_the_cursor(env):
    c, d, _ = await env.session()
    m1, m2 = env.enqueue(b"m1"), env.enqueue(b"m2")
    cursor = env.qm.open_cursor(d)
    await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT, cursor=cursor.handle)
    await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_NEXT, cursor=cursor.handle)
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE, cursor=cursor.handle)
    assert r.status == st.MQ_OK and b"m2" in r.buffer
    assert env.positions() == {m1.lookup_identifier: PositionState.AVAILABLE,
                               m2.lookup_identifier: PositionState.LOCKED}


async def test_start_receive_removes_the_remote_read_entry_when_it_returns(env):
    c, d, _ = await env.session()
    env.enqueue()
    await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT)
    await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert len(env.adm.remote_read_entries) == 0
    assert len(env.adm.receive_handles) == 1        # the receive's entry lives on behind its handle


async def test_start_receive_sets_no_context_handle_and_returns_the_status_on_failure(env):
    c, d, _ = await env.session()
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE, timeout=0)
    assert (r.status, r.context, r.size, r.buffer) == (st.MQ_ERROR_IO_TIMEOUT, NULL_HANDLE, 0, b"")
    assert len(env.adm.remote_read_entries) == len(env.adm.receive_handles) == 0


async def test_start_receive_call_timer_expires_after_ultimeout_milliseconds(env):
    c, d, _ = await env.session()
    pending = await env.blocked(c, c.start_receive, d.handle, timeout=5000, request_id=1)
    entry = env.adm.remote_read_entries.find(d.handle, 1)
    env.scheduler.advance(4999)
    assert not entry.waiting.done()
    env.scheduler.advance(1)
    r = await pending
    assert (r.status, r.context) == (st.MQ_ERROR_IO_TIMEOUT, NULL_HANDLE)


async def test_start_receive_with_infinite_timeout_has_no_call_timer(env):
    c, d, _ = await env.session()
    pending = await env.blocked(c, c.start_receive, d.handle, timeout=0xFFFFFFFF, request_id=1)
    env.scheduler.advance(0xFFFFFFFF * 2)
    assert not pending.done()
    env.enqueue(b"late")
    r = await pending
    assert r.status == st.MQ_OK and b"late" in r.buffer


async def test_start_receive_peek_waits_for_a_message_when_ultimeout_is_nonzero(env):
    c, d, _ = await env.session()
    pending = await env.blocked(c, c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT, timeout=0xFFFFFFFF,
                                request_id=3)
    env.enqueue(b"arrived")
    r = await pending
    assert (r.status, r.context) == (st.MQ_OK, NULL_HANDLE) and b"arrived" in r.buffer
    assert set(env.positions().values()) == {PositionState.AVAILABLE}


async def test_start_receive_on_a_peek_only_descriptor_refuses_receive(env):
    from shared_adm.enums import QueueAccessType
    c, d, _ = await env.session(QueueAccessType.PEEK_ACCESS)
    env.enqueue()
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert r.status == st.MQ_ERROR_ACCESS_DENIED
    assert (await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT)).status == st.MQ_OK
