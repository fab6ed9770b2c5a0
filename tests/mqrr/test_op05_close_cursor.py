"""R_CloseCursor (MS-MQRR 3.1.4.5, opnum 5)."""
from __future__ import annotations

from qm2qm.remote_read.actions import MQ_ACTION_RECEIVE
from shared_adm import status as st


async def test_close_cursor_generates_close_cursor_and_returns_mq_ok(env):
    c, h = await env.opened()
    _, cursor = await env.call(c.create_cursor, h)
    assert await env.call(c.close_cursor, h, cursor) == st.MQ_OK
    [d] = env.queue.open_queue_descriptor_collection
    assert cursor not in d.cursor_collection and env.qm.cursor_by_handle(cursor) is None


async def test_close_cursor_unknown_cursor_fails(env):
    c, h = await env.opened()
    assert await env.call(c.close_cursor, h, 0x4242) == st.MQ_ERROR_INVALID_HANDLE


async def test_close_cursor_of_another_queue_context_fails(env):
    c, h = await env.opened()
    h2 = await env.call(c.open, "DIRECT=OS:qm2qm\\private$\\orders", 0x20)
    _, cursor = await env.call(c.create_cursor, h2)
    assert await env.call(c.close_cursor, h, cursor) == st.MQ_ERROR_INVALID_HANDLE
    assert await env.call(c.close_cursor, h2, cursor) == st.MQ_OK


async def test_close_cursor_twice_fails_the_second_time(env):
    c, h = await env.opened()
    _, cursor = await env.call(c.create_cursor, h)
    await env.call(c.close_cursor, h, cursor)
    assert await env.call(c.close_cursor, h, cursor) == st.MQ_ERROR_INVALID_HANDLE


async def test_close_cursor_ends_a_read_waiting_on_it_with_operation_cancelled(env):
    c, h = await env.opened()
    _, cursor = await env.call(c.create_cursor, h)
    other = await env.connect()
    h2 = await env.call(other.open, "DIRECT=OS:qm2qm\\private$\\orders")
    _, cursor2 = await env.call(other.create_cursor, h2)
    pending = await env.blocked(other.read, h2, MQ_ACTION_RECEIVE, cursor=cursor2, timeout=0xFFFFFFFF)
    # the cursor belongs to the other connection's descriptor: close it through the shared_adm event
    env.qm.close_cursor(env.qm.cursor_by_handle(cursor2))
    assert (await pending).status == st.MQ_ERROR_OPERATION_CANCELLED
    assert await env.call(c.close_cursor, h, cursor) == st.MQ_OK
