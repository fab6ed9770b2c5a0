"""SqliteStore against MemoryStore as the model: random mutation sequences, commits and reopens (MS-MQDMPR 3.1.1)."""
import asyncio
import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from shared_adm.message import Message
from shared_adm.store import MemoryStore, SqliteStore, StoredMessage, StoredQueue
from shared_adm.store import sqlite as sqlite_module
from tests.store.durable_rows import crash_copy

QUEUES = ["q-a", "q-b"]
STATES = ["Available", "Locked", "PurgePending"]

_queue = st.sampled_from(QUEUES)
_lookup = st.integers(1, 4)
_ops = st.one_of(
    st.tuples(st.just("put_message"), _queue, _lookup, st.sampled_from(STATES), st.binary(max_size=8)),
    st.tuples(st.just("set_message_state"), _queue, _lookup, st.sampled_from(STATES)),
    st.tuples(st.just("delete_message"), _queue, _lookup),
    st.tuples(st.just("delete_messages"), _queue, st.lists(_lookup, max_size=4)),
    st.tuples(st.just("put_queue"), _queue, st.integers(0, 3)),
    st.tuples(st.just("delete_queue"), _queue),
    st.tuples(st.just("set_sequential_id"), st.integers(0, 2**64 - 1)),
    st.tuples(st.just("set_queue_manager_identifier"), st.sampled_from(["qm-1", "qm-2"])),
    st.tuples(st.just("durable")),
    st.tuples(st.just("reopen")),
    st.tuples(st.just("crash")),
    st.tuples(st.just("ack"), _queue, _lookup),
)


def _apply(store, op):
    kind = op[0]
    if kind == "put_message":
        _, queue, lookup, state, body = op
        store.put_message(StoredMessage(queue, lookup, state, Message(lookup_identifier=lookup, body=body)))
    elif kind == "put_queue":
        store.put_queue(StoredQueue(op[1], {"quota": op[2]}))
    else:
        getattr(store, kind)(*op[1:])


def _view(snapshot):
    return (snapshot.queue_manager_identifier, snapshot.sequential_id,
            {q.identifier: q.attributes for q in snapshot.queues},
            {(m.queue_identifier, m.lookup_identifier): (m.state, m.message) for m in snapshot.messages})


def _crashed_view(store, copy_dir):
    """What a kill -9 right now would leave (crash_copy), reopened."""
    copy = SqliteStore(crash_copy(store, copy_dir))
    try:
        return _view(copy.load())
    finally:
        copy.close()


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(_ops, max_size=40))
def test_sqlite_store_matches_the_memory_model(ops):
    """"crash": after durable(), the files as a kill -9 leaves them (deletions still in the delete journal: the writer
    does not move them during the test) reopen to the model."""
    model = MemoryStore()
    apply_after, sqlite_module._APPLY_AFTER_S = sqlite_module._APPLY_AFTER_S, 3600.0
    with tempfile.TemporaryDirectory() as data_dir, tempfile.TemporaryDirectory() as crash_root:
        store = SqliteStore(data_dir, commit_interval_ms=60_000)
        try:
            for number, op in enumerate(ops):
                if op[0] == "durable":
                    asyncio.run(store.durable())
                elif op[0] == "ack":            # durable, then a deletion alone: made durable by the journal
                    asyncio.run(store.durable())
                    _apply(store, ("delete_message", *op[1:]))
                    _apply(model, ("delete_message", *op[1:]))
                    asyncio.run(store.durable())
                elif op[0] == "crash":
                    asyncio.run(store.durable())
                    assert _crashed_view(store, os.path.join(crash_root, str(number))) == _view(model.load())
                elif op[0] == "reopen":
                    store.close()
                    store = SqliteStore(data_dir, commit_interval_ms=60_000)
                    assert _view(store.load()) == _view(model.load())
                else:
                    _apply(store, op)
                    _apply(model, op)
            assert _view(store.load()) == _view(model.load())
        finally:
            store.close()
            sqlite_module._APPLY_AFTER_S = apply_after
