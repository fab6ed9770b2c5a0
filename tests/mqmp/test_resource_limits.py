"""What a caller may keep open: the association group's context handles (qm2qm/rpc/handles.py MAX_CONTEXT_HANDLES)
and the queue manager's descriptors and cursors (shared_adm/queue_manager.py). Past each, qmcomm and qm2qm answer
MQ_ERROR_INSUFFICIENT_RESOURCES, undo what the call had opened, and take the next call once something is closed."""
from __future__ import annotations

from qm2qm.mqmp.constants import MQ_PEEK_ACCESS
from qm2qm.mqqp.constants import RR_ACK
from shared_adm import status as st
from tests.mqmp.conftest import FORMAT_NAME


def _at_most(env, handles: int) -> None:
    env.qmcomm_server.groups.max_context_handles = handles
    env.qm2qm_server.groups.max_context_handles = handles


async def test_qmcomm_open_past_the_association_s_handles_answers_insufficient_resources_and_closes_the_open(env):
    _at_most(env, 2)
    client = await env.qmcomm_client()
    opened = [await env.run(client.open_remote_queue, FORMAT_NAME) for _ in range(2)]
    assert [o.status for o in opened] == [st.MQ_OK, st.MQ_OK]
    refused = await env.run(client.open_remote_queue, FORMAT_NAME)
    assert refused.status == st.MQ_ERROR_INSUFFICIENT_RESOURCES
    assert refused.context == bytes(20) and refused.h_queue == 0
    assert len(env.descriptors()) == 2 and len(env.qmcomm.open_contexts) == 2
    await env.run(client.close_remote_queue_context, opened[0].context)
    again = await env.run(client.open_remote_queue, FORMAT_NAME)
    assert again.status == st.MQ_OK and len(env.descriptors()) == 2


async def test_a_second_association_is_not_held_back_by_the_first_s_handles(env):
    _at_most(env, 1)
    first, second = await env.qmcomm_client(), await env.qmcomm_client()
    assert (await env.run(first.open_remote_queue, FORMAT_NAME)).status == st.MQ_OK
    assert (await env.run(first.open_remote_queue, FORMAT_NAME)).status == st.MQ_ERROR_INSUFFICIENT_RESOURCES
    assert (await env.run(second.open_remote_queue, FORMAT_NAME)).status == st.MQ_OK


async def test_qmcomm_open_past_the_queue_manager_s_open_queues_answers_insufficient_resources(env):
    env.qm.max_open_queues = 1
    client = await env.qmcomm_client()
    assert (await env.run(client.open_remote_queue, FORMAT_NAME)).status == st.MQ_OK
    refused = await env.run(client.open_remote_queue, FORMAT_NAME, access=MQ_PEEK_ACCESS)
    assert refused.status == st.MQ_ERROR_INSUFFICIENT_RESOURCES and len(env.descriptors()) == 1


async def test_qmcomm_cursor_past_the_queue_manager_s_cursors_answers_insufficient_resources(env):
    env.qm.max_cursors = 2
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME)
    made = [await env.run(client.create_remote_cursor, opened.h_queue) for _ in range(3)]
    assert [status for status, _ in made] == [st.MQ_OK, st.MQ_OK, st.MQ_ERROR_INSUFFICIENT_RESOURCES]
    assert made[2][1] == 0 and len(env.descriptors()[0].cursor_collection) == 2


async def test_qm2qm_open_queue_past_the_association_s_handles_answers_insufficient_resources(env):
    _at_most(env, 1)
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME)
    qm2qm = await env.qm2qm_client()
    status, session = await env.run(qm2qm.open_queue, opened.h_queue)
    assert status == st.MQ_OK
    status, refused = await env.run(qm2qm.open_queue, opened.h_queue)
    assert (status, refused) == (st.MQ_ERROR_INSUFFICIENT_RESOURCES, bytes(20))
    assert len(env.qm2qm.adm.open_queue_entries) == 1


async def test_qm2qm_receive_past_the_association_s_handles_leaves_the_message_in_the_queue(env):
    _at_most(env, 2)
    env.enqueue(b"first")
    env.enqueue(b"second")
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME)
    qm2qm = await env.qm2qm_client()
    status, _ = await env.run(qm2qm.open_queue, opened.h_queue)
    first = await env.run(qm2qm.start_receive2, opened.h_queue)         # the group's second handle
    assert first.status == st.MQ_OK
    refused = await env.run(qm2qm.start_receive2, opened.h_queue)
    assert refused.status == st.MQ_ERROR_INSUFFICIENT_RESOURCES and refused.context == bytes(20)
    positions = list(env.queue.message_position_list)
    assert len(positions) == 2 and positions[1].state.value == "Available"
    assert (await env.run(qm2qm.end_receive, first.context, RR_ACK))[0] == st.MQ_OK
    second = await env.run(qm2qm.start_receive2, opened.h_queue)
    assert second.status == st.MQ_OK and b"second" in second.buffer
