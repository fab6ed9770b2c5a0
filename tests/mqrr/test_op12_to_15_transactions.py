"""R_QMEnlistRemoteTransaction (12), R_StartTransactionalReceive (13), R_SetUserAcknowledgementClass (14) and
R_EndTransactionalReceive (15) (MS-MQRR 3.1.4.12–3.1.4.15) on shared_adm's Transaction events.

This server has no MS-DTCO transaction manager: enlisting fails (MQ_ERROR_DTC_CONNECT, enlist_remote_transaction.py).
The outcome a DTC would deliver is raised here as the MS-MQDMPR events themselves (qm.transaction_commit /
transaction_abort, 3.1.4.4–3.1.4.5), which is what the server would do on the DTC's notification."""
from __future__ import annotations

import os
import struct

import pytest

from qm2qm.mqrr import idl
from qm2qm.mqrr.codec import RPC_X_BAD_STUB_DATA, signed
from qm2qm.mqrr.constants import MQMSG_CLASS_NACK_RECEIVE_REJECTED, RPC_S_INVALID_BOUND, RR_ACK, RR_NACK
from qm2qm.remote_read.actions import (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE, MQ_LOOKUP_PEEK_CURRENT,
                                       MQ_LOOKUP_RECEIVE_CURRENT)
from shared_adm import status as st
from shared_adm.enums import MessageClass, PositionState

XQUEUE = "DIRECT=OS:qm2qm\\private$\\xorders"


async def xqueue(env):
    status, queue = env.qm.create_queue(".\\private$\\xorders", transactional=True)
    assert status == st.MQ_OK
    c, h = await env.opened(format_name=XQUEUE)
    return c, h, queue


# -- 12 --
async def test_enlist_remote_transaction_without_a_dtc_fails_with_dtc_connect_and_creates_nothing(env):
    c = await env.connect()
    assert await env.call(c.enlist, os.urandom(16), b"\x01" * 32, XQUEUE) == st.MQ_ERROR_DTC_CONNECT
    assert env.qm.transaction_collection == {}


@pytest.mark.parametrize("uow, token", [(bytes(16), b"\x01"), (b"\x02" * 16, b"")])
async def test_enlist_remote_transaction_null_transaction_or_token_returns_invalid_parameter(env, uow, token):
    c = await env.connect()
    assert await env.call(c.enlist, uow, token, XQUEUE) == st.MQ_ERROR_INVALID_PARAMETER


async def test_enlist_remote_transaction_token_size_outside_its_range_is_a_fault(env):
    c = await env.connect()
    request = idl.R_QMEnlistRemoteTransaction()
    request["pTransactionId"]["rgb"] = os.urandom(16)
    request["cbPropagationToken"], request["pbPropagationToken"] = 131073, [b"\x01"]
    request["pQueueFormat"]["m_qft"] = request["pQueueFormat"]["u"]["tag"] = 1
    request["pQueueFormat"]["u"]["m_gPublicID"] = bytes(16)
    assert await env.fault(c.call, request) == RPC_S_INVALID_BOUND


def _enlist_stub(ndr64: bool, token_size: int, conformance: int) -> bytes:
    """An R_QMEnlistRemoteTransaction stub whose cbPropagationToken and whose array (``conformance`` bytes) are
    both as given, marshalled by impacket apart from them."""
    request = idl.R_QMEnlistRemoteTransaction(isNDR64=ndr64)
    request["pTransactionId"]["rgb"] = b"\x02" * 16
    request["cbPropagationToken"], request["pbPropagationToken"] = 4, list(b"soak")
    request["pQueueFormat"]["m_qft"] = request["pQueueFormat"]["u"]["tag"] = 1
    request["pQueueFormat"]["u"]["m_gPublicID"] = bytes(16)
    stub = request.getData()
    count = struct.Struct("<I4xQ" if ndr64 else "<II")
    at = 16 + count.size
    assert count.unpack_from(stub, 16) == (4, 4) and stub[at:at + 4] == b"soak"
    align = 7 if ndr64 else 3       # the QUEUE_FORMAT after the token is 4-aligned (8 in NDR64)
    rest = stub[at + 4 + (-(at + 4) & align):]
    body = b"t" * conformance + bytes(-conformance & align)
    return stub[:16] + count.pack(token_size, conformance) + body + rest


async def test_enlist_remote_transaction_token_size_out_of_range_is_refused_before_the_array_is_read(env):
    stub = _enlist_stub(env.ndr64, 200_000, 200_000)
    assert await env.stub_fault(12, stub) == RPC_S_INVALID_BOUND


async def test_enlist_remote_transaction_token_conformance_other_than_its_size_is_bad_stub_data(env):
    # size_is(cbPropagationToken): an array of 100,000 bytes behind a size of 4 is not that request; impacket alone
    # would read all of it and answer MQ_ERROR_DTC_CONNECT
    assert await env.stub_fault(12, _enlist_stub(env.ndr64, 4, 100_000)) == RPC_X_BAD_STUB_DATA
    assert await env.stub_fault(12, _enlist_stub(env.ndr64, 8, 4)) == RPC_X_BAD_STUB_DATA


async def test_enlist_remote_transaction_token_of_the_largest_size_is_answered(env):
    c = await env.connect()
    stub = _enlist_stub(env.ndr64, 131072, 131072)
    assert struct.unpack("<i", await env.call(c.call_stub, 12, stub))[0] == signed(st.MQ_ERROR_DTC_CONNECT)


# -- 13 --
async def test_start_transactional_receive_with_a_null_transaction_is_r_start_receive(env):
    m = env.enqueue(b"plain")
    c, h = await env.opened()
    r = await env.call(c.read, h, request_id=1, transaction=bytes(16))
    assert r.status == st.MQ_OK and b"plain" in r.packet
    assert env.positions() == {m.lookup_identifier: PositionState.LOCKED}
    assert await env.call(c.end, h, 1) == st.MQ_OK and env.positions() == {}


async def test_start_transactional_receive_invalid_input_returns_invalid_parameter(env):
    c, h, _ = await xqueue(env)
    r = await env.call(c.read, h, MQ_LOOKUP_RECEIVE_CURRENT, lookup_id=0, transaction=os.urandom(16))
    assert r.status == st.MQ_ERROR_INVALID_PARAMETER


async def test_start_transactional_receive_unknown_cursor_returns_status_invalid_handle(env):
    c, h, _ = await xqueue(env)
    r = await env.call(c.read, h, cursor=0x999, transaction=os.urandom(16))
    assert r.status == st.STATUS_INVALID_HANDLE


async def test_start_transactional_receive_on_a_non_transactional_queue_returns_transaction_usage(env):
    env.enqueue()
    c, h = await env.opened()
    assert (await env.call(c.read, h, transaction=os.urandom(16))).status == st.MQ_ERROR_TRANSACTION_USAGE


@pytest.mark.parametrize("action, lookup", [(MQ_ACTION_PEEK_CURRENT, False), (MQ_LOOKUP_PEEK_CURRENT, True)])
async def test_start_transactional_receive_peek_returns_transaction_usage(env, action, lookup):
    c, h, queue = await xqueue(env)
    m = env.enqueue(queue=queue)
    r = await env.call(c.read, h, action, lookup_id=m.lookup_identifier if lookup else 0,
                       transaction=os.urandom(16))
    assert r.status == st.MQ_ERROR_TRANSACTION_USAGE


async def test_start_transactional_receive_creates_the_transaction_and_receives_inside_it(env):
    c, h, queue = await xqueue(env)
    m = env.enqueue(b"in a transaction", queue=queue)
    uow = os.urandom(16)
    r = await env.call(c.read, h, MQ_ACTION_RECEIVE, request_id=3, transaction=uow)
    assert r.status == st.MQ_OK and b"in a transaction" in r.packet
    [op] = env.qm.transaction_collection[uow].transactional_operation_collection
    assert op.message_position_reference.lookup_identifier == m.lookup_identifier
    assert env.positions(queue) == {m.lookup_identifier: PositionState.LOCKED}
    [d] = queue.open_queue_descriptor_collection
    assert env.service.table.find(d.handle, 3).lookup_identifier == m.lookup_identifier


async def test_start_transactional_receive_uses_an_existing_transaction(env):
    c, h, queue = await xqueue(env)
    env.enqueue(b"a", queue=queue)
    env.enqueue(b"b", queue=queue)
    uow = os.urandom(16)
    transaction = env.qm.create_transaction(uow)
    await env.call(c.read, h, request_id=1, transaction=uow)
    await env.call(c.read, h, request_id=2, transaction=uow)
    assert env.qm.transaction_collection == {uow: transaction}
    assert len(transaction.transactional_operation_collection) == 2


async def test_transactional_receive_commits_to_a_deletion_and_aborts_to_an_available_message(env):
    c, h, queue = await xqueue(env)
    kept, gone = env.enqueue(b"kept", queue=queue), env.enqueue(b"gone", queue=queue)
    abort_uow, commit_uow = os.urandom(16), os.urandom(16)
    assert (await env.call(c.read, h, request_id=1, transaction=abort_uow)).status == st.MQ_OK
    assert (await env.call(c.read, h, request_id=2, transaction=commit_uow)).status == st.MQ_OK
    assert await env.call(c.end, h, 1, RR_ACK, transactional=True) == st.MQ_OK
    assert await env.call(c.end, h, 2, RR_ACK, transactional=True) == st.MQ_OK
    assert env.qm.transaction_abort(abort_uow) == st.MQ_OK
    assert env.qm.transaction_commit(commit_uow) == st.MQ_OK
    assert env.positions(queue) == {kept.lookup_identifier: PositionState.AVAILABLE}
    assert gone.lookup_identifier not in env.positions(queue)


# -- 14 --
async def test_set_user_acknowledgement_class_of_a_missing_message_returns_message_not_found(env):
    c, h, _ = await xqueue(env)
    assert await env.call(c.set_acknowledgement_class, h, 0x77, MQMSG_CLASS_NACK_RECEIVE_REJECTED) == \
        st.MQ_ERROR_MESSAGE_NOT_FOUND


async def test_set_user_acknowledgement_class_outside_a_transaction_returns_transaction_usage(env):
    c, h, queue = await xqueue(env)
    m = env.enqueue(queue=queue)
    assert await env.call(c.set_acknowledgement_class, h, m.lookup_identifier, MQMSG_CLASS_NACK_RECEIVE_REJECTED) \
        == st.MQ_ERROR_TRANSACTION_USAGE


async def test_set_user_acknowledgement_class_rejected_sets_the_dequeue_reason(env):
    c, h, queue = await xqueue(env)
    m = env.enqueue(queue=queue)
    uow = os.urandom(16)
    await env.call(c.read, h, request_id=1, transaction=uow)
    await env.call(c.end, h, 1, RR_ACK, transactional=True)
    assert await env.call(c.set_acknowledgement_class, h, m.lookup_identifier,
                          MQMSG_CLASS_NACK_RECEIVE_REJECTED) == st.MQ_OK
    [op] = env.qm.transaction_collection[uow].transactional_operation_collection
    assert op.dequeue_reason is MessageClass.NACK_RECEIVE_REJECTED


async def test_set_user_acknowledgement_class_zero_changes_nothing(env):
    c, h, queue = await xqueue(env)
    m = env.enqueue(queue=queue)
    uow = os.urandom(16)
    await env.call(c.read, h, request_id=1, transaction=uow)
    assert await env.call(c.set_acknowledgement_class, h, m.lookup_identifier, 0) == st.MQ_OK
    [op] = env.qm.transaction_collection[uow].transactional_operation_collection
    assert op.dequeue_reason is MessageClass.ACK_RECEIVE


# -- 15 --
async def test_end_transactional_receive_without_entries_returns_invalid_handle(env):
    c, h, _ = await xqueue(env)
    assert await env.call(c.end, h, 1, RR_ACK, transactional=True) == st.MQ_ERROR_INVALID_HANDLE


async def test_end_transactional_receive_unknown_request_returns_invalid_parameter(env):
    c, h, queue = await xqueue(env)
    env.enqueue(queue=queue)
    await env.call(c.read, h, request_id=1, transaction=os.urandom(16))
    assert await env.call(c.end, h, 2, RR_ACK, transactional=True) == st.MQ_ERROR_INVALID_PARAMETER


@pytest.mark.parametrize("ack", [RR_ACK, RR_NACK])
async def test_end_transactional_receive_leaves_the_message_to_the_transaction_outcome(env, ack):
    c, h, queue = await xqueue(env)
    m = env.enqueue(queue=queue)
    await env.call(c.read, h, request_id=1, transaction=os.urandom(16))
    assert await env.call(c.end, h, 1, ack, transactional=True) == st.MQ_OK
    assert env.positions(queue) == {m.lookup_identifier: PositionState.LOCKED}       # removed at commit
    assert len(env.service.table) == 0


@pytest.mark.parametrize("ack, left", [(RR_ACK, False), (RR_NACK, True)])
async def test_end_transactional_receive_of_a_receive_without_transaction_ends_it_as_r_end_receive(env, ack, left):
    m = env.enqueue(b"plain")
    c, h = await env.opened()
    assert (await env.call(c.read, h, request_id=1, transaction=bytes(16))).status == st.MQ_OK
    assert await env.call(c.end, h, 1, ack, transactional=True) == st.MQ_OK
    assert env.positions() == ({m.lookup_identifier: PositionState.AVAILABLE} if left else {})


async def test_end_receive_of_a_transactional_receive_leaves_it_to_the_transaction(env):
    c, h, queue = await xqueue(env)
    m = env.enqueue(queue=queue)
    uow = os.urandom(16)
    await env.call(c.read, h, request_id=1, transaction=uow)
    assert await env.call(c.end, h, 1, RR_ACK) == st.MQ_OK
    assert env.positions(queue) == {m.lookup_identifier: PositionState.LOCKED}
    assert env.qm.transaction_commit(uow) == st.MQ_OK and env.positions(queue) == {}


async def test_rundown_leaves_a_transactional_receive_to_its_transaction(env):
    c, h, queue = await xqueue(env)
    m = env.enqueue(queue=queue)
    uow = os.urandom(16)
    await env.call(c.read, h, request_id=1, transaction=uow)
    await env.kill(c)
    assert env.positions(queue) == {m.lookup_identifier: PositionState.LOCKED}
    assert env.qm.transaction_abort(uow) == st.MQ_OK
    assert env.positions(queue) == {m.lookup_identifier: PositionState.AVAILABLE}


async def test_the_cleanup_timer_leaves_a_transactional_receive_to_its_transaction(env):
    c, h, queue = await xqueue(env)
    m = env.enqueue(queue=queue)
    await env.call(c.read, h, request_id=1, transaction=os.urandom(16))
    env.scheduler.advance(env.service.cleanup_ms)
    assert env.positions(queue) == {m.lookup_identifier: PositionState.LOCKED}
    assert len(env.service.table) == 0


async def test_a_transactional_receive_that_finds_no_message_leaves_no_transaction_behind(env):
    c, h, queue = await xqueue(env)
    for request_id in range(1, 4):
        r = await env.call(c.read, h, MQ_ACTION_RECEIVE, request_id=request_id, transaction=os.urandom(16))
        assert r.status == st.MQ_ERROR_IO_TIMEOUT
    assert env.qm.transaction_collection == {} and env.service.created_transactions == set()
    assert env.service.transaction_calls == {}


async def test_a_transaction_another_waiting_receive_uses_is_kept_until_that_receive_ends(env):
    c, h, queue = await xqueue(env)
    uow = os.urandom(16)
    waiting = await env.blocked(c.read, h, MQ_ACTION_RECEIVE, request_id=1, timeout=60000, transaction=uow)
    other, other_h = await env.opened(format_name=XQUEUE)
    assert (await env.call(other.read, other_h, MQ_ACTION_RECEIVE, request_id=1, transaction=uow)).status \
        == st.MQ_ERROR_IO_TIMEOUT
    transaction = env.qm.transaction_collection[uow]          # the waiting receive still needs it
    m = env.enqueue(b"late", queue=queue)
    assert (await waiting).status == st.MQ_OK
    [op] = transaction.transactional_operation_collection
    assert op.message_position_reference.lookup_identifier == m.lookup_identifier
    assert env.qm.transaction_collection == {uow: transaction} and env.service.created_transactions == set()
