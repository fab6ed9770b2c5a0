"""Enqueue, Dequeue (Begin/End), Purge, Read By Lookup Identifier, Move, TTBR, transactions (MS-MQDMPR 3.1.7.1, 3.1.4)."""
from __future__ import annotations

import pytest

from shared_adm import status as st
from shared_adm.enums import MessageSeekAction as Seek, OperationType, PositionState, QueueAccessType
from shared_adm.message import Message
from shared_adm.queue_manager import QueueManager

from .conftest import DENY_NONE, QNAME, RECEIVE, bodies, put


# ---------------------------------------------------------------- 3.1.7.1.9 Enqueue Message
def test_enqueue_increments_sequential_id_and_sets_lookup_identifier(qm, queue):
    start = qm.sequential_id
    ids = put(qm, queue, "a", "b")
    assert qm.sequential_id == start + 2
    assert [i & ((1 << 56) - 1) for i in ids] == [start + 1, start + 2]


def test_enqueue_queue_quota_is_result_1(qm):
    _, small = qm.create_queue(r".\private$\small", quota=1)
    assert qm.enqueue_message(small, Message(body=b"x" * 600)) == 0
    assert qm.enqueue_message(small, Message(body=b"x" * 600)) == 1
    assert len(small.message_position_list) == 1


def test_enqueue_queue_manager_quota_and_throttled_are_result_2(sched):
    qm = QueueManager(scheduler=sched, queue_manager_quota_kb=1)
    qm.initialize()
    _, q = qm.create_queue(r".\private$\q")
    assert qm.enqueue_message(q, Message(body=b"x" * 600)) == 0
    seq = qm.sequential_id
    assert qm.enqueue_message(q, Message(body=b"x" * 600)) == 2
    assert qm.sequential_id == seq
    qm.throttled = True
    assert qm.enqueue_message(q, Message(body=b"")) == 2


def test_enqueue_rejects_bad_input(qm, queue):
    with pytest.raises(ValueError, match="Priority"):
        qm.enqueue_message(queue, Message(priority=8))
    with pytest.raises(TypeError):
        qm.enqueue_message(queue, b"not a message")
    _, other = qm.create_queue(r".\private$\gone")
    qm.delete_queue(other)
    with pytest.raises(ValueError, match="QueueCollection"):
        qm.enqueue_message(other, Message())


def test_enqueue_wakes_first_destructive_reader_only(qm, queue, desc):
    first = qm.dequeue_message(desc, 1000, tag=1)
    second = qm.dequeue_message(desc, 1000, tag=2)
    put(qm, queue, "m")
    assert first.result().message.body == b"m" and not second.done()


# ---------------------------------------------------------------- 3.1.7.1.10-12
def test_dequeue_queue_not_available_and_invalid_arguments(qm, queue, desc):
    for timeout in (-1, 1 << 32, 1.5, "1", True):
        assert qm.dequeue_message(desc, timeout).status == st.MQ_ERROR_INVALID_PARAMETER
    assert qm.dequeue_message("desc", 0).status == st.MQ_ERROR_INVALID_HANDLE
    assert qm.dequeue_message(desc, 0, cursor=object()).status == st.MQ_ERROR_INVALID_HANDLE
    assert qm.dequeue_message(desc, 0, transaction=object()).status == st.MQ_ERROR_TRANSACTION_SEQUENCE
    qm.delete_queue(queue)
    assert qm.dequeue_message_begin(desc, 0).status == st.MQ_ERROR_QUEUE_NOT_AVAILABLE


def test_begin_locks_end_ack_deletes_end_nack_makes_available(qm, queue, desc):
    put(qm, queue, "a", "b")
    begun = qm.dequeue_message_begin(desc, 0, tag=1)
    assert begun.ok and begun.two_phase and begun.message.body == b"a"
    assert bodies(qm, queue) == [(b"a", "Locked"), (b"b", "Available")]
    assert qm.dequeue_message_begin(desc, 0).message.body == b"b"
    assert qm.dequeue_message(desc, 0).status == st.MQ_ERROR_IO_TIMEOUT
    assert qm.dequeue_message_end(desc, begun.position, False) == st.MQ_OK
    assert qm.dequeue_message(desc, 0).message.body == b"a"


def test_end_on_available_position_is_transaction_sequence(qm, queue, desc):
    put(qm, queue, "a")
    position = queue.message_position_list.head
    assert qm.dequeue_message_end(desc, position, True) == st.MQ_ERROR_TRANSACTION_SEQUENCE
    assert qm.dequeue_message_end(desc, "junk", True) == st.MQ_ERROR_TRANSACTION_SEQUENCE
    assert qm.dequeue_message_end("junk", position, True) == st.MQ_ERROR_INVALID_HANDLE


def test_end_transactional_leaves_outcome_to_the_transaction(qm, queue, desc):
    put(qm, queue, "a")
    tx = qm.create_transaction(b"t")
    r = qm.dequeue_message_begin(desc, 0, transaction=tx)
    assert qm.dequeue_message_end(desc, r.position, True, transactional=True) == st.MQ_OK
    assert r.position.state is PositionState.LOCKED


def test_end_from_another_descriptor_is_refused(qm, queue, desc):
    _, other = qm.open_queue(QNAME, RECEIVE, DENY_NONE)
    put(qm, queue, "a")
    r = qm.dequeue_message_begin(desc, 0)
    assert qm.dequeue_message_end(other, r.position, True) == st.MQ_ERROR_TRANSACTION_SEQUENCE
    assert qm.dequeue_message_end(desc, r.position, True) == st.MQ_OK


def test_nack_wakes_a_waiting_reader(qm, queue, desc):
    put(qm, queue, "a")
    r = qm.dequeue_message_begin(desc, 0)
    waiting = qm.dequeue_message_begin(desc, 1000, tag=2)
    qm.dequeue_message_end(desc, r.position, False)
    assert waiting.result().message.body == b"a" and waiting.result().position.state is PositionState.LOCKED


# ---------------------------------------------------------------- 3.1.7.1.7 Purge Queue
def test_purge_deletes_available_and_marks_locked_purge_pending(qm, queue, desc):
    put(qm, queue, "locked", "free1", "free2")
    r = qm.dequeue_message_begin(desc, 0)
    assert qm.purge_queue(queue) == st.MQ_OK
    assert bodies(qm, queue) == [(b"locked", "PurgePending")]
    assert qm.peek_message(desc, 0).status == st.MQ_ERROR_IO_TIMEOUT
    assert qm.dequeue_message_end(desc, r.position, False) == st.MQ_OK      # NACK still deletes
    assert bodies(qm, queue) == []
    qm.purge_queue(queue)                                                   # empty purge is fine


# ---------------------------------------------------------------- 3.1.7.1.13 Read Message By Lookup Identifier
@pytest.fixture
def five(qm, queue):
    return put(qm, queue, "m0", "m1", "m2", "m3", "m4")


@pytest.mark.parametrize("action, index, expected", [
    (Seek.SEEK_CURRENT, 2, b"m2"), (Seek.SEEK_NEXT, 2, b"m3"), (Seek.SEEK_PREVIOUS, 2, b"m1"),
    (Seek.SEEK_FIRST, 2, b"m0"), (Seek.SEEK_LAST, 2, b"m4"),
])
def test_lookup_peek_actions(qm, queue, desc, five, action, index, expected):
    r = qm.read_message_by_lookup_identifier(desc, five[index], action, peek_operation=True)
    assert r.ok and r.message.body == expected
    assert len(queue.message_position_list) == 5


def test_lookup_skips_unavailable_neighbours(qm, queue, desc, five):
    qm.read_message_by_lookup_identifier(desc, five[3], Seek.SEEK_CURRENT, False, two_phase_read=True)
    assert qm.read_message_by_lookup_identifier(desc, five[2], Seek.SEEK_NEXT, True).message.body == b"m4"
    qm.read_message_by_lookup_identifier(desc, five[1], Seek.SEEK_CURRENT, False)
    assert qm.read_message_by_lookup_identifier(desc, five[2], Seek.SEEK_PREVIOUS, True).message.body == b"m0"
    assert qm.read_message_by_lookup_identifier(desc, five[1], Seek.SEEK_NEXT, True).status \
        == st.MQ_ERROR_MESSAGE_NOT_FOUND        # the id itself is gone


def test_lookup_receive_plain_and_two_phase(qm, queue, desc, five):
    r = qm.read_message_by_lookup_identifier(desc, five[0], Seek.SEEK_NEXT, False)
    assert r.message.body == b"m1" and r.position is None
    r = qm.read_message_by_lookup_identifier(desc, five[0], Seek.SEEK_CURRENT, False, two_phase_read=True)
    assert r.position.state is PositionState.LOCKED and r.message.lookup_identifier == five[0]
    assert qm.dequeue_message_end(desc, r.position, True) == st.MQ_OK
    assert [b for b, _ in bodies(qm, queue)] == [b"m2", b"m3", b"m4"]


def test_lookup_transactional_receive(qm, queue, desc, five):
    tx = qm.create_transaction(b"t")
    r = qm.read_message_by_lookup_identifier(desc, five[4], Seek.SEEK_CURRENT, False, transaction=tx)
    assert r.ok and r.position.state is PositionState.LOCKED
    qm.transaction_commit(b"t")
    assert len(queue.message_position_list) == 4


def test_lookup_bad_arguments(qm, queue, desc, five):
    for bad in (-1, 1 << 64, "1", None, 2.0):
        assert qm.read_message_by_lookup_identifier(desc, bad, Seek.SEEK_CURRENT, True).status \
            == st.MQ_ERROR_INVALID_PARAMETER
    assert qm.read_message_by_lookup_identifier(desc, five[0], "SeekNext", True).status == st.MQ_ERROR_INVALID_PARAMETER
    tx = qm.create_transaction(b"t")
    assert qm.read_message_by_lookup_identifier(desc, five[0], Seek.SEEK_CURRENT, True, transaction=tx).status \
        == st.MQ_ERROR_INVALID_PARAMETER
    assert qm.read_message_by_lookup_identifier(desc, 12345, Seek.SEEK_CURRENT, True).status \
        == st.MQ_ERROR_MESSAGE_NOT_FOUND
    qm.delete_queue(queue)
    assert qm.read_message_by_lookup_identifier(desc, 0, Seek.SEEK_FIRST, True).status == st.MQ_ERROR_QUEUE_NOT_AVAILABLE


def test_lookup_allow_peek_when_locked(qm, queue, desc):
    (a,) = put(qm, queue, "a", allow_peek_when_locked=True)
    qm.dequeue_message_begin(desc, 0)
    assert qm.read_message_by_lookup_identifier(desc, a, Seek.SEEK_CURRENT, True).ok
    assert qm.read_message_by_lookup_identifier(desc, 0, Seek.SEEK_FIRST, True).ok
    assert qm.read_message_by_lookup_identifier(desc, 0, Seek.SEEK_FIRST, False).status == st.MQ_ERROR_MESSAGE_NOT_FOUND
    assert qm.peek_message(desc, 0).ok
    assert qm.dequeue_message(desc, 0).status == st.MQ_ERROR_IO_TIMEOUT


# ---------------------------------------------------------------- 3.1.7.1.16 Move Message
def test_move_message_without_transaction(qm, queue, desc):
    _, target = qm.create_queue(r".\private$\target")
    _, tdesc = qm.open_queue(r"DIRECT=OS:.\private$\target", RECEIVE, DENY_NONE)
    waiting = qm.dequeue_message(tdesc, 1000)
    (a,) = put(qm, queue, "m")
    position = queue.message_position_list.get(a)
    assert qm.move_message(position, target) == st.MQ_OK
    assert position.state is PositionState.DELETED and len(queue.message_position_list) == 0
    assert waiting.result().message.body == b"m" and waiting.result().message.lookup_identifier == a
    assert queue.total_bytes == 0
    assert qm.move_message(position, target) == st.MQ_ERROR_MESSAGE_NOT_FOUND


def test_move_message_in_transaction(qm, queue):
    _, target = qm.create_queue(r".\private$\target")
    (a, b) = put(qm, queue, "a", "b")
    tx = qm.create_transaction(b"t")
    assert qm.move_message(queue.message_position_list.get(a), target, tx) == st.MQ_OK
    assert qm.move_message(queue.message_position_list.get(b), qm.system_deadletter_queue, tx) \
        == st.MQ_ERROR_TRANSACTION_USAGE
    assert queue.message_position_list.get(a).state is PositionState.LOCKED
    assert tx.transactional_operation_collection[0].operation_type is OperationType.MOVE
    qm.transaction_commit(b"t")
    assert bodies(qm, target) == [(b"a", "Available")] and bodies(qm, queue) == [(b"b", "Available")]
    tx = qm.create_transaction(b"u")
    qm.move_message(queue.message_position_list.get(b), target, tx)
    qm.transaction_abort(b"u")
    assert bodies(qm, queue) == [(b"b", "Available")]


def test_move_to_system_queue_without_event(qm, queue):
    (a,) = put(qm, queue, "a")
    qm.move_message(queue.message_position_list.get(a), qm.system_deadletter_queue)
    assert bodies(qm, qm.system_deadletter_queue) == [(b"a", "Available")]


# ---------------------------------------------------------------- 3.1.4.3-5 transactions
def test_transaction_commit_applies_operations_in_order(qm, queue, desc):
    put(qm, queue, "old")
    tx = qm.create_transaction(b"t")
    assert qm.enqueue_message(queue, Message(body=b"new"), tx) == 0
    assert bodies(qm, queue) == [(b"old", "Available"), (b"new", "Locked")]
    assert qm.dequeue_message(desc, 0, transaction=tx).message.body == b"old"
    assert qm.transaction_prepare(b"t") == st.MQ_OK
    waiting = qm.dequeue_message(desc, 1000)
    assert qm.transaction_commit(b"t") == st.MQ_OK
    assert waiting.result().message.body == b"new"
    assert qm.transaction_commit(b"t") == st.MQ_ERROR_TRANSACTION_SEQUENCE
    assert qm.transaction_abort(b"t") == st.MQ_ERROR_TRANSACTION_SEQUENCE


def test_create_transaction_rejects_duplicates_and_junk(qm):
    qm.create_transaction(b"t")
    with pytest.raises(ValueError):
        qm.create_transaction(b"t")
    with pytest.raises(ValueError):
        qm.create_transaction(b"")


# ---------------------------------------------------------------- 3.1.2.4 / 3.1.7.2.7 Time To Be Received
def test_ttbr_expires_after_its_time(qm, queue, desc, sched):
    put(qm, queue, "short", time_to_be_received=2)
    put(qm, queue, "forever")
    sched.advance(1999)
    assert len(queue.message_position_list) == 2
    sched.advance(1)
    assert bodies(qm, queue) == [(b"forever", "Available")]
    assert len(qm.system_deadletter_queue.message_position_list) == 0      # no negative journaling asked


def test_ttbr_counts_from_sent_time_and_zero_expires_at_once(qm, queue, sched):
    now = int(sched.wall_time())
    put(qm, queue, "old", time_to_be_received=10, sent_time=now - 9)
    put(qm, queue, "zero", time_to_be_received=0)
    sched.advance(0)
    assert [b for b, _ in bodies(qm, queue)] == [b"old"]
    sched.advance(1000)
    assert bodies(qm, queue) == []


def test_each_transactional_operation_is_found_by_its_position_until_the_outcome(qm, queue, sched):
    """QueueManager.transactional_operation_on: what a Locked message is locked by, for the four kinds of
    TransactionalOperation (3.1.1.13) -- a transactional enqueue, receive, move and expiry -- and None once the
    transaction commits or aborts."""
    enqueue, receive, move, expiry = (qm.create_transaction(name) for name in (b"e", b"r", b"m", b"x"))
    qm.enqueue_message(queue, Message(body=b"enqueued"), transaction=enqueue)
    put(qm, queue, "received")
    put(qm, queue, "moved")
    put(qm, queue, "expired", time_to_be_received=1, transaction_identifier=b"x")
    by_body = {p.message.body: p for p in queue.message_position_list}
    _, descriptor = qm.open_queue(QNAME, RECEIVE, DENY_NONE)
    assert qm.dequeue_message(descriptor, 0, transaction=receive).status == st.MQ_OK      # takes the head: "received"
    _, target = qm.open_queue(QNAME + ";poison", QueueAccessType.MOVE_ACCESS, DENY_NONE)
    assert qm.move_message(by_body[b"moved"], target.queue_reference, move) == st.MQ_OK
    sched.advance(1000)
    for body, transaction in ((b"enqueued", enqueue), (b"received", receive), (b"moved", move), (b"expired", expiry)):
        assert qm.transactional_operation_on(by_body[body]) is transaction.transactional_operation_collection[0]
    qm.transaction_commit(b"e"), qm.transaction_abort(b"r"), qm.transaction_commit(b"m"), qm.transaction_abort(b"x")
    assert all(qm.transactional_operation_on(p) is None for p in by_body.values())
    assert qm._operation_by_position == {}


def test_ttbr_transactional_branch(qm, queue, sched):
    tx = qm.create_transaction(b"t")
    put(qm, queue, "m", time_to_be_received=1, transaction_identifier=b"t")
    sched.advance(1000)
    assert queue.message_position_list.head.state is PositionState.LOCKED
    op = tx.transactional_operation_collection[-1]
    assert op.operation_type is OperationType.DEQUEUE and op.dequeue_reason == 0xC002
    qm.transaction_commit(b"t")
    assert len(queue.message_position_list) == 0
