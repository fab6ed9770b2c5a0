"""One test per decision of shared_adm/DEFECTS.md (MS-MQDMPR defects §13 of the digest)."""
from __future__ import annotations


from shared_adm import status as st
from shared_adm.descriptor import PendingRead
from shared_adm.enums import (CursorState, HashAlgorithm, MessageSeekAction, OperationType, PositionState,
                              QueueShareMode, RemoteReadState)
from shared_adm.message import Message
from shared_adm.queue import END_KEY
from shared_adm.seek import HEAD
from shared_adm.transaction import TransactionalOperation

from .conftest import DENY_NONE, PEEK, QNAME, RECEIVE, bodies, put


def test_defect_01_seek_from_head_includes_head(qm, queue, desc):
    put(qm, queue, "first", "second")
    found = qm.seek_available_message_position(HEAD, queue, False)
    assert found is queue.message_position_list.head
    assert qm.dequeue_message(desc, 0).message.body == b"first"


def test_defect_02_seek_first_and_last_need_no_existing_id(qm, queue, desc):
    put(qm, queue, "a", "b", "c")
    first = qm.read_message_by_lookup_identifier(desc, 0, MessageSeekAction.SEEK_FIRST, peek_operation=True)
    last = qm.read_message_by_lookup_identifier(desc, 0xFFFFFFFFFFFFFFFF, MessageSeekAction.SEEK_LAST,
                                                peek_operation=True)
    assert (first.status, first.message.body) == (st.MQ_OK, b"a")
    assert (last.status, last.message.body) == (st.MQ_OK, b"c")


def test_defect_03_sentinel_result_is_message_not_found(qm, queue, desc):
    a, b = put(qm, queue, "a", "b")
    assert qm.read_message_by_lookup_identifier(desc, b, MessageSeekAction.SEEK_NEXT, True).status \
        == st.MQ_ERROR_MESSAGE_NOT_FOUND
    assert qm.read_message_by_lookup_identifier(desc, a, MessageSeekAction.SEEK_PREVIOUS, True).status \
        == st.MQ_ERROR_MESSAGE_NOT_FOUND


def test_defect_04_seek_current_receive_of_locked_is_already_received(qm, queue, desc):
    (a,) = put(qm, queue, "a")
    assert qm.dequeue_message_begin(desc, 0).ok
    assert qm.read_message_by_lookup_identifier(desc, a, MessageSeekAction.SEEK_CURRENT, False).status \
        == st.MQ_ERROR_MESSAGE_ALREADY_RECEIVED
    assert qm.read_message_by_lookup_identifier(desc, a, MessageSeekAction.SEEK_CURRENT, True).status \
        == st.MQ_ERROR_TRANSACTION_USAGE
    qm.purge_queue(queue)
    assert queue.message_position_list.get(a).state is PositionState.PURGE_PENDING
    assert qm.read_message_by_lookup_identifier(desc, a, MessageSeekAction.SEEK_CURRENT, False).status \
        == st.MQ_ERROR_MESSAGE_NOT_FOUND


def test_defect_05_wait_failed_maps_to_io_timeout_or_queue_not_available(qm, queue, desc):
    assert qm.wait_for_new_message(desc, 0, True, None, None, lambda p: None).status == st.MQ_ERROR_IO_TIMEOUT
    qm.delete_queue(queue)
    assert qm.wait_for_new_message(desc, 1000, True, None, None, lambda p: None).status \
        == st.MQ_ERROR_QUEUE_NOT_AVAILABLE


def test_defect_06_timeout_zero_is_io_timeout_with_and_without_cursor(qm, queue, desc):
    cursor = qm.open_cursor(desc)
    assert qm.dequeue_message(desc, 0).status == st.MQ_ERROR_IO_TIMEOUT
    assert qm.dequeue_message(desc, 0, cursor=cursor).status == st.MQ_ERROR_IO_TIMEOUT
    assert qm.peek_message(desc, 0).status == st.MQ_ERROR_IO_TIMEOUT
    assert qm.peek_message(desc, 0, cursor=cursor).status == st.MQ_ERROR_IO_TIMEOUT
    assert cursor.cursor_state is CursorState.UNREAD


def test_defect_07_satisfied_peek_releases_next_reader(qm, queue, desc):
    peek = qm.peek_message(desc, 10_000)
    receive = qm.dequeue_message(desc, 10_000)
    assert isinstance(peek, PendingRead) and isinstance(receive, PendingRead)
    put(qm, queue, "m")
    assert peek.result().message.body == b"m"
    assert receive.result().message.body == b"m"
    assert len(queue.message_position_list) == 0


def test_defect_08_peeks_are_cancellable_by_tag_and_by_close_queue(qm, queue, desc):
    tagged = qm.peek_message(desc, 10_000, tag=41)
    untagged = qm.peek_message(desc, 10_000)
    assert qm.cancel_waiting_message_read_request(desc, 41, st.MQ_ERROR_OPERATION_CANCELLED) == st.MQ_OK
    assert tagged.result().status == st.MQ_ERROR_OPERATION_CANCELLED
    assert not untagged.done()
    qm.close_queue(desc)
    assert untagged.result().status == st.MQ_ERROR_OPERATION_CANCELLED


def test_defect_09_close_cursor_completes_its_waits_and_close_queue_releases_locks(qm, queue, desc):
    cursor = qm.open_cursor(desc)
    waiting = qm.dequeue_message(desc, 10_000, cursor=cursor, tag=1)
    assert qm.close_cursor(cursor) == st.MQ_OK
    assert waiting.result().status == st.MQ_ERROR_OPERATION_CANCELLED
    put(qm, queue, "m")
    assert qm.dequeue_message_begin(desc, 0).ok
    assert queue.message_position_list.head.state is PositionState.LOCKED
    qm.close_queue(desc)
    assert queue.message_position_list.head.state is PositionState.AVAILABLE
    assert qm.descriptor_by_handle(desc.handle) is None


def test_defect_10_open_queue_sets_share_mode_and_remote_read_state(qm, queue):
    status, d = qm.open_queue(QNAME, RECEIVE, QueueShareMode.DENY_RECEIVE, RemoteReadState.OPENED)
    assert status == st.MQ_OK
    assert d.share_mode is QueueShareMode.DENY_RECEIVE and d.remote_read_state is RemoteReadState.OPENED
    assert qm.open_queue(QNAME, RECEIVE, DENY_NONE)[0] == st.MQ_ERROR_SHARING_VIOLATION


def test_defect_11_plain_receive_deletes_two_phase_locks_transaction_wins(qm, queue, desc):
    put(qm, queue, "a", "b", "c")
    assert qm.dequeue_message(desc, 0).message.body == b"a"
    assert bodies(qm, queue)[0] == (b"b", "Available")
    begun = qm.dequeue_message_begin(desc, 0)
    assert begun.position.state is PositionState.LOCKED
    assert qm.dequeue_message_end(desc, begun.position, True) == st.MQ_OK
    assert qm.dequeue_message_end(desc, begun.position, False) == st.MQ_ERROR_TRANSACTION_SEQUENCE
    tx = qm.create_transaction(b"t")
    both = qm.dequeue_message_begin(desc, 0, transaction=tx)
    assert both.ok and not both.two_phase
    assert tx.transactional_operation_collection[0].operation_type is OperationType.DEQUEUE
    assert qm.transaction_commit(b"t") == st.MQ_OK
    assert len(queue.message_position_list) == 0


def test_defect_12_lookup_identifier_orders_like_the_list(qm, queue):
    low = Message(priority=0)
    high = Message(priority=7)
    mid = Message(priority=3)
    for m in (low, high, mid):
        qm.enqueue_message(queue, m)
    assert high.lookup_identifier >> 56 == 0 and low.lookup_identifier >> 56 == 7 and mid.lookup_identifier >> 56 == 4
    assert mid.lookup_identifier & ((1 << 56) - 1) == qm.sequential_id
    listed = [p.lookup_identifier for p in queue.message_position_list]
    assert listed == sorted(listed) == [high.lookup_identifier, mid.lookup_identifier, low.lookup_identifier]
    assert mid.arrival_time == int(qm.scheduler.wall_time())


def test_defect_13_total_bytes_do_not_drift_on_nack(qm, queue, desc):
    put(qm, queue, "payload")
    before = queue.total_bytes
    for _ in range(3):
        r = qm.dequeue_message_begin(desc, 0)
        assert queue.total_bytes == 0
        qm.dequeue_message_end(desc, r.position, False)
    assert queue.total_bytes == before > 0
    qm.dequeue_message(desc, 0)
    assert queue.total_bytes == 0


def test_defect_14_ttbr_expiry_of_locked_message_waits_for_end(qm, queue, desc, sched):
    put(qm, queue, "ack", "nack", time_to_be_received=1)
    first = qm.dequeue_message_begin(desc, 0)
    second = qm.dequeue_message_begin(desc, 0)
    sched.advance(1000)
    assert len(queue.message_position_list) == 2
    assert qm.dequeue_message_end(desc, first.position, True) == st.MQ_OK
    assert qm.dequeue_message_end(desc, second.position, False) == st.MQ_OK
    assert len(queue.message_position_list) == 0
    assert qm.dequeue_message(desc, 0).status == st.MQ_ERROR_IO_TIMEOUT


def test_defect_15_cancel_is_scoped_to_the_descriptor(qm, queue, desc):
    status, other = qm.open_queue(QNAME, RECEIVE, DENY_NONE)
    mine = qm.dequeue_message(desc, 10_000, tag=5)
    theirs = qm.dequeue_message(other, 10_000, tag=5)
    assert qm.cancel_waiting_message_read_request(other, 5, st.MQ_ERROR_OPERATION_CANCELLED) == st.MQ_OK
    assert theirs.result().status == st.MQ_ERROR_OPERATION_CANCELLED and not mine.done()
    assert qm.cancel_waiting_message_read_request(other, 5, st.MQ_ERROR_OPERATION_CANCELLED) == st.STATUS_NOT_FOUND
    assert qm.cancel_waiting_message_read_request(queue, 5, 0xC00E0001) == st.MQ_OK
    assert mine.result().status == 0xC00E0001


def test_defect_16_abort_restores_dequeues_and_drops_enqueues_prepare_checks_first(qm, queue, desc):
    assert qm.transaction_prepare(b"nope", single_phase=False) == st.MQ_ERROR_TRANSACTION_SEQUENCE
    put(qm, queue, "kept", "purged")
    tx = qm.create_transaction(b"t")
    qm.enqueue_message(queue, Message(body=b"new"), tx)
    qm.dequeue_message(desc, 0, transaction=tx)
    qm.dequeue_message(desc, 0, transaction=tx)
    qm.purge_queue(queue)
    assert qm.transaction_abort(b"t") == st.MQ_OK
    assert bodies(qm, queue) == []       # both dequeued messages were PurgePending → deleted; enqueue dropped
    put(qm, queue, "again")
    tx = qm.create_transaction(b"u")
    qm.dequeue_message(desc, 0, transaction=tx)
    assert qm.transaction_abort(b"u") == st.MQ_OK
    assert bodies(qm, queue) == [(b"again", "Available")]


def test_defect_17_names_follow_the_attribute_definitions(qm, queue):
    assert hasattr(Message(), "allow_peek_when_locked")
    op = TransactionalOperation(OperationType.MOVE, None, target_queue_reference=queue)
    assert op.target_queue_reference is queue
    assert qm.system_transactional_deadletter_queue is not None
    (a,) = put(qm, queue, "only")
    position = queue.message_position_list.get(a)
    assert position.previous is queue.message_position_list.start
    assert position.next is queue.message_position_list.end


def test_defect_18_hash_algorithm_0x8003_is_md5():
    assert HashAlgorithm(0x8003) is HashAlgorithm.MD5
    assert HashAlgorithm.MD4 == 0x8002


def test_defect_19_access_checks_and_dead_letter_on_expiry(qm, queue, sched):
    status, peeker = qm.open_queue(QNAME, PEEK, DENY_NONE)
    put(qm, queue, "m")
    assert qm.dequeue_message(peeker, 0).status == st.MQ_ERROR_ACCESS_DENIED
    assert qm.read_message_by_lookup_identifier(peeker, 0, MessageSeekAction.SEEK_FIRST, False).status \
        == st.MQ_ERROR_ACCESS_DENIED
    assert qm.peek_message(peeker, 0).ok
    put(qm, queue, "dead", time_to_be_received=2, negative_journaling_requested=True)
    sched.advance(2000)
    dlq = [p.message for p in qm.system_deadletter_queue.message_position_list]
    assert [m.body for m in dlq] == [b"dead"] and dlq[0].class_ == 0xC002
    assert bodies(qm, queue) == [(b"m", "Available")]


def test_defect_20_cursor_keeps_its_place_after_timeouts_and_deletes(qm, queue, desc, sched):
    cursor = qm.open_cursor(desc)
    put(qm, queue, "a", "b")
    assert qm.dequeue_message(desc, 0, cursor=cursor).message.body == b"a"
    assert cursor.message_position_reference.state is PositionState.DELETED
    assert qm.dequeue_message(desc, 0, cursor=cursor).message.body == b"b"
    waiting = qm.dequeue_message(desc, 100, cursor=cursor)
    sched.advance(100)
    assert waiting.result().status == st.MQ_ERROR_IO_TIMEOUT
    assert cursor.cursor_state is CursorState.UNREAD
    assert cursor.message_position_reference.lookup_identifier != END_KEY
    put(qm, queue, "c")
    assert qm.dequeue_message(desc, 0, cursor=cursor).message.body == b"c"
    peeker = qm.open_cursor(desc)
    put(qm, queue, "d")
    assert qm.peek_message(desc, 0, cursor=peeker).message.body == b"d"
    assert qm.peek_next_message(desc, 0, cursor=peeker).status == st.MQ_ERROR_IO_TIMEOUT
    assert peeker.cursor_state is CursorState.READ
    put(qm, queue, "e")
    assert qm.peek_next_message(desc, 0, cursor=peeker).message.body == b"e"
