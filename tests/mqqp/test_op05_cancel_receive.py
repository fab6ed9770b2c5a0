"""RemoteQMCancelReceive (MS-MQQP 3.1.4.6, opnum 5) through the RPC path: one test per processing bullet."""
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE
from qm2qm.mqqp.handlers._read import MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT
from shared_adm import status as st

from tests.mqqp.conftest import NULL_HANDLE

INFINITE = 0xFFFFFFFF


async def test_cancel_receive_returns_invalid_parameter_when_pqueue_is_zero(env):
    c, d, _ = await env.session()
    reader = await env.connect()
    pending = await env.blocked(reader, reader.start_receive, d.handle, timeout=INFINITE, request_id=1)
    assert await c.call(c.cancel_receive, d.handle, 1, p_queue=0) == st.MQ_ERROR_INVALID_PARAMETER
    assert not pending.done()
    assert await c.call(c.cancel_receive, d.handle, 1) == st.MQ_OK
    await pending


async def test_cancel_receive_returns_invalid_parameter_when_pqueue_differs_from_hqueue(env):
    c, d, _ = await env.session()
    assert await c.call(c.cancel_receive, d.handle, 1, p_queue=d.handle + 1) == st.MQ_ERROR_INVALID_PARAMETER


async def test_cancel_receive_returns_invalid_handle_when_no_read_is_pending_on_hqueue(env):
    c, d, _ = await env.session()
    assert await c.call(c.cancel_receive, d.handle, 1) == st.MQ_ERROR_INVALID_HANDLE


async def test_cancel_receive_returns_mq_error_when_no_pending_read_has_the_request_id(env):
    c, d, _ = await env.session()
    reader = await env.connect()
    pending = await env.blocked(reader, reader.start_receive, d.handle, timeout=INFINITE, request_id=1)
    assert await c.call(c.cancel_receive, d.handle, 2) == st.MQ_ERROR
    assert not pending.done()
    assert await c.call(c.cancel_receive, d.handle, 1) == st.MQ_OK
    await pending


async def test_cancel_receive_cancels_the_waiting_read_with_remote_canceled_by_client(env):
    c, d, _ = await env.session()
    reader = await env.connect()
    pending = await env.blocked(reader, reader.start_receive, d.handle, MQ_ACTION_RECEIVE, timeout=INFINITE,
                                request_id=77)
    assert await c.call(c.cancel_receive, d.handle, 77) == st.MQ_OK
    r = await pending
    assert (r.status, r.context, r.buffer) == (MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT, NULL_HANDLE, b"")


async def test_cancel_receive_deletes_the_remote_read_entry(env):
    c, d, _ = await env.session()
    reader = await env.connect()
    pending = await env.blocked(reader, reader.start_receive, d.handle, timeout=INFINITE, request_id=5)
    assert len(env.adm.remote_read_entries) == 1
    await c.call(c.cancel_receive, d.handle, 5)
    await pending
    assert len(env.adm.remote_read_entries) == 0
    assert await c.call(c.cancel_receive, d.handle, 5) == st.MQ_ERROR_INVALID_HANDLE


async def test_cancel_receive_leaves_the_message_for_the_next_reader(env):
    c, d, _ = await env.session()
    reader = await env.connect()
    pending = await env.blocked(reader, reader.start_receive, d.handle, timeout=INFINITE, request_id=5)
    await c.call(c.cancel_receive, d.handle, 5)
    await pending
    env.enqueue(b"after cancel")
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert r.status == st.MQ_OK and b"after cancel" in r.buffer


async def test_cancel_receive_cancels_a_waiting_peek(env):
    c, d, _ = await env.session()
    reader = await env.connect()
    pending = await env.blocked(reader, reader.start_receive2, d.handle, MQ_ACTION_PEEK_CURRENT,
                                timeout=INFINITE, request_id=6)
    assert await c.call(c.cancel_receive, d.handle, 6) == st.MQ_OK
    assert (await pending).status == MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT


async def test_cancel_receive_cancels_a_waiting_peek_next_on_a_cursor(env):
    c, d, _ = await env.session()
    env.enqueue(b"only")
    cursor = env.qm.open_cursor(d)
    reader = await env.connect()
    assert (await reader.call(reader.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT,
                              cursor=cursor.handle)).status == st.MQ_OK
    pending = await env.blocked(reader, reader.start_receive, d.handle, MQ_ACTION_PEEK_NEXT, timeout=INFINITE,
                                cursor=cursor.handle, request_id=8)
    assert await c.call(c.cancel_receive, d.handle, 8) == st.MQ_OK
    assert (await pending).status == MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT


async def test_cancel_receive_only_cancels_reads_of_its_own_descriptor(env):
    c, d1, _ = await env.session()
    _, d2, _ = await env.session()
    r1, r2 = await env.connect(), await env.connect()
    p1 = await env.blocked(r1, r1.start_receive, d1.handle, timeout=INFINITE, request_id=1)
    p2 = await env.blocked(r2, r2.start_receive, d2.handle, timeout=INFINITE, request_id=1)
    assert await c.call(c.cancel_receive, d1.handle, 1) == st.MQ_OK
    assert (await p1).status == MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT
    assert not p2.done()
    assert await c.call(c.cancel_receive, d2.handle, 1) == st.MQ_OK
    await p2
