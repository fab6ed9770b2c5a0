"""The Store contract (shared_adm/store/base.py) on MemoryStore and SqliteStore alike (MS-MQDMPR 3.1.1)."""
import uuid

from shared_adm.message import DeliveryGuarantee, Message
from shared_adm.store import StoredMessage, StoredQueue

Q1 = "6f1d3c52-0b7e-4f4e-9a51-2d3c4b5a6978"
Q2 = "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d"


def _msg(queue, lookup, state="Available", **attrs):
    return StoredMessage(queue, lookup, state, Message(lookup_identifier=lookup, **attrs))


def _by_key(snapshot):
    return {(m.queue_identifier, m.lookup_identifier): m for m in snapshot.messages}


async def test_empty_store_loads_empty(store):
    snapshot = store.load()
    assert snapshot.queue_manager_identifier is None
    assert snapshot.sequential_id == 0
    assert snapshot.queues == [] and snapshot.messages == []


async def test_identifier_and_sequential_id_keep_last_value(store):
    store.set_queue_manager_identifier("11111111-2222-3333-4444-555555555555")
    store.set_sequential_id(7)
    store.set_sequential_id(2**64 - 1)
    await store.durable()
    snapshot = store.load()
    assert snapshot.queue_manager_identifier == "11111111-2222-3333-4444-555555555555"
    assert snapshot.sequential_id == 2**64 - 1


async def test_queue_put_replace_delete(store):
    store.put_queue(StoredQueue(Q1, {"pathname": "host\\private$\\a", "quota": 5, "transactional": False}))
    store.put_queue(StoredQueue(Q2, {"pathname": "host\\private$\\b"}))
    store.put_queue(StoredQueue(Q1, {"pathname": "host\\private$\\a", "quota": 9, "label": "L"}))
    await store.durable()
    queues = {q.identifier: q.attributes for q in store.load().queues}
    assert queues == {Q1: {"pathname": "host\\private$\\a", "quota": 9, "label": "L"},
                      Q2: {"pathname": "host\\private$\\b"}}
    store.delete_queue(Q2)
    await store.durable()
    assert [q.identifier for q in store.load().queues] == [Q1]


async def test_messages_states_and_deletes(store):
    store.put_message(_msg(Q1, 1, body=b"one", label="first"))
    store.put_message(_msg(Q1, 2, body=b"two", delivery_guarantee=DeliveryGuarantee.RECOVERABLE))
    store.put_message(_msg(Q2, 1, body=b"other queue"))
    store.set_message_state(Q1, 2, "Locked")
    store.set_message_state(Q2, 1, "PurgePending")
    store.delete_message(Q1, 1)
    await store.durable()
    got = _by_key(store.load())
    assert set(got) == {(Q1, 2), (Q2, 1)}
    assert got[(Q1, 2)].state == "Locked"
    assert got[(Q1, 2)].message.body == b"two"
    assert got[(Q1, 2)].message.delivery_guarantee is DeliveryGuarantee.RECOVERABLE
    assert got[(Q2, 1)].state == "PurgePending"


async def test_state_of_unknown_or_deleted_message_is_ignored(store):
    store.set_message_state(Q1, 99, "Locked")
    store.put_message(_msg(Q1, 5))
    store.delete_message(Q1, 5)
    store.set_message_state(Q1, 5, "Locked")
    store.delete_message(Q1, 1234)
    await store.durable()
    assert store.load().messages == []


async def test_delete_messages_is_delete_message_of_each(store):
    for lookup in range(1, 6):
        store.put_message(_msg(Q1, lookup, body=bytes([lookup])))
    store.put_message(_msg(Q2, 3, body=b"other queue"))
    await store.durable()
    store.put_message(_msg(Q1, 7))                  # still pending in this batch
    store.set_message_state(Q1, 2, "Locked")
    store.delete_messages(Q1, [1, 2, 7, 1234])
    store.delete_messages(Q1, [])
    store.set_message_state(Q1, 1, "Locked")        # a deleted message's state change stays a no-op
    await store.durable()
    assert set(_by_key(store.load())) == {(Q1, 3), (Q1, 4), (Q1, 5), (Q2, 3)}
    store.put_message(_msg(Q1, 1, body=b"again"))   # a deleted key can be stored again
    await store.durable()
    assert _by_key(store.load())[(Q1, 1)].message.body == b"again"


async def test_put_replaces_message(store):
    store.put_message(_msg(Q1, 3, body=b"old"))
    await store.durable()
    store.put_message(_msg(Q1, 3, "Locked", body=b"new", priority=7))
    await store.durable()
    [stored] = store.load().messages
    assert (stored.state, stored.message.body, stored.message.priority) == ("Locked", b"new", 7)


async def test_delete_queue_deletes_its_messages_only(store):
    store.put_queue(StoredQueue(Q1, {}))
    store.put_queue(StoredQueue(Q2, {}))
    for lookup in range(1, 4):
        store.put_message(_msg(Q1, lookup))
        store.put_message(_msg(Q2, lookup))
    await store.durable()
    store.delete_queue(Q1)
    await store.durable()
    snapshot = store.load()
    assert [q.identifier for q in snapshot.queues] == [Q2]
    assert sorted(_by_key(snapshot)) == [(Q2, 1), (Q2, 2), (Q2, 3)]


async def test_recreated_queue_keeps_only_new_messages(store):
    store.put_queue(StoredQueue(Q1, {"label": "old"}))
    store.put_message(_msg(Q1, 1))
    await store.durable()
    store.put_message(_msg(Q1, 2))
    store.delete_queue(Q1)
    store.put_queue(StoredQueue(Q1, {"label": "new"}))
    store.put_message(_msg(Q1, 3))
    await store.durable()
    snapshot = store.load()
    assert [(q.identifier, q.attributes) for q in snapshot.queues] == [(Q1, {"label": "new"})]
    assert sorted(_by_key(snapshot)) == [(Q1, 3)]


async def test_message_attributes_round_trip(store):
    source = uuid.UUID("12345678-1234-5678-1234-567812345678")
    message = Message(lookup_identifier=10, identifier=(source, 42), body=bytes(range(256)) * 4,
                      label="l\u00e9bel", destination_queue_format_name="DIRECT=OS:h\\private$\\q",
                      response_multi_queue_format_name=["PUBLIC=" + str(source)],
                      transactional_message_sequence_identifier=(1, 2), tracing_queue_identifier=source,
                      extra={"raw": b"\x00\x01", "n": [1, 2]})
    store.put_message(StoredMessage(Q1, 10, "Available", message))
    await store.durable()
    [stored] = store.load().messages
    assert stored.message == message


async def test_flush_makes_mutations_visible(store):
    store.put_message(_msg(Q1, 1))
    store.flush()
    assert len(store.load().messages) == 1


async def test_durable_with_nothing_recorded_returns(store):
    await store.durable()
    await store.durable()
