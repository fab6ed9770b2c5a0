"""Rundown of every handle of the remote-read sequence when the client vanishes between any two steps
(MS-MQMP 3.1.7.2 PCTX_OPENREMOTE_HANDLE_TYPE; MS-MQQP 3.1.6.1 / 3.1.6.2 for the qm2qm handles): the descriptor is
closed exactly when nobody holds it any more, cursors go with it, and a message being read is not lost."""
import pytest

from shared_adm import status as st
from shared_adm.enums import PositionState
from tests.mqmp.conftest import FORMAT_NAME

STEPS = ["open", "cursor", "qm2qm_open", "close_context", "receive"]


async def _run_steps(env, qmcomm, qm2qm, count: int) -> dict:
    state = {}
    opened = await env.run(qmcomm.open_remote_queue, FORMAT_NAME)
    assert opened.status == st.MQ_OK
    state["handle"] = opened.h_queue
    if count > 1:
        status, state["cursor"] = await env.run(qmcomm.create_remote_cursor, opened.h_queue)
        assert status == st.MQ_OK
    if count > 2:
        status, state["session"] = await env.run(qm2qm.open_queue, opened.h_queue)
        assert status == st.MQ_OK
    if count > 3:
        await env.run(qmcomm.close_remote_queue_context, opened.context)
    if count > 4:
        read = await env.run(qm2qm.start_receive2, opened.h_queue)
        assert read.status == st.MQ_OK
        assert set(p.state for p in env.queue.message_position_list) == {PositionState.LOCKED}
    return state


def _assert_all_released(env, state):
    assert env.qm.descriptor_by_handle(state["handle"]) is None
    assert env.descriptors() == [] and env.qmcomm.open_contexts == set()
    if "cursor" in state:
        assert env.qm.cursor_by_handle(state["cursor"]) is None
    assert [p.state for p in env.queue.message_position_list] == [PositionState.AVAILABLE]


@pytest.mark.parametrize("done", range(1, len(STEPS) + 1), ids=STEPS)
@pytest.mark.parametrize("first", ["qmcomm", "qm2qm"])
async def test_client_vanishing_after_each_step_releases_everything(env, done, first):
    env.enqueue(b"kept")
    qmcomm, qm2qm = await env.qmcomm_client(), await env.qm2qm_client()
    state = await _run_steps(env, qmcomm, qm2qm, done)
    order = [(env.qmcomm_server, qmcomm), (env.qm2qm_server, qm2qm)]
    if first == "qm2qm":
        order.reverse()
    (server_a, client_a), (server_b, client_b) = order
    await env.kill(server_a, client_a)
    # one side gone: the descriptor survives only while the other side still holds it
    descriptor = env.qm.descriptor_by_handle(state["handle"])
    # before RemoteQMOpenQueue (step 3) only the qmcomm context holds it (Opened); after, only the qm2qm session
    survivor_holds = (first == "qm2qm" and done < 3) or (first == "qmcomm" and done >= 3)
    assert (descriptor is not None) == survivor_holds
    await env.kill(server_b, client_b)
    _assert_all_released(env, state)


async def test_qmcomm_rundown_before_the_hand_over_closes_the_opened_descriptor(env):
    qmcomm = await env.qmcomm_client()
    opened = await env.run(qmcomm.open_remote_queue, FORMAT_NAME)
    await env.kill(env.qmcomm_server, qmcomm)
    assert env.qm.descriptor_by_handle(opened.h_queue) is None and env.qmcomm.open_contexts == set()


async def test_qmcomm_rundown_after_the_hand_over_leaves_the_session_reading(env):
    env.enqueue(b"still-here")
    qmcomm, qm2qm = await env.qmcomm_client(), await env.qm2qm_client()
    opened = await env.run(qmcomm.open_remote_queue, FORMAT_NAME)
    status, session = await env.run(qm2qm.open_queue, opened.h_queue)
    assert status == st.MQ_OK
    await env.kill(env.qmcomm_server, qmcomm)
    read = await env.run(qm2qm.start_receive2, opened.h_queue)
    assert read.status == st.MQ_OK and b"still-here" in read.buffer


async def test_two_clients_in_different_association_groups_are_independent(env):
    env.enqueue(b"m1")
    a, b = await env.qmcomm_client(), await env.qmcomm_client()
    ga = {rc.group.id for rc in env.qmcomm_server.connections.values()}
    assert len(ga) == 2
    opened_a = await env.run(a.open_remote_queue, FORMAT_NAME)
    opened_b = await env.run(b.open_remote_queue, FORMAT_NAME)
    assert opened_a.h_queue != opened_b.h_queue and opened_a.context != opened_b.context
    # b cannot close a's context: handles live in their association group
    from qm2qm.mqmp import idl
    from qm2qm.rpc.faults import NCA_S_FAULT_CONTEXT_MISMATCH
    from tests.mqmp.conftest import stub_fault
    req = idl.R_QMCloseRemoteQueueContext()
    req["pphContext"] = opened_a.context
    assert await env.run(stub_fault, b.dce, 3, req) == NCA_S_FAULT_CONTEXT_MISMATCH
    await env.kill(env.qmcomm_server, a)
    assert env.qm.descriptor_by_handle(opened_a.h_queue) is None
    assert env.qm.descriptor_by_handle(opened_b.h_queue) is not None
