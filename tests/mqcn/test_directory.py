"""shared_adm.directory: the MS-MQDMPR directory events (3.1.7.1.18–25) over the memory and embedded backends."""
import uuid

import pytest

from shared_adm.clock import ManualScheduler
from shared_adm.directory import (AttributeFilter, ChangeOperation, Directory, DirectoryObject,
                                  DirectoryOperationResult as R, DirectoryStoreError, FilterOperator,
                                  MemoryDirectory, SqliteDirectory, decode_value, encode_value, equals)
from shared_adm.queue_manager import QueueManager
from shared_adm.store.sqlite import SqliteStore

A, B, C = (uuid.UUID(int=i) for i in (1, 2, 3))


@pytest.fixture(params=["memory", "sqlite"])
def backend(request, tmp_path):
    if request.param == "memory":
        yield MemoryDirectory()
        return
    store = SqliteStore(tmp_path)
    store.close()
    directory = SqliteDirectory(tmp_path)
    yield directory
    directory.close()


def test_create_read_write_delete(backend):
    d = Directory(backend)
    obj = DirectoryObject("Queue", A, {"Pathname": "h\\q", "Quota": 5, "Security": b"\x01", "QueueManager": B,
                                       "List": [A, b"x", None, 1.5]})
    assert d.create_directory_object(obj) == (R.SUCCESS, A)
    assert d.create_directory_object(obj) == (R.OBJECT_ALREADY_EXISTS, None)
    status, read = d.read_directory("Queue", [equals("Identifier", A)])
    assert status is R.SUCCESS and read == obj
    assert d.write_directory(DirectoryObject("Queue", A, {"Quota": 6, "Label": "new"})) is R.SUCCESS
    assert d.read_directory("Queue", [equals("Quota", 6)])[1].attributes["Label"] == "new"
    assert d.read_directory("Queue", [equals("Identifier", A)], ["Quota"])[1].attributes == {"Quota": 6}
    assert d.read_directory("Queue", [equals("Identifier", A)], ["Missing"])[0] is R.ATTRIBUTE_NOT_FOUND
    assert d.write_directory(DirectoryObject("Queue", A, {"Quota": 1}), ["Label"]) is R.ATTRIBUTE_NOT_FOUND
    assert d.write_directory(DirectoryObject("Queue", C, {"Quota": 1})) is R.OBJECT_NOT_FOUND
    assert d.delete_directory_object(obj) is R.SUCCESS
    assert d.delete_directory_object(obj) is R.OBJECT_NOT_FOUND
    assert d.read_directory("Queue", [equals("Identifier", A)]) == (R.OBJECT_NOT_FOUND, None)


def test_filters_and_the_first_match(backend):
    d = Directory(backend)
    for ident, quota in ((A, 1), (B, 2), (C, 3)):
        d.create_directory_object(DirectoryObject("Queue", ident, {"Quota": quota, "Label": "x"}))
    def ids(op, value):
        status, handle = d.read_directory_begin("Queue", [AttributeFilter("Quota", op, value)])
        found = []
        while (r := d.read_directory_next(handle))[0] is R.SUCCESS:
            found.append(r[1].identifier)
        assert d.read_directory_next(handle)[0] is R.END_OF_DATA and d.read_directory_end(handle) is R.SUCCESS
        return sorted(found)
    assert ids(FilterOperator.LESS_THAN, 3) == [A, B] and ids(FilterOperator.GREATER_THAN_OR_EQUAL, 2) == [B, C]
    assert ids(FilterOperator.NOT_EQUALS, 2) == [A, C] and ids(FilterOperator.LESS_THAN_OR_EQUAL, 1) == [A]
    assert ids(FilterOperator.GREATER_THAN, "text") == []                  # a type clash never matches
    assert d.read_directory("Queue")[1].identifier in (A, B, C)          # no filter: the first object
    assert d.read_directory("QueueManager") == (R.OBJECT_NOT_FOUND, None)
    assert d.read_directory_end(999) is R.GENERIC_ERROR and d.read_directory_next(999)[0] is R.GENERIC_ERROR


def test_sort_order(backend):
    d = Directory(backend)
    for ident, quota in ((A, 2), (B, 3), (C, 1)):
        d.create_directory_object(DirectoryObject("Queue", ident, {"Quota": quota}))
    _, handle = d.read_directory_begin("Queue", None, ["Quota"], [(1, False)])
    order = [d.read_directory_next(handle)[1].attributes["Quota"] for _ in range(3)]
    assert order == [3, 2, 1]


def test_bad_objects_are_refused():
    d = Directory(MemoryDirectory())
    with pytest.raises(ValueError, match="unknown directory object type"):
        d.create_directory_object(DirectoryObject("Printer", A))
    with pytest.raises(ValueError, match="must be a GUID"):
        d.create_directory_object(DirectoryObject("Queue", "not-a-guid"))
    with pytest.raises(TypeError, match="not storable"):
        d.write_directory(DirectoryObject("Queue", A, {"x": object()}))


def test_value_encoding_round_trips():
    value = {"g": A, "b": b"\x00\xff", "l": [1, "s", None, True], "m": {"k": B}}
    assert decode_value(encode_value(value)) == value
    with pytest.raises(ValueError, match="unknown tagged"):
        decode_value({"$weird": 1})


def test_notifications_for_public_queues_and_the_queue_manager_only():
    sent = []
    d = Directory(MemoryDirectory(), send_change_notification=lambda op, obj: sent.append((op, obj.identifier)))
    d.create_directory_object(DirectoryObject("Queue", A, {"QueueType": "Public"}))
    d.create_directory_object(DirectoryObject("Queue", B, {"QueueType": "Private"}))
    d.create_directory_object(DirectoryObject("QueueManager", C, {"QueueManagerQuota": 1}))
    d.write_directory(DirectoryObject("Queue", A, {"QueueType": "Public", "Label": "l"}))
    d.write_directory(DirectoryObject("Queue", B, {"QueueType": "Private", "Label": "l"}))
    d.write_directory(DirectoryObject("QueueManager", C, {"QueueManagerQuota": 2}))
    d.delete_directory_object(DirectoryObject("Queue", A, {"QueueType": "Public"}))
    d.delete_directory_object(DirectoryObject("Queue", B, {"QueueType": "Private"}))
    assert sent == [(ChangeOperation.QUEUE_CREATION, A), (ChangeOperation.QUEUE_UPDATE, A),
                    (ChangeOperation.QUEUE_MANAGER_UPDATE, C), (ChangeOperation.QUEUE_DELETION, A)]


def test_a_failing_notifier_does_not_undo_the_operation():
    def boom(op, obj):
        raise RuntimeError("transport down")
    d = Directory(MemoryDirectory(), send_change_notification=boom)
    assert d.create_directory_object(DirectoryObject("Queue", A, {"QueueType": "Public"}))[0] is R.SUCCESS


def test_offline_reads_from_the_queue_collection_and_the_online_timer_recovers():
    scheduler = ManualScheduler()
    qm = QueueManager(scheduler=scheduler, computer_name="qm2qm")
    qm.initialize()
    _, queue = qm.create_queue("qm2qm\\pub")
    backend = MemoryDirectory()
    backend.create(DirectoryObject("QueueManager", qm.identifier, {"QueueManagerQuota": 77}))
    backend.create(DirectoryObject("Queue", queue.identifier, {"Label": "from-ds", "Quota": 9}))
    d = Directory(backend, scheduler=scheduler, online_timer_ms=1000, local_queue_manager=qm)
    backend.connected = False
    assert d.read_directory("Queue", [equals("Identifier", queue.identifier)])[0] is R.DIRECTORY_NOT_CONNECTED
    assert d.directory_offline and scheduler.pending() == 1
    status, obj = d.read_directory("Queue", [equals("Pathname", "qm2qm\\pub")])          # offline: QueueCollection
    assert status is R.SUCCESS and obj.identifier == queue.identifier
    assert d.read_directory("QueueManager", [equals("Identifier", qm.identifier)])[0] is R.SUCCESS
    assert d.read_directory("Site")[0] is R.DIRECTORY_NOT_CONNECTED
    scheduler.advance(1000)                                                     # still offline: re-armed
    assert d.directory_offline and scheduler.pending() == 1
    backend.connected = True
    scheduler.advance(1000)                                                     # Check Directory Online
    assert not d.directory_offline and qm.queue_manager_quota == 77
    assert (queue.label, queue.quota) == ("from-ds", 9)


def test_embedded_directory_lives_in_the_store_file_and_survives_reopen(tmp_path):
    store = SqliteStore(tmp_path)
    first = SqliteDirectory(tmp_path)
    first.create(DirectoryObject("Site", A, {"Name": "s"}))
    first.close()
    store.close()
    again = SqliteStore(tmp_path)                      # the store still opens with the extra table
    again.load()
    second = SqliteDirectory(tmp_path / "qm2qm.sqlite3")
    assert [o.attributes for o in second.objects("Site")] == [{"Name": "s"}]
    second.close()
    again.close()


def test_embedded_directory_refuses_a_file_that_is_not_a_store(tmp_path):
    with pytest.raises(DirectoryStoreError, match="no qm2qm store"):
        SqliteDirectory(tmp_path)
    import sqlite3
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(DirectoryStoreError, match="not a qm2qm store"):
        SqliteDirectory(other)


def test_corrupt_rows_are_named(tmp_path):
    store = SqliteStore(tmp_path)
    d = SqliteDirectory(tmp_path)
    d._conn.execute("INSERT INTO directory_objects VALUES ('Queue', ?, '[1')", (str(A),))
    with pytest.raises(DirectoryStoreError, match="corrupt directory_objects row"):
        d.objects("Queue")
    d.close()
    store.close()
