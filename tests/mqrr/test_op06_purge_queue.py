"""R_PurgeQueue (MS-MQRR 3.1.4.6, opnum 6)."""
from __future__ import annotations

from qm2qm.mqrr.constants import PEEK_ACCESS, STATUS_ACCESS_DENIED
from shared_adm import status as st


async def test_purge_queue_with_receive_access_purges_and_returns_mq_ok(env):
    env.enqueue(b"a")
    env.enqueue(b"b")
    c, h = await env.opened()
    assert await env.call(c.purge, h) == st.MQ_OK
    assert env.positions() == {}


async def test_purge_queue_without_receive_access_returns_status_access_denied(env):
    env.enqueue(b"a")
    c, h = await env.opened(PEEK_ACCESS)
    assert await env.call(c.purge, h) == STATUS_ACCESS_DENIED
    assert env.bodies() == [b"a"]


async def test_purge_queue_without_the_open_queue_descriptor_fails_and_purges_nothing(env):
    env.enqueue(b"a")
    c, h = await env.opened()
    [d] = env.queue.open_queue_descriptor_collection
    env.qm.close_queue(d)
    assert await env.call(c.purge, h) == st.MQ_ERROR_INVALID_HANDLE
    assert env.bodies() == [b"a"]
