"""MessagePositionList (MS-MQDMPR 3.1.1.2, 3.1.1.11) and Seek Available Message Position (3.1.7.3.2)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as hs
from sortedcontainers import SortedList

from shared_adm import status as st
from shared_adm.enums import MessageSeekAction, PositionState, SeekDirection
from shared_adm.queue import _next_after, _prev_before
from shared_adm.seek import HEAD

from .conftest import put


def test_empty_list_head_is_end_tail_is_start(queue):
    lst = queue.message_position_list
    assert lst.head is lst.end and lst.tail is lst.start and len(lst) == 0
    assert repr(lst.start) == "<MessagePosition Start>" and repr(lst.end) == "<MessagePosition End>"


def test_order_is_priority_then_arrival(qm, queue):
    put(qm, queue, "p1a", priority=1)
    put(qm, queue, "p7", priority=7)
    put(qm, queue, "p1b", priority=1)
    put(qm, queue, "p3", priority=3)
    lst = queue.message_position_list
    assert [p.message.body for p in lst] == [b"p7", b"p3", b"p1a", b"p1b"]
    assert lst.head.message.body == b"p7" and lst.tail.message.body == b"p1b"
    assert lst.head.previous is lst.start and lst.tail.next is lst.end
    assert lst.head.next.next is lst.get(lst.tail.lookup_identifier).previous


def test_insert_duplicate_id_refused(qm, queue):
    (a,) = put(qm, queue, "a")
    with pytest.raises(ValueError):
        queue.message_position_list.insert(queue.message_position_list.get(a))


@pytest.mark.parametrize("available", [0, 1, 3, 20])
def test_unlink_available_is_remove_of_each_available_position(qm, queue, desc, available):
    """Every branch of the bulk unlink: none, few among many (deleted one by one), most (rebuilt), all."""
    put(qm, queue, *[f"m{i}" for i in range(20)], allow_peek_when_locked=True)
    lst = queue.message_position_list
    for _ in range(20 - available):
        assert qm.dequeue_message_begin(desc, 0).status == st.MQ_OK
    before = list(lst)
    kept = [p for p in before if p.state is not PositionState.AVAILABLE]
    removed = lst.unlink_available()
    assert removed == [p for p in before if p.state is PositionState.AVAILABLE] and len(removed) == available
    assert list(lst) == kept and lst.available_count == 0 and lst.peek_locked == len(kept)
    assert all(p.state is PositionState.AVAILABLE and p not in lst for p in removed)
    assert lst.first_available_after(0) is lst.end and lst.head is (kept[0] if kept else lst.end)
    assert [lst.after(p.lookup_identifier) for p in kept] == (kept[1:] + [lst.end] if kept else [])


def test_seek_forward_and_backward_skip_unavailable(qm, queue, desc):
    ids = put(qm, queue, "a", "b", "c", "d")
    lst = queue.message_position_list
    qm.dequeue_message_begin(desc, 0)                      # a Locked
    qm.read_message_by_lookup_identifier(desc, ids[2], MessageSeekAction.SEEK_CURRENT, False, True)   # c Locked
    seek = qm.seek_available_message_position
    assert seek(HEAD, queue, False).message.body == b"b"
    assert seek(lst.start, queue, False).message.body == b"b"
    assert seek(lst.get(ids[1]), queue, False).message.body == b"d"
    assert seek(lst.get(ids[3]), queue, False) is lst.end
    assert seek(lst.end, queue, False, SeekDirection.BACKWARD).message.body == b"d"
    assert seek(lst.get(ids[3]), queue, False, SeekDirection.BACKWARD).message.body == b"b"
    assert seek(lst.get(ids[1]), queue, False, SeekDirection.BACKWARD) is lst.start


def test_seek_peek_sees_locked_when_allowed(qm, queue, desc):
    put(qm, queue, "a", allow_peek_when_locked=True)
    put(qm, queue, "b")
    qm.dequeue_message_begin(desc, 0)
    lst = queue.message_position_list
    assert lst.peek_locked == 1
    assert qm.seek_available_message_position(HEAD, queue, True).message.body == b"a"
    assert qm.seek_available_message_position(HEAD, queue, False).message.body == b"b"
    assert qm.seek_available_message_position(lst.end, queue, True, SeekDirection.BACKWARD).message.body == b"b"
    r = qm.dequeue_message_begin(desc, 0)
    qm.dequeue_message_end(desc, r.position, True)
    first = lst.head
    qm.dequeue_message_end(desc, first, False)
    assert lst.peek_locked == 0 and first.state is PositionState.AVAILABLE


def test_seek_with_id_direct(qm, queue):
    ids = put(qm, queue, "a", "b")
    seek = qm.seek_available_message_position_with_id
    assert seek(queue, ids[0], True, MessageSeekAction.SEEK_NEXT)[1].lookup_identifier == ids[1]
    assert seek(queue, 999, True, MessageSeekAction.SEEK_CURRENT) == (st.MQ_ERROR_MESSAGE_NOT_FOUND, None)


def test_available_count_tracks_states(qm, queue, desc):
    put(qm, queue, "a", "b", "c")
    lst = queue.message_position_list
    r = qm.dequeue_message_begin(desc, 0)
    assert lst.available_count == 2
    qm.purge_queue(queue)
    assert lst.available_count == 0 and len(lst) == 1
    qm.dequeue_message_end(desc, r.position, False)
    assert len(lst) == 0


def test_peek_next_queue_not_available(qm, queue, desc):
    cursor = qm.open_cursor(desc)
    qm.delete_queue(queue)
    assert qm.peek_next_message(desc, 0, cursor=cursor).status == st.MQ_ERROR_QUEUE_NOT_AVAILABLE
    assert qm.peek_next_message(desc, 0).status == st.MQ_ERROR_QUEUE_NOT_AVAILABLE


def test_peek_next_without_cursor_is_invalid_parameter(qm, queue, desc):
    assert qm.peek_next_message(desc, 0).status == st.MQ_ERROR_INVALID_PARAMETER


def test_status_names():
    assert st.status_name(0xC00E001B) == "MQ_ERROR_IO_TIMEOUT"
    assert st.status_name(0xC0000225) == "STATUS_NOT_FOUND"
    assert st.status_name(0x12345678) == "0x12345678"
    assert st.MQ_ERROR_MESSAGE_NOT_FOUND == 0xC00E0088 and st.MQ_ERROR_INVALID_HANDLE == 0xC00E0007


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.integers(0, 5000), unique=True, max_size=400), hs.sampled_from([4, 16, 1000]),
       hs.lists(hs.integers(-2, 5002), min_size=1, max_size=20))
def test_neighbour_search_matches_a_linear_scan(values, load, keys):
    sorted_list = SortedList(values)
    sorted_list._reset(load)
    ordered = sorted(values)
    for key in keys:
        assert _next_after(sorted_list, key) == next((v for v in ordered if v > key), None)
        assert _prev_before(sorted_list, key) == next((v for v in reversed(ordered) if v < key), None)


def test_insert_many_equals_inserting_each_and_refuses_duplicates(queue):
    import pytest
    from shared_adm.compact import pack
    from shared_adm.message import Message
    from shared_adm.queue import MessagePosition, MessagePositionList
    states = [PositionState.AVAILABLE, PositionState.LOCKED, PositionState.PURGE_PENDING]
    positions = [MessagePosition(queue, key, states[key % 3], pack(Message(allow_peek_when_locked=key % 2 == 1)))
                 for key in range(1000, 0, -7)]
    one_by_one, bulk = MessagePositionList(queue), MessagePositionList(queue)
    for position in positions:
        one_by_one.insert(position)
    bulk.insert_many(positions)
    assert list(bulk) == list(one_by_one)
    assert (bulk.available_count, bulk.peek_locked) == (one_by_one.available_count, one_by_one.peek_locked)
    with pytest.raises(ValueError):
        bulk.insert_many(positions[:100])
    with pytest.raises(ValueError):
        MessagePositionList(queue).insert_many(positions[:100] + positions[:1])
