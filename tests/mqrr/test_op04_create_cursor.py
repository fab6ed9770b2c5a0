"""R_CreateCursor (MS-MQRR 3.1.4.4, opnum 4)."""
from __future__ import annotations

from qm2qm.remote_read.actions import MQ_ACTION_PEEK_CURRENT
from shared_adm import status as st


async def test_create_cursor_generates_open_cursor_and_returns_its_handle(env):
    env.enqueue(b"m")
    c, h = await env.opened()
    status, cursor = await env.call(c.create_cursor, h)
    [d] = env.queue.open_queue_descriptor_collection
    assert status == st.MQ_OK and cursor != 0
    assert d.cursor_collection[cursor].handle == cursor
    assert b"m" in (await env.call(c.read, h, MQ_ACTION_PEEK_CURRENT, cursor=cursor)).packet


async def test_create_cursor_without_the_open_queue_descriptor_fails(env):
    c, h = await env.opened()
    [d] = env.queue.open_queue_descriptor_collection
    assert env.qm.close_queue(d) == st.MQ_OK            # closed under the handle (e.g. by the admin API)
    assert await env.call(c.create_cursor, h) == (st.MQ_ERROR_INVALID_HANDLE, 0)


async def test_create_cursor_when_open_cursor_fails_returns_a_failure(env):
    c, h = await env.opened()
    assert env.qm.delete_queue(env.queue) == st.MQ_OK
    assert await env.call(c.create_cursor, h) == (st.MQ_ERROR_INVALID_HANDLE, 0)
