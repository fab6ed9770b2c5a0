"""RemoteQMCloseCursor (MS-MQQP 3.1.4.5, opnum 4) through the RPC path: one test per processing bullet."""
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE
from shared_adm import status as st
from shared_adm.enums import RemoteReadState


async def test_close_cursor_returns_invalid_handle_when_hqueue_is_not_found(env):
    c, d, _ = await env.session()
    cursor = env.qm.open_cursor(d)
    assert await c.call(c.close_cursor, d.handle + 100, cursor.handle) == st.MQ_ERROR_INVALID_HANDLE
    assert env.qm.cursor_by_handle(cursor.handle) is cursor


async def test_close_cursor_returns_invalid_handle_when_hcursor_is_not_found(env):
    c, d, _ = await env.session()
    assert await c.call(c.close_cursor, d.handle, 0x5151) == st.MQ_ERROR_INVALID_HANDLE


async def test_close_cursor_returns_invalid_handle_when_the_cursor_belongs_to_another_descriptor(env):
    c, d, _ = await env.session()
    other = env.open_descriptor()
    cursor = env.qm.open_cursor(other)
    assert await c.call(c.close_cursor, d.handle, cursor.handle) == st.MQ_ERROR_INVALID_HANDLE
    assert env.qm.cursor_by_handle(cursor.handle) is cursor


async def test_close_cursor_generates_close_cursor_and_returns_mq_ok(env):
    c, d, _ = await env.session()
    env.enqueue()
    cursor = env.qm.open_cursor(d)
    assert await c.call(c.close_cursor, d.handle, cursor.handle) == st.MQ_OK
    assert env.qm.cursor_by_handle(cursor.handle) is None and cursor.handle not in d.cursor_collection
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT, cursor=cursor.handle)
    assert r.status == st.STATUS_INVALID_PARAMETER


async def test_close_cursor_ends_a_read_waiting_on_the_cursor(env):
    c, d, _ = await env.session()
    cursor = env.qm.open_cursor(d)
    reader = await env.connect()
    pending = await env.blocked(reader, reader.start_receive, d.handle, MQ_ACTION_RECEIVE, timeout=0xFFFFFFFF,
                                cursor=cursor.handle, request_id=4)
    assert await c.call(c.close_cursor, d.handle, cursor.handle) == st.MQ_OK
    r = await pending
    assert r.status == st.MQ_ERROR_OPERATION_CANCELLED
    assert len(env.adm.remote_read_entries) == 0


async def test_close_cursor_ignores_descriptors_not_opened_for_remote_read(env):
    c = await env.connect()
    d = env.open_descriptor(state=RemoteReadState.NONE)
    cursor = env.qm.open_cursor(d)
    assert await c.call(c.close_cursor, d.handle, cursor.handle) == st.MQ_ERROR_INVALID_HANDLE
    assert env.qm.cursor_by_handle(cursor.handle) is cursor
