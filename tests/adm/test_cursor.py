"""Cursor state machine (MS-MQDMPR 3.2), transition by transition, and the cursor paths of 3.1.7.1.10/14/15."""
from __future__ import annotations

from shared_adm import status as st
from shared_adm.cursor import CursorResult
from shared_adm.descriptor import PendingRead
from shared_adm.enums import CursorState, PositionState

from .conftest import put


def test_initialize_references_start_unread(qm, queue, desc):
    cursor = qm.open_cursor(desc)
    assert cursor.message_position_reference is queue.message_position_list.start
    assert cursor.cursor_state is CursorState.UNREAD
    assert qm.cursor_by_handle(cursor.handle) is cursor and desc.cursor_collection[cursor.handle] is cursor


def test_open_cursor_without_queue_returns_none(qm, queue, desc):
    qm.delete_queue(queue)
    assert qm.open_cursor(desc) is None


def test_cursor_handles_are_unique(qm, queue, desc):
    handles = {qm.open_cursor(desc).handle for _ in range(20)}
    assert len(handles) == 20 and 0 not in handles


def test_get_message_for_peek_unread_found_goes_read(qm, queue, desc):
    put(qm, queue, "a")
    cursor = qm.open_cursor(desc)
    result, position = cursor.get_message_for_peek()
    assert result is CursorResult.SUCCEEDED and cursor.cursor_state is CursorState.READ
    assert cursor.message_position_reference is position


def test_get_message_for_peek_unread_empty_goes_wait_peek(qm, queue, desc):
    cursor = qm.open_cursor(desc)
    assert cursor.get_message_for_peek() == (CursorResult.WAITING, None)
    assert cursor.cursor_state is CursorState.WAIT_PEEK


def test_get_message_for_peek_read_returns_same_or_already_received(qm, queue, desc):
    put(qm, queue, "a", "b")
    cursor = qm.open_cursor(desc)
    _, first = cursor.get_message_for_peek()
    assert cursor.get_message_for_peek() == (CursorResult.SUCCEEDED, first)
    qm.dequeue_message(desc, 0)
    assert cursor.get_message_for_peek() == (CursorResult.ALREADY_RECEIVED, None)


def test_get_next_message_for_peek_unread_is_illegal(qm, queue, desc):
    put(qm, queue, "a")
    cursor = qm.open_cursor(desc)
    assert cursor.get_next_message_for_peek() == (CursorResult.ILLEGAL_CURSOR_ACTION, None)
    assert qm.peek_next_message(desc, 0, cursor=cursor).status == st.MQ_ERROR_ILLEGAL_CURSOR_ACTION


def test_get_next_message_for_peek_read_advances_or_waits(qm, queue, desc):
    put(qm, queue, "a", "b")
    cursor = qm.open_cursor(desc)
    cursor.get_message_for_peek()
    result, position = cursor.get_next_message_for_peek()
    assert result is CursorResult.SUCCEEDED and position.message.body == b"b"
    assert cursor.cursor_state is CursorState.READ
    assert cursor.get_next_message_for_peek() == (CursorResult.WAITING, None)
    assert cursor.cursor_state is CursorState.WAIT_PEEK


def test_get_next_message_for_dequeue_unread(qm, queue, desc):
    cursor = qm.open_cursor(desc)
    assert cursor.get_next_message_for_dequeue(no_wait=True) == (CursorResult.NOT_FOUND, None)
    assert cursor.cursor_state is CursorState.UNREAD
    assert cursor.get_next_message_for_dequeue(no_wait=False) == (CursorResult.WAITING, None)
    assert cursor.cursor_state is CursorState.WAIT_RECEIVE


def test_get_next_message_for_dequeue_unread_found_stays_unread(qm, queue, desc):
    put(qm, queue, "a")
    cursor = qm.open_cursor(desc)
    result, position = cursor.get_next_message_for_dequeue(no_wait=True)
    assert result is CursorResult.SUCCEEDED and cursor.cursor_state is CursorState.UNREAD
    assert cursor.message_position_reference is position


def test_get_next_message_for_dequeue_read_takes_current(qm, queue, desc):
    put(qm, queue, "a", "b")
    cursor = qm.open_cursor(desc)
    cursor.get_message_for_peek()
    assert qm.dequeue_message(desc, 0, cursor=cursor).message.body == b"a"
    assert cursor.cursor_state is CursorState.UNREAD
    cursor2 = qm.open_cursor(desc)
    cursor2.get_message_for_peek()
    qm.dequeue_message(desc, 0)
    assert qm.dequeue_message(desc, 0, cursor=cursor2).status == st.MQ_ERROR_MESSAGE_ALREADY_RECEIVED


def test_message_available_from_wait_peek_and_wait_receive(qm, queue, desc):
    peeker, receiver = qm.open_cursor(desc), qm.open_cursor(desc)
    peek = qm.peek_message(desc, 1000, cursor=peeker)
    receive = qm.dequeue_message(desc, 1000, cursor=receiver)
    assert peeker.cursor_state is CursorState.WAIT_PEEK and receiver.cursor_state is CursorState.WAIT_RECEIVE
    put(qm, queue, "m")
    assert peek.result().message.body == b"m" and peeker.cursor_state is CursorState.READ
    assert receive.result().message.body == b"m" and receiver.cursor_state is CursorState.UNREAD
    assert peeker.message_position_reference is receiver.message_position_reference


def test_wait_time_expired_from_wait_peek_and_wait_receive(qm, queue, desc, sched):
    peeker, receiver = qm.open_cursor(desc), qm.open_cursor(desc)
    peek = qm.peek_message(desc, 10, cursor=peeker)
    receive = qm.dequeue_message(desc, 10, cursor=receiver)
    sched.advance(10)
    assert peek.result().status == receive.result().status == st.MQ_ERROR_IO_TIMEOUT
    assert peeker.cursor_state is CursorState.UNREAD and receiver.cursor_state is CursorState.UNREAD


def test_second_wait_on_a_waiting_cursor_is_illegal(qm, queue, desc):
    cursor = qm.open_cursor(desc)
    assert isinstance(qm.dequeue_message(desc, 1000, cursor=cursor), PendingRead)
    assert qm.dequeue_message(desc, 1000, cursor=cursor).status == st.MQ_ERROR_ILLEGAL_CURSOR_ACTION
    assert qm.peek_message(desc, 1000, cursor=cursor).status == st.MQ_ERROR_ILLEGAL_CURSOR_ACTION
    assert qm.peek_next_message(desc, 1000, cursor=cursor).status == st.MQ_ERROR_ILLEGAL_CURSOR_ACTION


def test_cursor_does_not_see_messages_behind_it_while_waiting(qm, queue, desc):
    put(qm, queue, "a", priority=3)
    cursor = qm.open_cursor(desc)
    assert qm.peek_message(desc, 0, cursor=cursor).message.body == b"a"
    waiting = qm.peek_next_message(desc, 1000, cursor=cursor)
    put(qm, queue, "urgent", priority=7)         # lands before the cursor
    assert not waiting.done()
    put(qm, queue, "later", priority=3)
    assert waiting.result().message.body == b"later"


def test_cursor_walk_peeks_every_message_in_order(qm, queue, desc):
    put(qm, queue, "low", priority=1)
    put(qm, queue, "high", priority=6)
    put(qm, queue, "mid1", "mid2", priority=3)
    cursor = qm.open_cursor(desc)
    seen = [qm.peek_message(desc, 0, cursor=cursor).message.body]
    while True:
        r = qm.peek_next_message(desc, 0, cursor=cursor)
        if not r.ok:
            break
        seen.append(r.message.body)
    assert seen == [b"high", b"mid1", b"mid2", b"low"]


def test_cursor_skips_locked_positions(qm, queue, desc):
    put(qm, queue, "a", "b")
    qm.dequeue_message_begin(desc, 0)
    cursor = qm.open_cursor(desc)
    assert qm.peek_message(desc, 0, cursor=cursor).message.body == b"b"
    assert queue.message_position_list.head.state is PositionState.LOCKED


def test_cursor_of_another_descriptor_is_invalid_handle(qm, queue, desc):
    from .conftest import DENY_NONE, QNAME, RECEIVE
    _, other = qm.open_queue(QNAME, RECEIVE, DENY_NONE)
    cursor = qm.open_cursor(other)
    assert qm.dequeue_message(desc, 0, cursor=cursor).status == st.MQ_ERROR_INVALID_HANDLE
    qm.close_cursor(cursor)
    assert qm.peek_message(other, 0, cursor=cursor).status == st.MQ_ERROR_INVALID_HANDLE
    assert qm.close_cursor(cursor) == st.MQ_ERROR_INVALID_HANDLE
