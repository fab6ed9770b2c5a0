"""MS-MQRR past what a caller may keep open (qm2qm/rpc/handles.py MAX_CONTEXT_HANDLES, the queue manager's
max_open_queues and max_cursors): MQ_ERROR_INSUFFICIENT_RESOURCES, thrown as MS-MQRR throws its failures, with
nothing left open by the refused call."""
from __future__ import annotations

from qm2qm.mqrr.constants import RECEIVE_ACCESS
from shared_adm import status as st

from .conftest import FORMAT_NAME


async def test_open_queue_past_the_association_s_handles_throws_insufficient_resources_and_closes_the_open(env):
    env.server.groups.max_context_handles = 1
    client, handle = await env.opened()
    assert await env.fault(client.open, FORMAT_NAME, RECEIVE_ACCESS) == st.MQ_ERROR_INSUFFICIENT_RESOURCES
    assert await env.fault(client.open, FORMAT_NAME, RECEIVE_ACCESS, for_move=True) \
        == st.MQ_ERROR_INSUFFICIENT_RESOURCES
    assert len(env.queue.open_queue_descriptor_collection) == 1
    assert env.service.move_contexts == {}


async def test_open_queue_past_the_queue_manager_s_open_queues_throws_insufficient_resources(env):
    env.qm.max_open_queues = 1
    client, _ = await env.opened()
    assert await env.fault(client.open, FORMAT_NAME, RECEIVE_ACCESS) == st.MQ_ERROR_INSUFFICIENT_RESOURCES


async def test_create_cursor_past_the_queue_manager_s_cursors_answers_insufficient_resources(env):
    env.qm.max_cursors = 1
    client, handle = await env.opened()
    assert (await env.call(client.create_cursor, handle))[0] == st.MQ_OK
    status, cursor = await env.call(client.create_cursor, handle)
    assert (status, cursor) == (st.MQ_ERROR_INSUFFICIENT_RESOURCES, 0)
