"""Queue Context Handles Rundown Routine (MS-MQRR 3.1.6.2) for each handle R_OpenQueue and R_OpenQueueForMove
return; and the RPC Failure Event (3.1.6.1): Close Cursor for the descriptor's cursors, Close Queue."""
from __future__ import annotations

from qm2qm.mqrr.constants import MQ_MOVE_ACCESS
from qm2qm.remote_read.actions import MQ_ACTION_RECEIVE
from shared_adm import status as st
from shared_adm.enums import PositionState

from .conftest import FORMAT_NAME


async def test_rundown_of_an_open_queue_handle_closes_its_descriptor(env):
    c, h = await env.opened()
    await env.kill(c)
    assert list(env.queue.open_queue_descriptor_collection) == []


async def test_rundown_returns_the_message_of_each_pending_request_entry_and_removes_the_entries(env):
    m1, m2 = env.enqueue(b"1"), env.enqueue(b"2")
    c, h = await env.opened()
    assert (await env.call(c.read, h, request_id=1)).status == st.MQ_OK
    assert (await env.call(c.read, h, request_id=2)).status == st.MQ_OK
    assert set(env.positions().values()) == {PositionState.LOCKED}
    await env.kill(c)
    assert env.positions() == {m1.lookup_identifier: PositionState.AVAILABLE,
                               m2.lookup_identifier: PositionState.AVAILABLE}
    assert len(env.service.table) == 0 and len(env.service.locked) == 0


async def test_rundown_cancels_a_waiting_receive_and_closes_the_cursors(env):
    c, h = await env.opened()
    _, cursor = await env.call(c.create_cursor, h)
    pending = await env.blocked(c.read, h, MQ_ACTION_RECEIVE, timeout=0xFFFFFFFF, request_id=1)
    await env.kill(c, pending)
    assert env.qm.cursor_by_handle(cursor) is None
    assert len(env.service.pending) == 0
    m = env.enqueue(b"after")                                   # nobody takes it any more
    assert env.positions() == {m.lookup_identifier: PositionState.AVAILABLE}


async def test_rundown_of_an_open_queue_for_move_handle_closes_it_and_forgets_its_move_context(env):
    c = await env.connect()
    move_context, h = await env.call(c.open, FORMAT_NAME, MQ_MOVE_ACCESS, for_move=True)
    assert move_context in env.service.move_contexts
    await env.kill(c)
    assert list(env.queue.open_queue_descriptor_collection) == []
    assert env.service.move_contexts == {}


async def test_rundown_after_close_queue_does_nothing_more(env):
    env.enqueue()
    c, h = await env.opened()
    assert (await env.call(c.read, h, request_id=1)).status == st.MQ_OK
    assert await env.call(c.end, h, 1) == st.MQ_OK
    await env.call(c.close, h)
    await env.kill(c)
    assert env.positions() == {} and len(env.service.locked) == 0
