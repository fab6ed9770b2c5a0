"""Initialization from the Store (MS-MQDMPR 3.1.3) and recording of Persistent changes (3.1.1, 3.1.1.11)."""
from __future__ import annotations

import uuid

from hypothesis import given, settings, strategies as hs

from shared_adm.clock import ManualScheduler
from shared_adm.compact import pack, unpack
from shared_adm.enums import MessageSeekAction
from shared_adm.message import DeliveryGuarantee, Message
from shared_adm.queue_manager import QueueManager
from shared_adm.store.base import PackedStoredMessage, StoredMessage

from .conftest import DENY_NONE, QNAME, RECEIVE, bodies, put

REC = DeliveryGuarantee.RECOVERABLE


def restart(store, sched=None):
    qm = QueueManager(store=store, scheduler=sched or ManualScheduler())
    qm.initialize()
    return qm


def test_identifier_and_queues_survive_restart(qm, queue, store):
    again = restart(store)
    assert again.identifier == qm.identifier
    q = again.queue_by_pathname(r".\private$\q")
    assert q.identifier == queue.identifier and q.private_queue_number == queue.private_queue_number
    assert again.system_deadletter_queue.identifier == qm.system_deadletter_queue.identifier
    assert len(again.queue_collection) == len(qm.queue_collection)


def test_recoverable_messages_survive_express_do_not(qm, queue, store):
    put(qm, queue, "rec1", delivery_guarantee=REC)
    put(qm, queue, "express")
    put(qm, queue, "rec2", priority=6, delivery_guarantee=REC)
    again = restart(store)
    q = again.queue_by_pathname(r".\private$\q")
    assert bodies(again, q) == [(b"rec2", "Available"), (b"rec1", "Available")]
    assert q.total_bytes > 0


def test_purge_pending_is_recorded_and_deleted_at_restart(qm, queue, desc, store):
    put(qm, queue, "a", "b", "c", delivery_guarantee=REC)
    qm.dequeue_message_begin(desc, 0)
    qm.dequeue_message_begin(desc, 0)
    assert sorted(m.state for m in store.load().messages) == ["Available", "Locked", "Locked"]
    qm.purge_queue(queue)
    assert [m.state for m in store.load().messages] == ["PurgePending", "PurgePending"]
    again = restart(store)
    assert bodies(again, again.queue_by_pathname(r".\private$\q")) == []
    assert store.load().messages == []


def test_restart_releases_locks(qm, queue, desc, store):
    put(qm, queue, "a", delivery_guarantee=REC)
    qm.dequeue_message_begin(desc, 0)
    again = restart(store)
    q = again.queue_by_pathname(r".\private$\q")
    assert bodies(again, q) == [(b"a", "Available")]
    assert [m.state for m in store.load().messages] == ["Available"]


def test_sequential_id_never_goes_backwards(qm, queue, store):
    ids = put(qm, queue, "a", "b", delivery_guarantee=REC)
    store.set_sequential_id(0)                   # a store that lost the counter
    again = restart(store)
    q = again.queue_by_pathname(r".\private$\q")
    (new,) = put(again, q, "c", delivery_guarantee=REC)
    assert new & ((1 << 56) - 1) > max(i & ((1 << 56) - 1) for i in ids)


def test_a_sequential_id_past_its_7_bytes_never_gives_a_lookup_identifier_the_queue_still_holds(qm, queue, store):
    low = (1 << 56) - 1
    ids = put(qm, queue, "a", "b", "c", delivery_guarantee=REC)          # low 7 bytes 1, 2, 3
    store.set_sequential_id((1 << 64) - 1)      # 64 bits (3.1.1.1): the next one wraps the 7 bytes to 0
    again = restart(store)
    q = again.queue_by_pathname(r".\private$\q")
    new = put(again, q, "d", "e", delivery_guarantee=REC)
    assert [i & low for i in new] == [0, 4]                # 1, 2 and 3 are still in the queue: skipped
    assert len(set(ids + new)) == 5 and again.sequential_id == 4      # 64 bits, wrapped (3.1.1.1)
    assert [body for body, _ in bodies(again, q)] == [b"d", b"a", b"b", b"c", b"e"]     # LookupIdentifier order
    q.quota = 0                                 # a refused enqueue leaves SequentialID as it was
    assert again.enqueue_message(q, Message(body=b"f")) == 1 and again.sequential_id == 4


def test_a_wrapped_sequential_id_is_stored_by_sqlite_and_survives_a_restart(tmp_path):
    from shared_adm.store import SqliteStore
    store = SqliteStore(tmp_path / "data")
    qm = restart(store)
    _, queue = qm.create_queue(r".\private$\q")
    put(qm, queue, "a", delivery_guarantee=REC)
    store.set_sequential_id((1 << 64) - 1)
    store.close()
    store = SqliteStore(tmp_path / "data")
    again = restart(store)
    q = again.queue_by_pathname(r".\private$\q")
    new = put(again, q, "b", "c", delivery_guarantee=REC)    # wraps to 0, skips 1 (a's), takes 2
    assert [i & ((1 << 56) - 1) for i in new] == [0, 2]
    store.close()
    store = SqliteStore(tmp_path / "data")
    third = restart(store)
    assert third.sequential_id == 2 and len(third.queue_by_pathname(r".\private$\q").message_position_list) == 3
    store.close()


def test_ack_deletes_from_store_nack_restores_state(qm, queue, desc, store):
    put(qm, queue, "a", "b", delivery_guarantee=REC)
    r1 = qm.dequeue_message_begin(desc, 0)
    r2 = qm.dequeue_message_begin(desc, 0)
    qm.dequeue_message_end(desc, r1.position, True)
    qm.dequeue_message_end(desc, r2.position, False)
    stored = store.load().messages
    assert [(m.message.body, m.state) for m in stored] == [(b"b", "Available")]


def test_transactional_enqueue_is_stored_only_at_commit(qm, queue, store):
    tx = qm.create_transaction(b"t")
    qm.enqueue_message(queue, Message(body=b"x", delivery_guarantee=REC), tx)
    assert store.load().messages == []
    qm.transaction_commit(b"t")
    assert [m.message.body for m in store.load().messages] == [b"x"]
    tx = qm.create_transaction(b"u")
    qm.enqueue_message(queue, Message(body=b"y", delivery_guarantee=REC), tx)
    qm.transaction_abort(b"u")
    assert [m.message.body for m in store.load().messages] == [b"x"]


def test_transaction_commit_stores_the_compact_form_the_position_holds(qm, queue, store, monkeypatch):
    """Commit (3.1.4.4) of a recoverable Enqueue hands the store the position's compact form as it is: no Message
    rebuilt and packed again."""
    puts = []
    monkeypatch.setattr(store, "put_message", lambda stored: puts.append(stored))
    qm.create_transaction(b"t")
    qm.enqueue_message(queue, Message(body=b"x", label="l", delivery_guarantee=REC), qm.transaction_collection[b"t"])
    (position,) = queue.message_position_list
    qm.transaction_commit(b"t")
    (stored,) = puts
    assert isinstance(stored, PackedStoredMessage) and stored.packed is position.packed
    assert (stored.lookup_identifier, stored.state, stored.message.body) == (position.lookup_identifier, "Available",
                                                                            b"x")


def test_stored_message_of_unknown_queue_is_dropped(store):
    store.put_message(StoredMessage(str(uuid.uuid4()), 5, "Available", Message(body=b"orphan")))
    qm = restart(store)
    assert store.load().messages == []
    assert all(len(q.message_position_list) == 0 for q in qm.queue_collection.values())


def test_ttbr_restarts_after_restart(qm, queue, store):
    put(qm, queue, "a", time_to_be_received=5, delivery_guarantee=REC)
    sched = ManualScheduler()
    again = restart(store, sched)
    q = again.queue_by_pathname(r".\private$\q")
    assert len(q.message_position_list) == 1
    sched.advance(5000)
    assert len(q.message_position_list) == 0 and store.load().messages == []


def test_lookup_after_restart_uses_the_same_ids(qm, queue, store):
    ids = put(qm, queue, "a", "b", delivery_guarantee=REC)
    again = restart(store)
    _, d = again.open_queue(QNAME, RECEIVE, DENY_NONE)
    r = again.read_message_by_lookup_identifier(d, ids[0], MessageSeekAction.SEEK_NEXT, True)
    assert r.message.body == b"b" and r.message.lookup_identifier == ids[1]


_messages = hs.builds(
    Message,
    identifier=hs.tuples(hs.uuids(), hs.integers(0, 2 ** 32 - 1)),
    priority=hs.integers(0, 7),
    delivery_guarantee=hs.sampled_from(DeliveryGuarantee),
    label=hs.text(max_size=20),
    body=hs.binary(max_size=64),
    allow_peek_when_locked=hs.booleans(),
    destination_queue_format_name=hs.none() | hs.text(max_size=30),
    response_multi_queue_format_name=hs.none() | hs.lists(hs.text(max_size=5), max_size=3),
    source_machine_identifier=hs.uuids(),
    tracing_queue_identifier=hs.none() | hs.uuids(),
    transaction_identifier=hs.none() | hs.binary(min_size=1, max_size=20),
    transactional_message_sequence_identifier=hs.none() | hs.tuples(hs.integers(0, 2 ** 32), hs.integers(0, 2 ** 32)),
    extra=hs.dictionaries(hs.text(max_size=5), hs.integers() | hs.binary(max_size=4), max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(_messages)
def test_compact_form_round_trips(message):
    assert unpack(pack(message)) == message


def test_compact_form_falls_back_for_odd_values():
    odd = Message(destination_queue_manager_identifier="not-a-uuid", extra={"x": {1, 2}})
    blob = pack(odd)
    assert blob[:1] == b"P" and unpack(blob) == odd


def test_initialize_twice_is_refused(qm):
    import pytest
    with pytest.raises(RuntimeError, match="twice"):
        qm.initialize()
    assert qm.queue_manager_state == "Ready"


def test_initialization_streams_the_stored_messages_when_the_store_can(qm, queue, store):
    """3.1.3 at scale: with a store offering load_stream the messages are consumed one by one, not as one list."""
    put(qm, queue, "low", priority=1, delivery_guarantee=REC)
    put(qm, queue, "high", priority=6, delivery_guarantee=REC)
    consumed = []

    def load_stream():
        snapshot = store.load()
        messages = snapshot.messages

        def one_by_one():
            for stored in reversed(messages):            # any order: positions are sorted by LookupIdentifier
                consumed.append(stored.lookup_identifier)
                yield stored
        snapshot.messages = one_by_one()
        return snapshot
    store.load_stream = load_stream
    again = restart(store)
    q = again.queue_by_pathname(r".\private$\q")
    assert len(consumed) == 2
    assert bodies(again, q) == [(b"high", "Available"), (b"low", "Available")]
