"""RemoteQMStartReceive2 (MS-MQQP 3.1.4.10, opnum 9) through the RPC path: one test per processing bullet."""
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE, RR_ACK
from qm2qm.mqqp.handlers._read import MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT
from qm2qm.mqqp.handlers.start_receive2 import start_receive2
from shared_adm import status as st
from shared_adm.enums import PositionState
from shared_adm.packet import serialize_message_to_buffer

from tests.mqqp.conftest import NULL_HANDLE

LOW_7_BYTES = (1 << 56) - 1


async def test_start_receive2_returns_invalid_handle_when_lpremotereaddesc2_is_null(env):
    # lpRemoteReadDesc2 is a [ref] pointer: NDR cannot carry NULL, so the bullet is checked below the stub.
    assert (await start_receive2(env.service, None, None)).status == st.MQ_ERROR_INVALID_HANDLE


async def test_start_receive2_returns_invalid_handle_when_premotereaddesc_is_null(env):
    c, d, _ = await env.session()
    env.enqueue()
    r = await c.call(c.start_receive2, d.handle, null_desc=True)
    assert (r.status, r.context) == (st.MQ_ERROR_INVALID_HANDLE, NULL_HANDLE)
    assert set(env.positions().values()) == {PositionState.AVAILABLE}


async def test_start_receive2_returns_invalid_parameter_when_dwqueue_is_zero(env):
    c, d, _ = await env.session()
    env.enqueue()
    assert (await c.call(c.start_receive2, d.handle, dw_queue=0)).status == st.MQ_ERROR_INVALID_PARAMETER


async def test_start_receive2_returns_invalid_parameter_when_dwqueue_differs_from_hremotequeue(env):
    c, d, _ = await env.session()
    env.enqueue()
    r = await c.call(c.start_receive2, d.handle, dw_queue=d.handle ^ 1)
    assert r.status == st.MQ_ERROR_INVALID_PARAMETER


async def test_start_receive2_returns_invalid_parameter_when_request_id_is_already_pending(env):
    c, d, _ = await env.session()
    other = await env.connect()
    pending = await env.blocked(c, c.start_receive2, d.handle, timeout=0xFFFFFFFF, request_id=3)
    assert (await other.call(other.start_receive2, d.handle, request_id=3)).status == st.MQ_ERROR_INVALID_PARAMETER
    assert await other.call(other.cancel_receive, d.handle, 3) == st.MQ_OK
    assert (await pending).status == MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT


async def test_start_receive2_returns_status_invalid_parameter_for_peek_next_without_cursor(env):
    c, d, _ = await env.session()
    env.enqueue()
    assert (await c.call(c.start_receive2, d.handle, MQ_ACTION_PEEK_NEXT)).status == st.STATUS_INVALID_PARAMETER


async def test_start_receive2_returns_invalid_parameter_when_no_open_queue_entry(env):
    c = await env.connect()
    d = env.open_descriptor()
    env.enqueue()
    assert (await c.call(c.start_receive2, d.handle)).status == st.MQ_ERROR_INVALID_PARAMETER


async def test_start_receive2_returns_status_invalid_parameter_when_cursor_not_found(env):
    c, d, _ = await env.session()
    env.enqueue()
    assert (await c.call(c.start_receive2, d.handle, cursor=0x3131)).status == st.STATUS_INVALID_PARAMETER


async def test_start_receive2_receive_returns_the_packet_and_the_sequential_id(env):
    c, d, _ = await env.session()
    message = env.enqueue(b"seq", priority=5)
    assert message.lookup_identifier >> 56 != 0          # the high byte carries the priority
    r = await c.call(c.start_receive2, d.handle, MQ_ACTION_RECEIVE)
    assert r.status == st.MQ_OK and r.context != NULL_HANDLE
    assert r.sequential_id == message.lookup_identifier & LOW_7_BYTES
    stored = next(iter(env.queue.message_position_list)).message
    assert r.buffer == serialize_message_to_buffer(stored) and r.size == len(r.buffer)
    assert (r.arrive_time, r.reserved) == (message.arrival_time, 1)
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}
    assert (await c.call(c.end_receive, r.context, RR_ACK))[0] == st.MQ_OK


async def test_start_receive2_peek_sets_the_sequential_id_and_no_handle(env):
    c, d, _ = await env.session()
    message = env.enqueue(b"peeked")
    r = await c.call(c.start_receive2, d.handle, MQ_ACTION_PEEK_CURRENT)
    assert (r.status, r.context) == (st.MQ_OK, NULL_HANDLE)
    assert r.sequential_id == message.lookup_identifier & LOW_7_BYTES
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}


async def test_start_receive2_peek_next_walks_the_cursor(env):
    c, d, _ = await env.session()
    messages = [env.enqueue(b"w%d" % i) for i in range(3)]
    cursor = env.qm.open_cursor(d)
    seen = [(await c.call(c.start_receive2, d.handle, MQ_ACTION_PEEK_CURRENT, cursor=cursor.handle)).sequential_id]
    for _ in range(2):
        seen.append((await c.call(c.start_receive2, d.handle, MQ_ACTION_PEEK_NEXT,
                                  cursor=cursor.handle)).sequential_id)
    assert seen == [m.lookup_identifier & LOW_7_BYTES for m in messages]


async def test_start_receive2_failure_leaves_the_sequential_id_zero_and_no_handle(env):
    c, d, _ = await env.session()
    r = await c.call(c.start_receive2, d.handle, MQ_ACTION_RECEIVE, timeout=0)
    assert (r.status, r.context, r.sequential_id, r.size) == (st.MQ_ERROR_IO_TIMEOUT, NULL_HANDLE, 0, 0)


async def test_start_receive2_removes_the_remote_read_entry_when_it_returns(env):
    c, d, _ = await env.session()
    env.enqueue()
    await c.call(c.start_receive2, d.handle, MQ_ACTION_RECEIVE)
    assert len(env.adm.remote_read_entries) == 0 and len(env.adm.receive_handles) == 1
