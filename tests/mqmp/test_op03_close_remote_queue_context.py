"""R_QMCloseRemoteQueueContext (MS-MQMP 3.1.4.3), one test per processing rule, and the hand-over to qm2qm."""
from qm2qm.mqmp import idl
from qm2qm.rpc.faults import NCA_S_FAULT_CONTEXT_MISMATCH
from shared_adm import status as st
from shared_adm.enums import RemoteReadState
from tests.mqmp.conftest import FORMAT_NAME, stub_fault

NULL = bytes(20)


async def test_null_handle_locates_nothing_and_returns_at_once(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME)
    assert await env.run(client.close_remote_queue_context, NULL) == NULL
    assert env.qm.descriptor_by_handle(opened.h_queue) is not None and len(env.qmcomm.open_contexts) == 1


async def test_unknown_handle_is_refused_by_the_runtime(env):
    client = await env.qmcomm_client()
    req = idl.R_QMCloseRemoteQueueContext()
    req["pphContext"] = b"\x00" * 4 + b"\x42" * 16
    assert await env.run(stub_fault, client.dce, 3, req) == NCA_S_FAULT_CONTEXT_MISMATCH


async def test_opened_descriptor_is_closed(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME)
    cursor_status, cursor = await env.run(client.create_remote_cursor, opened.h_queue)
    assert cursor_status == st.MQ_OK
    await env.run(client.close_remote_queue_context, opened.context)
    assert env.qm.descriptor_by_handle(opened.h_queue) is None
    assert env.qm.cursor_by_handle(cursor) is None and env.descriptors() == []


async def test_ready_for_read_descriptor_is_left_to_the_qm2qm_session(env):
    """The hand-over: R_QMOpenRemoteQueue, qm2qm RemoteQMOpenQueue, R_QMCloseRemoteQueueContext, reads, close."""
    env.enqueue(b"one")
    env.enqueue(b"two")
    qmcomm = await env.qmcomm_client()
    qm2qm = await env.qm2qm_client()
    opened = await env.run(qmcomm.open_remote_queue, FORMAT_NAME)
    status, session = await env.run(qm2qm.open_queue, opened.h_queue, opened.dwp_queue, opened.pdw_context)
    assert status == st.MQ_OK
    descriptor = env.qm.descriptor_by_handle(opened.h_queue)
    assert descriptor.remote_read_state is RemoteReadState.READY_FOR_READ
    assert await env.run(qmcomm.close_remote_queue_context, opened.context) == NULL
    assert env.qm.descriptor_by_handle(opened.h_queue) is descriptor
    read = await env.run(qm2qm.start_receive2, opened.h_queue)
    assert read.status == st.MQ_OK and read.buffer
    assert (await env.run(qm2qm.end_receive, read.context, 2))[0] == st.MQ_OK
    assert (await env.run(qm2qm.close_queue, session))[0] == st.MQ_OK
    assert env.qm.descriptor_by_handle(opened.h_queue) is None
    assert [p.message.body for p in env.queue.message_position_list] == [b"two"]


async def test_entry_is_deleted_and_the_handle_returned_null(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME)
    assert await env.run(client.close_remote_queue_context, opened.context) == NULL
    assert env.qmcomm.open_contexts == set()
    req = idl.R_QMCloseRemoteQueueContext()
    req["pphContext"] = opened.context
    assert await env.run(stub_fault, client.dce, 3, req) == NCA_S_FAULT_CONTEXT_MISMATCH
