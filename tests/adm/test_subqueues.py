"""Subqueues (MS-MQDMPR 3.1.1.2 SubqueueCollection, MS-MQMQ 2.1.1 "QueueName;Subqueue"; shared_adm/subqueues.py):
created by the first Open Queue naming one, gone once empty and closed, reached by moves only, and durable."""
from __future__ import annotations

import os

from shared_adm import status as st
from shared_adm.clock import ManualScheduler
from shared_adm.enums import PositionState, QueueAccessType
from shared_adm.format_name import parse
from shared_adm.message import DeliveryGuarantee, Message
from shared_adm.queue_manager import QueueManager

from .conftest import DENY_NONE, PEEK, QNAME, RECEIVE, SEND, bodies, put

POISON = QNAME + ";poison"
MOVE = QueueAccessType.MOVE_ACCESS
REC = DeliveryGuarantee.RECOVERABLE


def restart(store):
    qm = QueueManager(store=store, scheduler=ManualScheduler(), computer_name="qm2qm")
    qm.initialize()
    return qm


def open_ok(qm, name, access=RECEIVE):
    status, desc = qm.open_queue(name, access, DENY_NONE)
    assert status == st.MQ_OK
    return desc


def move_to_poison(qm, queue, lookup_id):
    """What R_MoveMessage does after its checks: Move Message (3.1.7.1.16) into the subqueue."""
    poison = qm.subqueue(queue, "poison")
    return qm.move_message(queue.message_position_list.get(lookup_id), poison)


def test_subqueue_name_is_parsed_from_a_direct_format_name_as_written():
    name = parse(r"DIRECT=OS:qm2qm\private$\q;Poison")
    assert (name.kind, name.path, name.suffix, name.subqueue) == ("direct", r"private$\q", "poison", "Poison")
    assert parse(r"DIRECT=TCP:127.0.0.1\q;retry").subqueue == "retry"
    assert parse(r"DIRECT=OS:qm2qm\private$\q;journal").subqueue == ""


def test_subqueue_names_outside_the_abnf_or_on_other_format_names_are_illegal():
    for text in (QNAME + ";" + "x" * 33, QNAME + ";a b", QNAME + ";", QNAME + ";a;b", QNAME + ";journal;x",
                 "PRIVATE={00000000-0000-0000-0000-000000000001}\\00000004;", QNAME + ';a"b', QNAME + ";a+b",
                 QNAME + ";deadletter",
                 "PRIVATE=" + "{%s}" % ("0" * 8 + "-0000-0000-0000-" + "0" * 12) + "\\00000004;poison",
                 "PUBLIC={00000000-0000-0000-0000-000000000001};poison"):
        assert parse(text).kind == "illegal", text


def test_open_queue_creates_the_subqueue_implicitly(qm, queue):
    desc = open_ok(qm, POISON)
    poison = desc.queue_reference
    assert poison.parent_queue is queue and list(queue.subqueue_collection) == [poison]
    assert poison.pathname == r"private$\q;poison" and poison.subqueue_name == "poison"
    assert poison.identifier not in qm.queue_collection and qm.queue_by_identifier(poison.identifier) is poison
    assert open_ok(qm, QNAME + ";POISON").queue_reference is poison       # names compare without case


def test_subqueue_shares_the_queues_transactional_attribute_and_has_no_journal(qm):
    _, queue = qm.create_queue(r".\private$\tx", transactional=True)
    poison = open_ok(qm, r"DIRECT=OS:qm2qm\private$\tx;poison").queue_reference
    assert poison.transactional and poison.journal_queue_reference is None


def test_open_queue_of_a_subqueue_for_send_is_unsupported(qm, queue):
    assert qm.open_queue(POISON, SEND, DENY_NONE) == (st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, None)
    assert list(queue.subqueue_collection) == []


def test_open_queue_of_a_subqueue_of_a_missing_queue_is_queue_not_found(qm):
    assert qm.open_queue(r"DIRECT=OS:qm2qm\private$\nowhere;poison", RECEIVE, DENY_NONE)[0] == \
        st.MQ_ERROR_QUEUE_NOT_FOUND


def test_system_queues_have_no_subqueues(qm):
    from shared_adm.enums import RemoteReadState
    notify = r"DIRECT=OS:qm2qm\private$\notify_queue$;x"
    status, _ = qm.open_queue(notify, RECEIVE, DENY_NONE, RemoteReadState.OPENED)
    assert status == st.MQ_ERROR_QUEUE_NOT_FOUND
    assert list(qm.queue_by_pathname(r".\private$\notify_queue$").subqueue_collection) == []
    assert qm.open_queue(r"DIRECT=OS:qm2qm\SYSTEM$;DEADLETTER;x", RECEIVE, DENY_NONE)[0] == \
        st.MQ_ERROR_QUEUE_NOT_FOUND


def test_a_sharing_violation_on_an_existing_subqueue_keeps_it(qm, queue):
    from shared_adm.enums import QueueShareMode
    exclusive = qm.open_queue(POISON, RECEIVE, QueueShareMode.DENY_RECEIVE)[1]
    assert qm.open_queue(POISON, RECEIVE, DENY_NONE)[0] == st.MQ_ERROR_SHARING_VIOLATION
    assert list(queue.subqueue_collection) == [exclusive.queue_reference]


def test_an_empty_subqueue_is_gone_when_its_last_descriptor_closes(qm, queue, store):
    first, second = open_ok(qm, POISON), open_ok(qm, POISON, PEEK)
    poison = first.queue_reference
    assert any(q.identifier == poison.store_identifier for q in store.load().queues)
    qm.close_queue(first)
    assert list(queue.subqueue_collection) == [poison]
    qm.close_queue(second)
    assert list(queue.subqueue_collection) == [] and qm.queue_by_identifier(poison.identifier) is None
    assert all(q.identifier != poison.store_identifier for q in store.load().queues)
    assert qm.subqueue(queue, "POISON") is None                     # not found by its name either
    again = open_ok(qm, POISON).queue_reference
    assert again is not poison and qm.subqueue(queue, "poison") is again


def test_a_subqueue_holding_messages_outlives_its_descriptors_and_goes_with_its_last_message(qm, queue):
    lookup_id, = put(qm, queue, "bad")
    desc = open_ok(qm, POISON)
    assert move_to_poison(qm, queue, lookup_id) == st.MQ_OK
    poison = desc.queue_reference
    qm.close_queue(desc)
    assert qm.subqueue(queue, "poison") is poison and bodies(qm, poison) == [(b"bad", "Available")]
    reader = open_ok(qm, POISON)
    assert reader.queue_reference is poison
    result = qm.dequeue_message(reader, 0)
    assert result.status == st.MQ_OK and result.message.body == b"bad"
    qm.close_queue(reader)
    assert list(queue.subqueue_collection) == []


def test_move_into_a_subqueue_and_back_keeps_the_message_and_its_lookup_identifier(qm, queue):
    lookup_id, = put(qm, queue, "m")
    holder = open_ok(qm, POISON)
    assert move_to_poison(qm, queue, lookup_id) == st.MQ_OK
    poison = holder.queue_reference
    assert bodies(qm, queue) == [] and bodies(qm, poison) == [(b"m", "Available")]
    assert qm.move_message(poison.message_position_list.get(lookup_id), queue) == st.MQ_OK
    assert bodies(qm, queue) == [(b"m", "Available")] and queue.message_position_list.get(lookup_id)


def test_moves_between_a_queue_and_its_subqueues_leave_its_quota_as_it_was(qm):
    _, queue = qm.create_queue(r".\private$\small", quota=1)
    holder = open_ok(qm, r"DIRECT=OS:qm2qm\private$\small;poison")
    lookup_id, = put(qm, queue, b"x" * 600)
    assert qm.move_message(queue.message_position_list.get(lookup_id), holder.queue_reference) == st.MQ_OK
    from shared_adm.message import Message
    assert qm.enqueue_message(queue, Message(body=b"y" * 600)) == 1       # the queue's quota counts its subqueues


def test_a_subqueue_takes_no_enqueue(qm, queue):
    import pytest
    from shared_adm.message import Message
    poison = open_ok(qm, POISON).queue_reference
    with pytest.raises(ValueError):
        qm.enqueue_message(poison, Message(body=b"x"))


def test_delete_queue_deletes_its_subqueues_and_their_messages(qm, queue, store):
    lookup_id, = put(qm, queue, "m", delivery_guarantee=REC)
    reader = open_ok(qm, POISON)
    move_to_poison(qm, queue, lookup_id)
    poison = reader.queue_reference
    assert qm.delete_queue(queue) == st.MQ_OK
    assert qm.queue_by_identifier(poison.identifier) is None and reader.queue_reference is None
    assert qm._subqueue_names == {}                                 # the name index lets go of them too
    assert store.load().messages == [] and all(";" not in q.attributes["pathname"] or "system$" in
                                               q.attributes["pathname"] for q in store.load().queues)
    assert qm.close_queue(reader) == st.MQ_OK


def test_subqueue_messages_survive_a_restart(qm, queue, store):
    keep, express = put(qm, queue, "keep", delivery_guarantee=REC) + put(qm, queue, "express")
    holder = open_ok(qm, POISON)
    move_to_poison(qm, queue, keep)
    move_to_poison(qm, queue, express)
    again = restart(store)
    parent = again.queue_by_pathname(r".\private$\q")
    poison = again.queue_by_pathname(r".\private$\q;poison")
    assert poison is not None and poison.parent_queue is parent and list(parent.subqueue_collection) == [poison]
    assert bodies(again, poison) == [(b"keep", "Available")]
    assert holder.queue_reference.identifier == poison.identifier
    assert parent.subqueue_bytes == poison.total_bytes > 0 and parent.total_bytes == 0     # the quota counts both


def test_a_queue_s_quota_counts_its_subqueues_messages(qm, queue):
    first, = put(qm, queue, "x" * 700)
    open_ok(qm, POISON)
    move_to_poison(qm, queue, first)
    queue.quota = 1                                         # KB: the moved message still fills most of it
    poison = qm.subqueue(queue, "poison")
    assert queue.subqueue_bytes == poison.total_bytes >= 700 and queue.total_bytes == 0
    assert qm.enqueue_message(queue, Message(body=b"y" * 400)) == 1
    assert qm.enqueue_message(queue, Message(body=b"y" * 50)) == 0


def test_a_stored_subqueue_left_empty_is_gone_after_a_restart(qm, queue, store):
    open_ok(qm, POISON)                 # never closed: the process stopped
    again = restart(store)
    assert again.queue_by_pathname(r".\private$\q;poison") is None
    assert all(";poison" not in q.attributes["pathname"] for q in store.load().queues)


def pending_move_into_a_closed_subqueue(qm, queue):
    """A transaction's Move of a message into ;poison, whose only handle then closes: (the subqueue, transaction)."""
    lookup_id, = put(qm, queue, "m")
    holder = open_ok(qm, POISON)
    transaction = qm.create_transaction(os.urandom(16))
    assert qm.move_message(queue.message_position_list.get(lookup_id), holder.queue_reference, transaction) == 0
    qm.close_queue(holder)
    assert list(queue.subqueue_collection) == []              # empty and closed: gone, while the move is pending
    return holder.queue_reference, transaction


def test_a_transactional_move_into_a_subqueue_closed_meanwhile_still_lands_at_commit(qm, queue):
    poison, transaction = pending_move_into_a_closed_subqueue(qm, queue)
    assert qm.transaction_commit(transaction.identifier) == st.MQ_OK
    assert qm.subqueue(queue, "poison") is poison and bodies(qm, poison) == [(b"m", "Available")]


def test_a_transactional_move_whose_target_was_deleted_leaves_the_message_where_it_was(qm, queue):
    _, other = qm.create_queue(r".\private$\other")
    lookup_id, = put(qm, queue, "m")
    transaction = qm.create_transaction(os.urandom(16))
    assert qm.move_message(queue.message_position_list.get(lookup_id), other, transaction) == st.MQ_OK
    qm.delete_queue(other)
    assert qm.transaction_commit(transaction.identifier) == st.MQ_OK
    assert bodies(qm, queue) == [(b"m", "Available")]


def test_a_message_moved_into_a_subqueue_still_expires(qm, queue, sched):
    lookup_id, = put(qm, queue, "short", time_to_be_received=5)
    holder = open_ok(qm, POISON)
    move_to_poison(qm, queue, lookup_id)
    sched.advance(6_000)
    assert bodies(qm, holder.queue_reference) == []


def test_purge_of_the_queue_leaves_its_subqueues(qm, queue):
    first, second = put(qm, queue, "a", "b")
    holder = open_ok(qm, POISON)
    move_to_poison(qm, queue, first)
    qm.purge_queue(queue)
    assert bodies(qm, queue) == [] and bodies(qm, holder.queue_reference) == [(b"a", "Available")]


def test_queue_by_pathname_finds_an_existing_subqueue_only(qm, queue):
    assert qm.queue_by_pathname(r".\private$\q;poison") is None
    poison = open_ok(qm, POISON).queue_reference
    assert qm.queue_by_pathname(r"qm2qm\private$\q;POISON") is poison
    assert list(queue.subqueue_collection) == [poison]


def test_receive_from_a_subqueue_deletes_with_ack_receive(qm, queue):
    lookup_id, = put(qm, queue, "m")
    reader = open_ok(qm, POISON)
    move_to_poison(qm, queue, lookup_id)
    result = qm.dequeue_message_begin(reader, 0)
    assert result.status == st.MQ_OK
    assert reader.queue_reference.message_position_list.get(lookup_id).state is PositionState.LOCKED
    qm.dequeue_message_end(reader, result.position, True)
    assert bodies(qm, reader.queue_reference) == []


def test_a_transactional_move_into_a_subqueue_made_anew_meanwhile_lands_in_the_new_one(qm, queue):
    old, transaction = pending_move_into_a_closed_subqueue(qm, queue)
    again = open_ok(qm, POISON).queue_reference         # made anew: another Queue
    assert again is not old
    assert qm.transaction_commit(transaction.identifier) == st.MQ_OK
    assert list(queue.subqueue_collection) == [again] and bodies(qm, again) == [(b"m", "Available")]


def test_no_subqueue_takes_the_name_of_a_reserved_suffix(qm, queue):
    for name in ("journal", "DeadLetter", "deadxact"):
        assert qm.subqueue(queue, name, create=True) is None
    assert open_ok(qm, QNAME + ";JOURNAL").queue_reference is queue.journal_queue_reference
    assert list(queue.subqueue_collection) == []


def test_a_new_subqueue_past_max_subqueues_answers_insufficient_resources_until_one_goes(qm, queue):
    qm.max_subqueues = 2
    first, _ = open_ok(qm, QNAME + ";a"), open_ok(qm, QNAME + ";b")
    assert qm.open_queue(QNAME + ";c", RECEIVE, DENY_NONE) == (st.MQ_ERROR_INSUFFICIENT_RESOURCES, None)
    assert open_ok(qm, QNAME + ";a").queue_reference is first.queue_reference       # an existing one still opens
    assert len(queue.subqueue_collection) == 2
    for desc in list(first.queue_reference.open_queue_descriptor_collection):
        qm.close_queue(desc)                                                          # ;a goes
    assert open_ok(qm, QNAME + ";c").queue_reference.subqueue_name == "c"


def test_stored_subqueues_past_max_subqueues_are_all_loaded(qm, queue, store):
    for name in ("a", "b", "c"):
        lookup_id, = put(qm, queue, name, delivery_guarantee=REC)
        holder = open_ok(qm, QNAME + ";" + name)
        qm.move_message(queue.message_position_list.get(lookup_id), holder.queue_reference)
    again = QueueManager(store=store, scheduler=ManualScheduler(), computer_name="qm2qm")
    again.max_subqueues = 1
    again.initialize()                  # a restart never refuses what the store holds
    assert len(again.queue_by_pathname(r".\private$\q").subqueue_collection) == 3
