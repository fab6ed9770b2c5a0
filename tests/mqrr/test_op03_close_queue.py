"""R_CloseQueue (MS-MQRR 3.1.4.3, opnum 3)."""
from __future__ import annotations

import asyncio

from qm2qm.mqrr import idl
from qm2qm.mqrr.handlers import close_queue, open_queue, start_receive
from qm2qm.mqrr.queue_format import queue_format
from qm2qm.remote_read.actions import MQ_ACTION_RECEIVE
from shared_adm import status as st
from shared_adm.enums import PositionState

from .conftest import FORMAT_NAME, FakeCall

NCA_S_FAULT_CONTEXT_MISMATCH = 0x1C00001A


async def test_close_queue_generates_close_queue_and_returns_mq_ok_with_a_null_handle(env):
    c, h = await env.opened()
    assert await env.call(c.close, h) == (st.MQ_OK, bytes(20))
    assert list(env.queue.open_queue_descriptor_collection) == []


async def test_close_queue_of_a_closed_handle_fails(env):
    # 2.2.4: the handle is strict; once closed the runtime no longer knows it (MS-RPCE 3.3.1.4.1)
    c, h = await env.opened()
    await env.call(c.close, h)
    assert await env.fault(c.close, h) == NCA_S_FAULT_CONTEXT_MISMATCH


async def test_close_queue_of_a_descriptor_closed_under_it_releases_the_context(env):
    # DELETE /v1/handles closed the descriptor: the context handle still goes, as qm2qm's and qmcomm's do
    c, h = await env.opened()
    (descriptor,) = env.queue.open_queue_descriptor_collection
    env.qm.close_queue(descriptor)
    assert await env.call(c.close, h) == (st.MQ_OK, bytes(20))
    assert await env.fault(c.close, h) == NCA_S_FAULT_CONTEXT_MISMATCH         # the runtime no longer knows it


async def test_close_queue_removes_the_pending_request_entries_and_returns_their_messages(env):
    m = env.enqueue()
    c, h = await env.opened()
    assert (await env.call(c.read, h, request_id=1)).status == st.MQ_OK
    assert await env.call(c.close, h) == (st.MQ_OK, bytes(20))
    assert len(env.service.table) == 0 and len(env.service.locked) == 0
    assert env.positions() == {m.lookup_identifier: PositionState.AVAILABLE}


async def test_close_queue_answers_a_waiting_receive_with_operation_cancelled(env):
    # handler level: the impacket connection that would close the queue is blocked in the read
    ctx = FakeCall()
    h = open_queue.open_queue(env.service, ctx, open_request())
    read = asyncio.create_task(start_receive.start_receive(env.service, ctx, receive_request(h, timeout=0xFFFFFFFF)))
    await env.wait_until(lambda: len(env.service.pending) == 1)
    assert close_queue.close_queue(env.service, ctx, h) == (st.MQ_OK, bytes(20))
    assert (await read).status == st.MQ_ERROR_OPERATION_CANCELLED
    assert len(env.service.pending) == 0 and list(env.queue.open_queue_descriptor_collection) == []


def open_request():
    r = idl.R_OpenQueue()
    r["pQueueFormat"] = queue_format(FORMAT_NAME)
    r["dwAccess"], r["dwShareMode"], r["pClientId"] = 1, 0, bytes(16)
    return r


def receive_request(h: bytes, *, timeout: int = 0, request_id: int = 1, action: int = MQ_ACTION_RECEIVE):
    r = idl.R_StartReceive()
    r["phContext"], r["ulAction"], r["ulTimeout"], r["dwRequestId"] = h, action, timeout, request_id
    r["dwMaxBodySize"] = r["dwMaxCompoundMessageSize"] = 0xFFFFFFFF
    return r
