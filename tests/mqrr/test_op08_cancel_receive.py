"""R_CancelReceive (MS-MQRR 3.1.4.8, opnum 8)."""
from __future__ import annotations

import asyncio

from qm2qm.mqrr.handlers import cancel_receive, open_queue, start_receive
from qm2qm.remote_read.actions import MQ_ACTION_PEEK_CURRENT
from shared_adm import status as st

from .conftest import FakeCall
from .test_op03_close_queue import open_request, receive_request


async def waiting_read(env, **kwargs):
    ctx = FakeCall()
    h = open_queue.open_queue(env.service, ctx, open_request())
    read = asyncio.create_task(start_receive.start_receive(env.service, ctx, receive_request(h, **kwargs)))
    await env.wait_until(lambda: len(env.service.pending) == 1)
    return ctx, h, read


async def test_cancel_receive_answers_the_pending_receive_with_operation_cancelled(env):
    ctx, h, read = await waiting_read(env, timeout=0xFFFFFFFF, request_id=5)
    assert cancel_receive.cancel_receive(env.service, ctx, h, 5) == st.MQ_OK
    assert (await read).status == st.MQ_ERROR_OPERATION_CANCELLED


async def test_cancel_receive_removes_the_pending_request_entry(env):
    ctx, h, read = await waiting_read(env, timeout=0xFFFFFFFF, request_id=5)
    assert len(env.service.table) == 1
    cancel_receive.cancel_receive(env.service, ctx, h, 5)
    await read
    assert len(env.service.table) == 0 and len(env.service.pending) == 0


async def test_cancel_receive_cancels_a_waiting_peek_too(env):
    ctx, h, read = await waiting_read(env, timeout=0xFFFFFFFF, request_id=6, action=MQ_ACTION_PEEK_CURRENT)
    assert cancel_receive.cancel_receive(env.service, ctx, h, 6) == st.MQ_OK
    assert (await read).status == st.MQ_ERROR_OPERATION_CANCELLED


async def test_cancel_receive_when_the_event_finds_no_waiting_read_returns_its_failure(env):
    ctx, h, read = await waiting_read(env, timeout=0xFFFFFFFF, request_id=5)
    assert cancel_receive.cancel_receive(env.service, ctx, h, 99) == st.STATUS_NOT_FOUND
    assert not read.done()
    cancel_receive.cancel_receive(env.service, ctx, h, 5)
    await read


async def test_cancel_receive_over_the_wire_without_a_waiting_read_fails(env):
    c, h = await env.opened()
    assert await env.call(c.cancel, h, 1) == st.STATUS_NOT_FOUND


async def test_cancel_receive_without_the_open_queue_descriptor_fails(env):
    c, h = await env.opened()
    [d] = env.queue.open_queue_descriptor_collection
    env.qm.close_queue(d)
    assert await env.call(c.cancel, h, 1) == st.MQ_ERROR_INVALID_HANDLE
