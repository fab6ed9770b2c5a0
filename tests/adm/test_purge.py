"""Purge Queue (MS-MQDMPR 3.1.7.1.7) deletes every Available position in bulk: the same queue, store and counters as
Message Position Deleted (3.1.7.2.1) of each, in list order, and PurgePending for every other position."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as hs

from shared_adm import status as st
from shared_adm.clock import ManualScheduler
from shared_adm.enums import MessageClass, PositionState
from shared_adm.message import DeliveryGuarantee, Message
from shared_adm.queue_manager import QueueManager
from shared_adm.store.base import MemoryStore

from .conftest import DENY_NONE, QNAME, RECEIVE, bodies, put
from .test_subqueues import POISON, move_to_poison, open_ok


def reference_purge(qm: QueueManager, queue) -> None:
    """Purge Queue as 3.1.7.1.7 words it, one position at a time (what purge_queue did before the bulk delete)."""
    for position in list(queue.message_position_list):
        if position.state is PositionState.AVAILABLE:
            qm.message_position_deleted(queue, position, MessageClass.NACK_QUEUE_PURGED)
        elif position.state is not PositionState.PURGE_PENDING:
            qm._set_state(queue, position, PositionState.PURGE_PENDING)


_message = hs.tuples(hs.integers(0, 7), hs.booleans(), hs.booleans(), hs.binary(max_size=40))
_step = hs.one_of(hs.tuples(hs.just("put"), _message), hs.tuples(hs.just("lock"), hs.integers(0, 63)),
                  hs.tuples(hs.just("nack"), hs.integers(0, 63)), hs.just(("purge",)))


def _run(steps, purge):
    """A queue manager after ``steps``, purging with ``purge``; returns what the comparison reads."""
    store = MemoryStore()
    qm = QueueManager(store=store, scheduler=ManualScheduler(), computer_name="qm2qm")
    qm.initialize()
    status, queue = qm.create_queue(r".\private$\q")
    status, desc = qm.open_queue(QNAME, RECEIVE, DENY_NONE)
    locked, every = [], []
    for step in steps:
        if step[0] == "put":
            priority, recoverable, peekable, body = step[1]
            guarantee = DeliveryGuarantee.RECOVERABLE if recoverable else DeliveryGuarantee.EXPRESS
            message = Message(body=body, priority=priority, delivery_guarantee=guarantee,
                              allow_peek_when_locked=peekable)
            assert qm.enqueue_message(queue, message) == 0
            every.append(queue.message_position_list.get(message.lookup_identifier))
        elif step[0] == "lock":
            result = qm.dequeue_message_begin(desc, 0)
            if result.status == st.MQ_OK:
                locked.append(result.position)
        elif step[0] == "nack" and locked:
            position = locked.pop(step[1] % len(locked))
            assert qm.dequeue_message_end(desc, position, False) == st.MQ_OK
        elif step[0] == "purge":
            assert purge(qm, queue) in (None, st.MQ_OK)
    lst = queue.message_position_list
    return ([(p.lookup_identifier, p.state) for p in lst], [p.state for p in every], queue.total_bytes,
            qm.total_bytes, lst.available_count, lst.peek_locked,
            sorted((lookup_id, m.state) for (_, lookup_id), m in store._messages.items()))


@settings(max_examples=200, deadline=None)
@given(hs.lists(_step, max_size=40))
def test_bulk_purge_leaves_what_deleting_each_available_position_leaves(steps):
    assert _run(steps, QueueManager.purge_queue) == _run(steps, reference_purge)


def test_purge_of_a_queue_with_locked_messages_keeps_them_in_order_as_purge_pending(qm, queue, desc):
    put(qm, queue, "a", "b", "c", "d", "e")
    second = [qm.dequeue_message_begin(desc, 0).position for _ in range(2)][1]
    qm.dequeue_message_end(desc, qm.dequeue_message_begin(desc, 0).position, False)   # "c" Available again
    assert qm.purge_queue(queue) == st.MQ_OK
    assert bodies(qm, queue) == [(b"a", "PurgePending"), (b"b", "PurgePending")]
    assert queue.total_bytes == 0 and qm.total_bytes == 0
    assert qm.dequeue_message_end(desc, second, True) == st.MQ_OK
    assert bodies(qm, queue) == [(b"a", "PurgePending")]


def test_purge_of_a_closed_subqueue_that_it_empties_drops_the_subqueue(qm, queue):
    first, = put(qm, queue, "a")
    holder = open_ok(qm, POISON)
    poison = holder.queue_reference
    move_to_poison(qm, queue, first)
    assert qm.close_queue(holder) == st.MQ_OK
    assert list(queue.subqueue_collection) == [poison]            # its message keeps it
    assert qm.purge_queue(poison) == st.MQ_OK
    assert list(queue.subqueue_collection) == [] and qm.queue_by_pathname(r".\private$\q;poison") is None
