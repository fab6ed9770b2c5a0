"""A store the queue manager cannot start from (MS-MQDMPR 3.1.3 Initialization) is refused with a StoreError that
names the file, the queue and what is wrong; and a load stopped part-way, by that or anything else, leaves the store
closable: the streaming load's read transaction and lock end with it."""
from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import sys
import threading

import pytest

from shared_adm.clock import ManualScheduler
from shared_adm.enums import QueueType
from shared_adm.message import Message
from shared_adm.queue import Queue
from shared_adm.queue_manager import QueueManager
from shared_adm.store import SqliteStore, StoredMessage, StoredQueue, StoreError
from shared_adm.store.sqlite import DB_FILE_NAME

Q = "6f1d3c52-0b7e-4f4e-9a51-2d3c4b5a6978"
QM = "0f1d3c52-0b7e-4f4e-9a51-2d3c4b5a6978"


def _stored(data_dir, messages=3):
    store = SqliteStore(data_dir)
    store.set_queue_manager_identifier(QM)
    store.put_queue(StoredQueue(Q, Queue(pathname="private$\\orders").persistent_attributes()))
    for lookup in range(1, messages + 1):
        store.put_message(StoredMessage(Q, lookup, "Available", Message(lookup_identifier=lookup, body=b"x" * 10)))
    store.close()
    return data_dir / DB_FILE_NAME


def _execute(path, sql, args=()):
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(sql, args)
        conn.commit()


def _set_attributes(path, change):
    with contextlib.closing(sqlite3.connect(path)) as conn:
        tag, attributes = json.loads(conn.execute("SELECT attributes FROM queues").fetchone()[0])
        change(attributes)
        conn.execute("UPDATE queues SET attributes = ?", (json.dumps([tag, attributes]),))
        conn.commit()


def _closes(store):
    """store.close() returns within 10 s (it would wait forever for a lock a suspended load still held)."""
    closer = threading.Thread(target=store.close, daemon=True)
    closer.start()
    closer.join(10)
    return not closer.is_alive()


def _initialize_fails(data_dir, match):
    store = SqliteStore(data_dir)
    qm = QueueManager(store=store, scheduler=ManualScheduler())
    try:
        qm.initialize()
    except StoreError as exc:       # closed while the error is handled, its traceback alive (as App.start does)
        assert _closes(store)
        assert re.search(match, str(exc)), exc
        return str(exc)
    pytest.fail("initialize() did not raise")


@pytest.mark.parametrize("identifier", ["not-a-guid", "", "0f1d3c52-0b7e-4f4e-9a51"])
def test_a_queue_manager_identifier_that_is_not_a_guid_is_refused(data_dir, identifier):
    path = _stored(data_dir)
    _execute(path, "UPDATE meta SET value = ? WHERE key = 'queue_manager_identifier'", (identifier,))
    message = _initialize_fails(data_dir, "corrupt queue manager identifier")
    assert str(path) in message and repr(identifier) in message


@pytest.mark.parametrize("change, says", [
    (lambda a: a.pop("pathname"), "no pathname"),
    (lambda a: a.update(pathname=""), "pathname '' is not a non-empty string"),
    (lambda a: a.update(queue_type="Bogus"), "queue_type 'Bogus' is not one of Private, Public, System"),
    (lambda a: a.update(type="xyz"), "type 'xyz' is not a GUID string"),
    (lambda a: a.update(security="zz"), "security 'zz' is not a hexadecimal string"),
    (lambda a: a.update(label=5), "label 5 is not a string"),
    (lambda a: a.update(quota="lots"), "quota 'lots' is not an integer"),
    (lambda a: a.update(journal_quota=1.5), "journal_quota 1.5 is not an integer"),
    (lambda a: a.update(base_priority=True), "base_priority True is not an integer"),
    (lambda a: a.update(journaling=1), "journaling 1 is not true or false"),
    (lambda a: a.update(transactional="yes"), "transactional 'yes' is not true or false"),
    (lambda a: a.update(multicast_address=7), "multicast_address 7 is not a string or null"),
    (lambda a: a.update(create_time=None), "create_time None is not an integer"),
])
def test_queue_attributes_of_the_wrong_kind_are_refused_naming_the_queue_and_the_attribute(data_dir, change, says):
    path = _stored(data_dir)
    _set_attributes(path, change)
    message = _initialize_fails(data_dir, "corrupt attributes of queue")
    assert str(path) in message and Q in message and says in message, message


def test_a_queue_identifier_that_is_not_a_guid_is_refused(data_dir):
    path = _stored(data_dir, messages=0)
    _execute(path, "UPDATE queues SET identifier = 'orders'")
    assert "the queue identifier 'orders' is not a GUID" in _initialize_fails(data_dir, "corrupt attributes of queue")


@pytest.mark.parametrize("other, says", [
    (dict(pathname="PRIVATE$\\Orders", private_queue_number=9), "its path name "),    # path names ignore case
    (dict(pathname="private$\\other", private_queue_number=5), "its private queue number 5 is queue "),
])
def test_two_stored_queues_with_one_path_name_or_private_number_are_refused(data_dir, other, says):
    path = _stored(data_dir, messages=0)
    _set_attributes(path, lambda a: a.update(private_queue_number=5))
    store = SqliteStore(data_dir)
    store.put_queue(StoredQueue("1f1d3c52-0b7e-4f4e-9a51-2d3c4b5a6978",
                                Queue(pathname="x", queue_type=QueueType.PRIVATE).persistent_attributes() | other))
    store.close()
    message = _initialize_fails(data_dir, "corrupt queue")
    assert says in message and "is queue " in message and str(path) in message, message


def test_unknown_attributes_and_every_kind_persistent_attributes_writes_still_load(data_dir):
    path = _stored(data_dir, messages=1)
    _set_attributes(path, lambda a: a.update(future_attribute="from a later version", multicast_address="234.1.1.1:8001",
                                             security="0102", privacy_level="Body", base_priority=-3))
    store = SqliteStore(data_dir)
    qm = QueueManager(store=store, scheduler=ManualScheduler())
    qm.initialize()
    queue = next(q for q in qm.queue_collection.values() if q.pathname == "private$\\orders")
    assert (queue.multicast_address, queue.security, queue.privacy_level, queue.base_priority) == \
        ("234.1.1.1:8001", b"\x01\x02", "Body", -3)
    assert len(queue.message_position_list) == 1
    store.close()


def test_an_error_while_the_messages_stream_leaves_the_store_closable(data_dir, monkeypatch):
    _stored(data_dir)
    store = SqliteStore(data_dir)
    qm = QueueManager(store=store, scheduler=ManualScheduler())

    def interrupted(self, batches, highest):
        next(iter(batches))
        raise KeyboardInterrupt("Ctrl-C mid-load")
    monkeypatch.setattr(QueueManager, "_load_messages", interrupted)
    try:
        qm.initialize()
    except KeyboardInterrupt:       # closed while the error is handled, its traceback alive (as App.start does)
        assert _closes(store)
    else:
        pytest.fail("initialize() did not raise")


def test_a_load_stream_closed_early_and_a_load_that_fails_part_way_leave_the_store_closable(data_dir, monkeypatch):
    _stored(data_dir)
    store = SqliteStore(data_dir)
    snapshot = store.load_stream()
    next(iter(snapshot.messages))
    snapshot.messages.close()
    assert _closes(store)

    store = SqliteStore(data_dir)
    calls = []

    def plain(self):
        calls.append(self)
        if len(calls) == 2:
            raise MemoryError("out of memory at the second message")
        return StoredMessage(self.queue_identifier, self.lookup_identifier, self.state, self.message)
    monkeypatch.setattr("shared_adm.store.sqlite._LoadedMessage.plain", plain)
    try:
        store.load()
    except MemoryError:
        assert _closes(store)
    else:
        pytest.fail("load() did not raise")


def test_serve_refuses_a_corrupt_queue_in_one_line_and_does_not_hang(data_dir):
    from tests.product.conftest import server_env
    path = _stored(data_dir)
    _set_attributes(path, lambda a: a.update(queue_type="Bogus"))
    proc = subprocess.run([sys.executable, "-m", "qm2qm", "serve", "--data-dir", str(data_dir), "--port", "0",
                           "--admin-port", "0", "--epm-port", "0", "--qmcomm-port", "0"],
                          capture_output=True, text=True, env=server_env(), timeout=60)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("qm2qm: error: ") and "Traceback" not in proc.stderr
    assert f"{path}: corrupt attributes of queue '{Q}': queue_type 'Bogus'" in proc.stderr
