"""One queue read through both wire forms at once: MS-MQRR RemoteRead and qm2qm (MS-MQQP). Locks, cursors and
rundowns of either path are seen by the other, as both sit on the one QueueManager (MS-MQDMPR 3.1.1.1)."""
from __future__ import annotations

from qm2qm.mqqp.constants import RR_ACK as QM2QM_ACK
from qm2qm.remote_read.actions import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE
from shared_adm import status as st
from shared_adm.enums import PositionState


async def test_a_message_received_through_mqrr_and_one_through_qm2qm_from_the_same_queue(env):
    env.enqueue(b"first")
    env.enqueue(b"second")
    rr, h = await env.opened()
    qp, d = await env.mqqp_session()
    a = await env.call(rr.read, h, request_id=1)
    b = await env.call(qp.start_receive2, d.handle)
    assert (a.status, b.status) == (st.MQ_OK, st.MQ_OK)
    assert b"first" in a.packet and b"second" in b.buffer           # the lock made qm2qm take the next one
    assert await env.call(rr.end, h, 1) == st.MQ_OK
    assert (await env.call(qp.end_receive, b.context, QM2QM_ACK))[0] == st.MQ_OK
    assert env.positions() == {}


async def test_a_message_locked_by_mqrr_is_not_received_by_qm2qm_until_mqrr_nacks_it(env):
    m = env.enqueue(b"only")
    rr, h = await env.opened()
    qp, d = await env.mqqp_session()
    assert (await env.call(rr.read, h, request_id=1)).status == st.MQ_OK
    assert (await env.call(qp.start_receive2, d.handle)).status == st.MQ_ERROR_IO_TIMEOUT
    assert await env.call(rr.end, h, 1, 1) == st.MQ_OK            # RR_NACK
    r = await env.call(qp.start_receive2, d.handle)
    assert r.status == st.MQ_OK and b"only" in r.buffer
    assert env.positions() == {m.lookup_identifier: PositionState.LOCKED}


async def test_a_message_locked_by_qm2qm_is_skipped_by_an_mqrr_peek_and_receive(env):
    env.enqueue(b"locked")
    env.enqueue(b"free")
    rr, h = await env.opened()
    qp, d = await env.mqqp_session()
    assert (await env.call(qp.start_receive2, d.handle)).status == st.MQ_OK
    assert b"free" in (await env.call(rr.read, h, MQ_ACTION_PEEK_CURRENT)).packet
    assert b"free" in (await env.call(rr.read, h, request_id=1)).packet


async def test_mqrr_rundown_releases_its_lock_to_a_qm2qm_receive_waiting_for_it(env):
    env.enqueue(b"handed over")
    rr, h = await env.opened()
    qp, d = await env.mqqp_session()
    assert (await env.call(rr.read, h, request_id=1)).status == st.MQ_OK
    waiting = await env.blocked(qp.start_receive2, d.handle, MQ_ACTION_RECEIVE, timeout=0xFFFFFFFF)
    await env.kill(rr)
    r = await waiting
    assert r.status == st.MQ_OK and b"handed over" in r.buffer


async def test_qm2qm_rundown_releases_its_lock_to_an_mqrr_receive_waiting_for_it(env):
    env.enqueue(b"handed back")
    rr, h = await env.opened()
    qp, d = await env.mqqp_session()
    assert (await env.call(qp.start_receive2, d.handle)).status == st.MQ_OK
    waiting = await env.blocked(rr.read, h, MQ_ACTION_RECEIVE, timeout=0xFFFFFFFF, request_id=1)
    await env.kill(qp)
    r = await waiting
    assert r.status == st.MQ_OK and b"handed back" in r.packet
    assert await env.call(rr.end, h, 1) == st.MQ_OK
    assert env.positions() == {}


async def test_an_mqrr_cursor_on_a_message_qm2qm_received_reports_it_and_moves_on(env):
    env.enqueue(b"one")
    env.enqueue(b"two")
    rr, h = await env.opened()
    qp, d = await env.mqqp_session()
    _, cursor = await env.call(rr.create_cursor, h)
    assert b"one" in (await env.call(rr.read, h, MQ_ACTION_PEEK_CURRENT, cursor=cursor)).packet
    r = await env.call(qp.start_receive2, d.handle)
    assert (await env.call(qp.end_receive, r.context, QM2QM_ACK))[0] == st.MQ_OK
    gone = await env.call(rr.read, h, MQ_ACTION_RECEIVE, cursor=cursor, request_id=1)
    assert gone.status == st.MQ_ERROR_MESSAGE_ALREADY_RECEIVED
    assert b"two" in (await env.call(rr.read, h, MQ_ACTION_PEEK_NEXT, cursor=cursor)).packet


async def test_mqrr_purge_takes_the_messages_qm2qm_would_read(env):
    env.enqueue(b"a")
    rr, h = await env.opened()
    qp, d = await env.mqqp_session()
    assert await env.call(rr.purge, h) == st.MQ_OK
    assert (await env.call(qp.start_receive2, d.handle)).status == st.MQ_ERROR_IO_TIMEOUT
