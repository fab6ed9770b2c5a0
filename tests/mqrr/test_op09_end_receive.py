"""R_EndReceive (MS-MQRR 3.1.4.9, opnum 9)."""
from __future__ import annotations

import pytest

from qm2qm.mqrr import idl
from qm2qm.mqrr.constants import RPC_S_INVALID_BOUND, RR_ACK, RR_NACK
from qm2qm.mqrr.handlers import end_receive
from shared_adm import status as st
from shared_adm.enums import PositionState
from shared_adm.message import DeliveryGuarantee

from .test_op08_cancel_receive import waiting_read


async def received(env, body=b"m", request_id=1):
    m = env.enqueue(body)
    c, h = await env.opened()
    assert (await env.call(c.read, h, request_id=request_id)).status == st.MQ_OK
    return c, h, m


async def test_end_receive_without_any_pending_request_entry_returns_invalid_handle(env):
    c, h = await env.opened()
    assert await env.call(c.end, h, 1) == st.MQ_ERROR_INVALID_HANDLE


async def test_end_receive_with_an_unknown_request_id_returns_invalid_parameter(env):
    c, h, m = await received(env, request_id=1)
    assert await env.call(c.end, h, 2) == st.MQ_ERROR_INVALID_PARAMETER
    assert env.positions() == {m.lookup_identifier: PositionState.LOCKED}


async def test_end_receive_removes_the_entry_and_cancels_its_cleanup_timer(env):
    c, h, m = await received(env)
    assert await env.call(c.end, h, 1, RR_NACK) == st.MQ_OK
    assert len(env.service.table) == 0
    assert await env.call(c.end, h, 1) == st.MQ_ERROR_INVALID_HANDLE
    env.scheduler.advance(env.service.cleanup_ms)              # the timer no longer fires
    assert env.positions() == {m.lookup_identifier: PositionState.AVAILABLE}


async def test_end_receive_ack_is_dequeue_message_end_deleting_the_message(env):
    c, h, m = await received(env)
    assert await env.call(c.end, h, 1, RR_ACK) == st.MQ_OK
    assert env.positions() == {}


async def test_end_receive_nack_is_dequeue_message_end_keeping_the_message_available(env):
    c, h, m = await received(env)
    assert await env.call(c.end, h, 1, RR_NACK) == st.MQ_OK
    assert env.positions() == {m.lookup_identifier: PositionState.AVAILABLE}


async def test_end_receive_without_the_open_queue_descriptor_fails(env):
    c, h, m = await received(env)
    [d] = env.queue.open_queue_descriptor_collection
    env.qm.close_queue(d)                                      # Close Queue returns the Locked message
    assert await env.call(c.end, h, 1) == st.MQ_ERROR_INVALID_HANDLE
    assert env.positions() == {m.lookup_identifier: PositionState.AVAILABLE}


async def test_end_receive_before_the_receive_has_a_message_returns_message_not_found(env):
    ctx, h, read = await waiting_read(env, timeout=0xFFFFFFFF, request_id=5)
    assert end_receive.end(env.service, ctx, h, RR_ACK, 5) == (st.MQ_ERROR_MESSAGE_NOT_FOUND, False)
    env.enqueue(b"late", delivery_guarantee=DeliveryGuarantee.RECOVERABLE)
    assert (await read).status == st.MQ_OK
    assert end_receive.end(env.service, ctx, h, RR_ACK, 5) == (st.MQ_OK, True)     # the answer awaits the commit
    await env.service.qm.durable()
    assert env.positions() == {}


async def test_end_receive_ack_of_an_express_message_does_not_wait_for_a_commit(env):
    # nothing of an express message is stored, so its ACK's answer waits for no commit (docs/mqqp-choices.md)
    ctx, h, read = await waiting_read(env, timeout=0xFFFFFFFF, request_id=6)
    env.enqueue(b"express")
    assert (await read).status == st.MQ_OK
    assert end_receive.end(env.service, ctx, h, RR_ACK, 6) == (st.MQ_OK, False)
    assert env.positions() == {}


@pytest.mark.parametrize("ack", [0, 3, 0xFFFFFFFF])
async def test_end_receive_dwack_outside_its_range_is_a_fault(env, ack):
    c, h, m = await received(env)
    request = idl.R_EndReceive()
    request["phContext"], request["dwAck"], request["dwRequestId"] = h, ack, 1
    assert await env.fault(c.call, request) == RPC_S_INVALID_BOUND
    assert env.positions() == {m.lookup_identifier: PositionState.LOCKED}
