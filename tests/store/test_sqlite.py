"""SqliteStore specifics: durability, group commit, coalescing, failures, corrupt files (MS-MQDMPR 3.1.1, 3.1.3)."""
import asyncio
import contextlib
import logging
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import uuid

import pytest

from shared_adm.message import Message
from shared_adm.store import SqliteStore, StoredMessage, StoredQueue, StoreError
from shared_adm.store.delete_journal import JOURNAL_SUFFIX
from shared_adm.store.sqlite import DB_FILE_NAME, SCHEMA_VERSION
from tests.store.durable_rows import durable_rows

Q = "6f1d3c52-0b7e-4f4e-9a51-2d3c4b5a6978"
BIAS = 1 << 63      # lookup identifiers are stored shifted into SQLite's signed range


def _msg(lookup, state="Available", body=b"x" * 100):
    return StoredMessage(Q, lookup, state, Message(lookup_identifier=lookup, body=body))


def _rows(path, sql):
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


def _fill(data_dir, count, body_size=1000):
    store = SqliteStore(data_dir)
    for lookup in range(1, count + 1):
        store.put_message(_msg(lookup, body=bytes([lookup % 256]) * body_size))
    store.close()
    return data_dir / DB_FILE_NAME


# ---- durability ------------------------------------------------------------------------------

async def test_durable_commits_are_visible_to_a_second_connection(data_dir):
    store = SqliteStore(data_dir, commit_interval_ms=60_000)
    store.put_queue(StoredQueue(Q, {"pathname": "h\\private$\\q"}))
    store.put_message(_msg(1))
    store.put_message(_msg(2, "Locked"))
    await store.durable()
    rows = _rows(store.path, "SELECT lookup_identifier + 9223372036854775807 + 1, state FROM messages"
                             " ORDER BY lookup_identifier")
    assert rows == [(1, 0), (2, 1)]
    assert _rows(store.path, "SELECT identifier FROM queues") == [(Q,)]
    store.close()


async def test_nothing_is_committed_before_durable_with_a_long_interval(data_dir):
    store = SqliteStore(data_dir, commit_interval_ms=60_000)
    store.put_message(_msg(1))
    assert _rows(store.path, "SELECT count(*) FROM messages") == [(0,)]
    await store.durable()
    assert _rows(store.path, "SELECT count(*) FROM messages") == [(1,)]
    store.close()


def _wait_for_rows(path, count):
    # a liveness check, not a speed check: the bound only stops a hung test
    for _ in range(3000):
        if _rows(path, "SELECT count(*) FROM messages") == [(count,)]:
            return True
        time.sleep(0.01)
    return False


def test_unawaited_mutations_are_committed_in_the_background(data_dir):
    store = SqliteStore(data_dir, commit_interval_ms=1)
    store.put_message(_msg(1))
    assert _wait_for_rows(store.path, 1)
    store.close()


class _CountingCondition:
    """The store's Condition, counting notify() calls (each wakes the writer thread: a futex and a GIL hand-off)."""

    def __init__(self, condition):
        self.condition, self.notified = condition, 0

    def notify(self, n=1):
        self.notified += 1
        self.condition.notify(n)

    def __getattr__(self, name):
        return getattr(self.condition, name)

    def __enter__(self):
        return self.condition.__enter__()

    def __exit__(self, *exc):
        return self.condition.__exit__(*exc)


def test_a_busy_writer_is_not_woken_per_batch_and_still_commits_unawaited_batches(data_dir, monkeypatch):
    monkeypatch.setattr("shared_adm.store.sqlite._AWAKE_AFTER_WRITES_S", 60.0)     # a slow machine stays "busy"
    store = SqliteStore(data_dir, commit_interval_ms=20)
    store.put_message(_msg(1))                          # wakes the sleeping writer: its clock starts
    assert _wait_for_rows(store.path, 1)
    counting = store._wake = _CountingCondition(store._wake)
    for lookup in range(2, 6):                          # each its own batch, while the writer looks every interval
        store.put_message(_msg(lookup))
        assert _wait_for_rows(store.path, lookup)
    assert counting.notified == 0
    store.close()


def test_an_idle_writer_sleeps_until_the_next_batch_wakes_it(data_dir, monkeypatch):
    monkeypatch.setattr("shared_adm.store.sqlite._AWAKE_AFTER_WRITES_S", 0.05)
    store = SqliteStore(data_dir, commit_interval_ms=5)
    store.put_message(_msg(1))
    assert _wait_for_rows(store.path, 1)
    for _ in range(300):                                # it stops looking once no batch came for 0.05 s
        if store._writer_idle:
            break
        time.sleep(0.01)
    assert store._writer_idle
    counting = store._wake = _CountingCondition(store._wake)
    store.put_message(_msg(2))
    assert counting.notified == 1
    assert _wait_for_rows(store.path, 2)
    store.close()


def test_reopen_after_close_returns_what_was_stored(data_dir):
    store = SqliteStore(data_dir)
    store.set_queue_manager_identifier("qm-guid")
    store.set_sequential_id(41)
    store.put_queue(StoredQueue(Q, {"pathname": "h\\private$\\q", "quota": 10, "journal": [1, "x"]}))
    for lookup in (2**64 - 1, 1, 2**63, 0):
        store.put_message(_msg(lookup, "Locked" if lookup == 1 else "Available"))
    store.close()       # close flushes: nothing above was awaited

    store = SqliteStore(data_dir)
    snapshot = store.load()
    store.close()
    assert snapshot.queue_manager_identifier == "qm-guid"
    assert snapshot.sequential_id == 41
    assert [(q.identifier, q.attributes) for q in snapshot.queues] == \
        [(Q, {"pathname": "h\\private$\\q", "quota": 10, "journal": [1, "x"]})]
    # enqueue order: lookup identifiers ascending over the whole unsigned 64-bit range
    assert [(m.lookup_identifier, m.state) for m in snapshot.messages] == \
        [(0, "Available"), (1, "Locked"), (2**63, "Available"), (2**64 - 1, "Available")]
    assert all(m.message.lookup_identifier == m.lookup_identifier for m in snapshot.messages)


def test_data_dir_or_file_path(tmp_path):
    store = SqliteStore(tmp_path / "nested" / "dir")
    assert store.path == tmp_path / "nested" / "dir" / DB_FILE_NAME
    store.close()
    store = SqliteStore(tmp_path / "explicit.db")
    assert store.path == tmp_path / "explicit.db" and store.path.is_file()
    store.close()


# ---- group commit and coalescing -------------------------------------------------------------

async def test_one_commit_covers_every_waiter(data_dir):
    store = SqliteStore(data_dir, commit_interval_ms=60_000)
    for lookup in range(1, 101):
        store.put_message(_msg(lookup))
    await asyncio.gather(*(store.durable() for _ in range(100)))
    assert store.commits == 1
    assert _rows(store.path, "SELECT count(*) FROM messages") == [(100,)]
    store.close()


async def test_concurrent_producers_share_commits(data_dir):
    store = SqliteStore(data_dir, commit_interval_ms=60_000)

    async def producer(first):
        for lookup in range(first, first + 20):
            store.put_message(_msg(lookup))
            await store.durable()
            assert _rows(store.path, f"SELECT count(*) FROM messages WHERE lookup_identifier = {lookup - BIAS}") \
                == [(1,)]

    await asyncio.gather(*(producer(p * 100) for p in range(1, 11)))
    # every durable() was answered only after its own message committed (checked above); how many
    # commits that took depends on thread scheduling (test_one_commit_covers_every_waiter pins it)
    assert _rows(store.path, "SELECT count(*) FROM messages") == [(200,)]
    store.close()


async def test_coalescing_within_one_batch(data_dir):
    store = SqliteStore(data_dir, commit_interval_ms=60_000)
    store.put_message(_msg(1))
    await store.durable()
    with contextlib.closing(sqlite3.connect(store.path)) as conn:
        conn.executescript("""
            CREATE TABLE audit (op TEXT, lookup INTEGER, state INTEGER);
            CREATE TRIGGER audit_insert AFTER INSERT ON messages
                BEGIN INSERT INTO audit VALUES ('insert', NEW.lookup_identifier, NEW.state); END;
            CREATE TRIGGER audit_update AFTER UPDATE ON messages
                BEGIN INSERT INTO audit VALUES ('update', NEW.lookup_identifier, NEW.state); END;
            CREATE TRIGGER audit_delete AFTER DELETE ON messages
                BEGIN INSERT INTO audit VALUES ('delete', OLD.lookup_identifier, OLD.state); END;
            CREATE TRIGGER audit_meta AFTER INSERT ON meta
                BEGIN INSERT INTO audit VALUES ('meta', NEW.value, NULL); END;
        """)
    store.put_message(_msg(2))              # put then delete: never reaches a row
    store.delete_message(Q, 2)
    store.put_message(_msg(3))              # put then state changes: one insert with the last state
    store.set_message_state(Q, 3, "Locked")
    store.set_message_state(Q, 3, "Available")
    store.set_message_state(Q, 3, "PurgePending")
    store.set_message_state(Q, 1, "Locked")     # two state changes of a stored message: one update
    store.set_message_state(Q, 1, "Available")
    for value in range(1, 101):
        store.set_sequential_id(value)          # only the last value is written
    await store.durable()
    assert store.commits == 2
    audit = sorted(_rows(store.path, "SELECT op, lookup, state FROM audit"))
    assert audit == sorted([("insert", 3 - BIAS, 2), ("update", 1 - BIAS, 0), ("meta", 100 - BIAS, None)])
    store.close()


async def test_delete_of_a_committed_message_then_put_again(data_dir):
    store = SqliteStore(data_dir, commit_interval_ms=60_000)
    store.put_message(_msg(1, body=b"first"))
    await store.durable()
    store.delete_message(Q, 1)
    store.put_message(_msg(1, body=b"second"))
    store.put_message(_msg(2))
    store.delete_message(Q, 2)
    await store.durable()
    assert [(m.lookup_identifier, m.message.body) for m in store.load().messages] == [(1, b"second")]
    store.put_message(_msg(1, body=b"third"))   # a re-put of a committed message, then its delete
    store.delete_message(Q, 1)
    await store.durable()
    assert store.load().messages == []
    store.close()


# ---- failures --------------------------------------------------------------------------------

def _limit_pages(store, pages):
    # SQLITE_FULL ("database or disk is full") is the store's own connection's limit: reach it directly
    with store._db_lock:
        store._conn.execute(f"PRAGMA max_page_count = {pages}")


async def _store_whose_next_commit_fails(data_dir):
    """A store with message 1 committed, no room left, and message 2 (200 KB) recorded: its commit fails FULL."""
    store = SqliteStore(data_dir, commit_interval_ms=60_000)
    store.put_message(_msg(1))
    await store.durable()
    _limit_pages(store, _rows(store.path, "PRAGMA page_count")[0][0])
    store.put_message(_msg(2, body=b"y" * 200_000))
    return store


async def test_commit_failure_reaches_every_waiter_and_is_retried(data_dir, caplog):
    store = await _store_whose_next_commit_fails(data_dir)
    with caplog.at_level(logging.ERROR, logger="shared_adm.store.sqlite"):
        results = await asyncio.gather(store.durable(), store.durable(), return_exceptions=True)
    assert all(isinstance(r, StoreError) and "commit failed" in str(r) and "full" in str(r) for r in results)
    assert str(store.path) in str(results[0])
    assert any("group commit" in record.message for record in caplog.records)
    with pytest.raises(StoreError, match="full"):
        store.flush()       # still not committed: a later waiter is not told otherwise
    store.put_message(_msg(3))
    with pytest.raises(StoreError, match="full"):
        await store.durable()
    _limit_pages(store, 1_000_000)
    await store.durable()   # the failed batches are committed in order, then the new one
    assert [m.lookup_identifier for m in store.load().messages] == [1, 2, 3]
    store.close()


async def test_a_full_disk_is_logged_as_one_line_naming_it_without_a_traceback(data_dir, caplog):
    store = await _store_whose_next_commit_fails(data_dir)
    with caplog.at_level(logging.ERROR, logger="shared_adm.store.sqlite"):
        with pytest.raises(StoreError):
            await store.durable()
    (record,) = [r for r in caplog.records if "group commit" in r.message]
    assert "database or disk is full" in record.getMessage() and not record.exc_info
    _limit_pages(store, 1_000_000)
    await store.durable()
    store.close()


async def test_close_raises_a_commit_failure_and_still_releases_the_store(data_dir):
    store = SqliteStore(data_dir, commit_interval_ms=60_000)
    store.put_message(_msg(1))
    store.flush()
    _limit_pages(store, _rows(store.path, "PRAGMA page_count")[0][0])
    store.put_message(_msg(2, body=b"z" * 200_000))
    with pytest.raises(StoreError, match="full"):
        store.close()
    reopened = SqliteStore(data_dir)        # the lock was released
    assert [m.lookup_identifier for m in reopened.load().messages] == [1]
    reopened.close()


async def test_cancelled_durable_does_not_disturb_later_waiters(data_dir):
    store = SqliteStore(data_dir, commit_interval_ms=60_000)
    store.put_message(_msg(1))
    task = asyncio.create_task(store.durable())
    await asyncio.sleep(0)
    task.cancel()
    store.put_message(_msg(2))
    await store.durable()
    assert len(store.load().messages) == 2
    store.close()


def test_bad_input_is_rejected_and_records_nothing(data_dir):
    store = SqliteStore(data_dir)
    with pytest.raises(ValueError, match="unknown MessagePosition state 'Bogus'"):
        store.put_message(_msg(1, "Bogus"))
    with pytest.raises(ValueError, match="64-bit unsigned"):
        store.put_message(_msg(-1))
    with pytest.raises(ValueError, match="64-bit unsigned"):
        store.set_message_state(Q, 2**64, "Locked")
    with pytest.raises(TypeError, match="lookup identifier must be an int"):
        store.delete_message(Q, "7")
    with pytest.raises(ValueError, match="64-bit unsigned"):
        store.set_sequential_id(-5)
    store.put_message(_msg(3))
    with pytest.raises(ValueError, match="64-bit unsigned"):       # all or nothing: 3 is not deleted either
        store.delete_messages(Q, [3, 2**64])
    with pytest.raises(TypeError, match="lookup identifier must be an int"):
        store.delete_messages(Q, [3, True])
    with pytest.raises(TypeError, match="queue identifier must be a str"):
        store.delete_messages(None, [3])
    store.delete_message(Q, 3)
    with pytest.raises(TypeError, match=r"Message\.extra"):
        store.put_message(StoredMessage(Q, 1, "Available", Message(extra={"f": 1.5j})))
    with pytest.raises(TypeError, match="cannot store"):
        store.put_queue(StoredQueue(Q, {"bad": object()}))
    with pytest.raises(TypeError, match="queue identifier must be a str"):
        store.set_message_state(uuid.UUID(int=1), 1, "Locked")
    with pytest.raises(TypeError, match="queue identifier must be a str"):
        store.delete_queue(None)
    with pytest.raises(ValueError, match="lone surrogate"):
        store.delete_message("q\udc80", 1)
    with pytest.raises(TypeError, match="queue manager identifier must be a str"):
        store.set_queue_manager_identifier(uuid.UUID(int=1))
    with pytest.raises(TypeError, match="put_message needs a StoredMessage, got NoneType"):
        store.put_message(None)
    with pytest.raises(TypeError, match="StoredMessage.message must be a Message, got bytes"):
        store.put_message(StoredMessage(Q, 1, "Available", b"raw"))
    with pytest.raises(TypeError, match="queue attributes must be a dict"):
        store.put_queue(StoredQueue(Q, [("a", 1)]))
    store.flush()           # nothing bad was recorded, so the commit succeeds
    snapshot = store.load()
    assert (snapshot.messages, snapshot.queues, snapshot.sequential_id) == ([], [], 0)
    store.close()


def test_use_after_close_is_a_store_error(data_dir):
    store = SqliteStore(data_dir)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.put_message(_msg(1))
    for keys in ([1, 2], []):
        with pytest.raises(StoreError, match="closed"):
            store.delete_messages(Q, keys)
    with pytest.raises(StoreError, match="closed"):
        store.flush()
    with pytest.raises(StoreError, match="closed"):
        store.load()


def test_constructor_options_are_checked(data_dir):
    with pytest.raises(ValueError, match="synchronous"):
        SqliteStore(data_dir, synchronous="OFF")
    with pytest.raises(ValueError, match="commit_interval_ms"):
        SqliteStore(data_dir, commit_interval_ms=-1)


def test_full_synchronous_mode_works(data_dir):
    store = SqliteStore(data_dir, synchronous="FULL")
    store.put_message(_msg(1))
    store.close()
    store = SqliteStore(data_dir)
    assert len(store.load().messages) == 1
    store.close()


# ---- files that are not a usable store -------------------------------------------------------

def _open_fails(path, match):
    with pytest.raises(StoreError, match=match) as info:
        store = SqliteStore(path)
        try:
            store.load()
        finally:
            store.close()
    return str(info.value)


@pytest.mark.parametrize("content", [b"garbage!" * 1000, b"short", os.urandom(100) + b"\x00" * 8000])
def test_garbage_file(data_dir, content):
    data_dir.mkdir()
    (data_dir / DB_FILE_NAME).write_bytes(content)
    message = _open_fails(data_dir, "not an SQLite database")
    assert str(data_dir / DB_FILE_NAME) in message
    assert (data_dir / DB_FILE_NAME).read_bytes() == content      # never overwritten


def test_truncated_file(data_dir):
    path = _fill(data_dir, 300)
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(size // 2)
    message = _open_fails(data_dir, "truncated")
    assert str(path) in message and f"{size // 2} bytes" in message


@pytest.mark.parametrize("how", ["emptied", "deleted"])
def test_an_emptied_or_deleted_database_beside_its_delete_journal_is_refused_not_started_empty(data_dir, how):
    path = _fill(data_dir, 3)
    journal = path.with_name(path.name + JOURNAL_SUFFIX)
    assert journal.exists()
    if how == "emptied":
        path.write_bytes(b"")
    else:
        path.unlink()
    message = _open_fails(data_dir, "is empty, but")
    assert journal.name in message and "Restore" in message
    journal.unlink()                            # the remedy the message names: start an empty store
    store = SqliteStore(data_dir)
    try:
        assert store.load().messages == []
    finally:
        store.close()


def test_an_empty_database_beside_a_non_empty_wal_is_refused(data_dir):
    path = _fill(data_dir, 3)
    path.with_name(path.name + JOURNAL_SUFFIX).unlink()
    path.write_bytes(b"")
    path.with_name(path.name + "-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(28))
    assert f"{path.name}-wal" in _open_fails(data_dir, "is empty, but")


def test_truncated_to_a_partial_header(data_dir):
    path = _fill(data_dir, 3)
    with open(path, "r+b") as handle:
        handle.truncate(60)
    assert str(path) in _open_fails(data_dir, "not an SQLite database")


def test_corrupt_pages_are_reported_not_skipped(data_dir):
    path = _fill(data_dir, 300)
    page_size = _rows(path, "PRAGMA page_size")[0][0]
    with open(path, "r+b") as handle:
        handle.seek(page_size * 4)
        handle.write(b"\xa5" * page_size * 20)
    assert str(path) in _open_fails(data_dir, "corrupt|malformed")


def test_newer_schema_version(data_dir):
    path = _fill(data_dir, 1)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
        conn.commit()
    message = _open_fails(data_dir, f"schema version {SCHEMA_VERSION + 1} was written by a newer qm2qm")
    assert str(path) in message


def test_sqlite_database_of_something_else(data_dir):
    data_dir.mkdir()
    with contextlib.closing(sqlite3.connect(data_dir / DB_FILE_NAME)) as conn:
        conn.execute("CREATE TABLE customers (name TEXT)")
        conn.commit()
    assert "customers" in _open_fails(data_dir, "not a qm2qm store")


def test_corrupt_message_row(data_dir):
    path = _fill(data_dir, 2)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE messages SET attributes = '{\"label\":[\"b\"' WHERE lookup_identifier = ?",
                     (2 - BIAS,))
        conn.execute("UPDATE messages SET state = 9 WHERE lookup_identifier = ?", (1 - BIAS,))
        conn.commit()
    assert "corrupt message 1" in _open_fails(data_dir, "unknown state 9")


@pytest.mark.parametrize("column, value, match", [
    ("attributes", '["l",' * 100_000 + "[]" + "]" * 100_000, "nested too deeply|not valid JSON"),
    ("attributes", '{"priority":' + "9" * 5000 + "}", "not valid JSON"),
    ("body", "text, not a BLOB", "corrupt message"),
    ("lookup_identifier", "seven", "wrong type"),
    ("queue_identifier", b"\x00\xff", "wrong type"),      # TEXT affinity keeps a BLOB a BLOB
])
def test_hostile_message_rows(data_dir, column, value, match):
    path = _fill(data_dir, 1)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        if column in ("attributes", "body"):    # a row in record.py's JSON form (schema 1's, schema 2's fallback)
            conn.execute("UPDATE messages SET compact = NULL, attributes = '{}', body = x'00'")
        conn.execute(f"UPDATE messages SET {column} = ?", (value,))
        conn.commit()
    assert str(path) in _open_fails(data_dir, match)


def test_corrupt_queue_attributes(data_dir):
    store = SqliteStore(data_dir)
    store.put_queue(StoredQueue(Q, {"label": "x"}))
    store.close()
    with contextlib.closing(sqlite3.connect(data_dir / DB_FILE_NAME)) as conn:
        conn.execute("UPDATE queues SET attributes = '[\"d\", 5]'")
        conn.commit()
    assert Q in _open_fails(data_dir, "corrupt attributes of queue")


def test_data_dir_below_a_regular_file(tmp_path):
    (tmp_path / "file").write_text("x")
    _open_fails(tmp_path / "file" / "data", "cannot create the data directory")


def test_database_path_is_a_directory(data_dir):
    (data_dir / DB_FILE_NAME).mkdir(parents=True)
    _open_fails(data_dir, "not a regular file")


def test_store_in_use_by_another_opener(data_dir):
    first = SqliteStore(data_dir)
    try:
        _open_fails(data_dir, "in use by another process")
    finally:
        first.close()


@contextlib.contextmanager
def _unprivileged():
    """Run as an unprivileged user: root ignores directory permissions."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_directory_not_writable():
    parent = tempfile.mkdtemp(prefix="qm2qm-store-")
    readonly = os.path.join(parent, "readonly")
    try:
        os.chmod(parent, 0o755)
        os.mkdir(readonly, 0o555)
        os.chmod(readonly, 0o555)
        with _unprivileged():
            message = _open_fails(readonly, "writable")
        assert readonly in message
    finally:
        os.rmdir(readonly)
        os.rmdir(parent)


@pytest.mark.parametrize("synchronous, where", [("NORMAL", "commit on the event loop"), ("FULL", "writer thread")])
async def test_a_dead_commit_path_fails_waiters_instead_of_hanging(data_dir, caplog, synchronous, where):
    """A defect in the commit path (not a commit error) fails every waiter and every later call; under NORMAL the
    event loop's thread commits what durable() waits for, under FULL the writer thread does."""
    store = SqliteStore(data_dir, commit_interval_ms=60_000, synchronous=synchronous)

    def broken_commit(batches, *stash_and_mark):
        raise RuntimeError("simulated bug in the writer")

    store._commit = broken_commit       # a defect inside the commit path itself, not a commit error
    store.put_message(_msg(1))
    with caplog.at_level(logging.CRITICAL, logger="shared_adm.store.sqlite"):
        with pytest.raises(StoreError, match=f"{where} died.*simulated bug"):
            await store.durable()
    assert any(f"{where} died" in record.message for record in caplog.records)
    with pytest.raises(StoreError, match=f"{where} died"):
        store.flush()
    with pytest.raises(StoreError, match=f"{where} died"):
        store.close()
    SqliteStore(data_dir).close()       # the file and its lock were released


def test_store_file_not_readable():
    parent = tempfile.mkdtemp(prefix="qm2qm-store-")
    path = os.path.join(parent, DB_FILE_NAME)
    try:
        os.chmod(parent, 0o777)
        SqliteStore(path).close()
        os.chmod(path, 0)
        with _unprivileged():
            message = _open_fails(path, "cannot open for reading and writing.*check the permissions")
        assert path in message
    finally:
        shutil.rmtree(parent)


def test_open_store_picks_the_implementation(data_dir):
    from shared_adm.store import MemoryStore, open_store
    assert isinstance(open_store(":memory:"), MemoryStore)
    store = open_store(data_dir, commit_interval_ms=1)
    assert isinstance(store, SqliteStore) and store.path == data_dir / DB_FILE_NAME
    store.close()


# ---- streamed load (3.1.3 at scale) ------------------------------------------------------------

def test_load_stream_yields_every_message_once_in_queue_then_lookup_order_as_an_iterator(data_dir):
    store = SqliteStore(data_dir)
    other = "00000000-0000-0000-0000-000000000001"      # sorts before Q
    for lookup in (5, 2, 9):
        store.put_message(_msg(lookup))
    store.put_message(StoredMessage(other, 7, "Locked", Message(lookup_identifier=7, body=b"o")))
    snapshot = store.load_stream()
    assert not isinstance(snapshot.messages, list)
    assert [(m.queue_identifier, m.lookup_identifier, m.state) for m in snapshot.messages] == \
        [(other, 7, "Locked"), (Q, 2, "Available"), (Q, 5, "Available"), (Q, 9, "Available")]
    assert list(snapshot.messages) == []                 # one-shot
    store.close()


def test_mutations_recorded_while_streaming_commit_once_the_stream_ends(data_dir):
    store = SqliteStore(data_dir, commit_interval_ms=0)
    for lookup in (1, 2):
        store.put_message(_msg(lookup))
    snapshot = store.load_stream()
    first = next(iter(snapshot.messages))
    store.delete_message(Q, first.lookup_identifier)     # what QueueManager.initialize does to a PurgePending one
    assert [m.lookup_identifier for m in snapshot.messages] == [2]
    store.flush()
    assert [m.lookup_identifier for m in store.load().messages] == [2]
    store.close()


def test_a_corrupt_row_met_while_streaming_names_the_message(data_dir):
    path = _fill(data_dir, 3)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE messages SET state = 9 WHERE lookup_identifier = ?", (3 - BIAS,))
        conn.commit()
    store = SqliteStore(data_dir)
    stream = store.load_stream().messages
    with pytest.raises(StoreError, match="corrupt message 3 .*unknown state 9"):
        list(stream)
    store.delete_message(Q, 3)
    store.flush()                                                   # the read lock was released
    assert [m.lookup_identifier for m in store.load_stream().messages] == [1, 2]
    store.close()


async def test_a_file_that_turned_unreadable_is_logged_without_a_traceback(data_dir, caplog, monkeypatch):
    # SQLite reports I/O on a file system that stopped accepting writes as plain DatabaseError ("malformed")
    store = SqliteStore(data_dir, commit_interval_ms=60_000)

    def broken(conn, batch):
        raise sqlite3.DatabaseError("database disk image is malformed")
    monkeypatch.setattr(store, "_apply", broken)
    store.put_message(_msg(1))
    with caplog.at_level(logging.ERROR, logger="shared_adm.store.sqlite"):
        with pytest.raises(StoreError, match="malformed"):
            await store.durable()
    (record,) = [r for r in caplog.records if "group commit" in r.message]
    assert "malformed" in record.getMessage() and not record.exc_info
    monkeypatch.undo()
    await store.durable()
    store.close()


# ---- group commit: who commits what durable() waits for, and when --------------------------------

def _locked_store(data_dir, count, noted=False, **options):
    """A store holding ``count`` committed messages, each then Locked (received, its ACK not yet in): the state
    written, or only noted (note_locked, as the queue manager does: Initialization makes Locked Available)."""
    store = SqliteStore(data_dir, commit_interval_ms=60_000, **options)
    for lookup in range(1, count + 1):
        store.put_message(_msg(lookup))
    store.flush()
    for lookup in range(1, count + 1):
        if noted:
            store.note_locked(Q, lookup)
        else:
            store.set_message_state(Q, lookup, "Locked")
    return store


LOCKED_WAYS = pytest.mark.parametrize("noted", [False, True], ids=["state-written", "noted"])


@LOCKED_WAYS
async def test_an_ack_waits_for_the_acks_of_recently_locked_messages_and_shares_their_commit(data_dir, noted):
    store = _locked_store(data_dir, 3, noted)
    before = store.commits
    store.delete_message(Q, 1)
    first = asyncio.ensure_future(store.durable())
    for lookup in (2, 3):                       # the other ACKs come loop turns later
        for _ in range(3):
            await asyncio.sleep(0)
        assert not first.done()
        store.delete_message(Q, lookup)
    await asyncio.gather(first, store.durable())
    assert store.commits == before + 1
    assert durable_rows(store.path) == set()
    store.close()


async def test_the_wait_for_other_acks_is_bounded_by_group_wait_ms(data_dir):
    store = _locked_store(data_dir, 2, group_wait_ms=5)
    store.delete_message(Q, 1)                  # message 2 stays Locked: its ACK never comes
    await asyncio.wait_for(store.durable(), 30)
    assert _rows(store.path, "SELECT lookup_identifier + 9223372036854775807 + 1, state FROM messages") == [(2, 1)]
    store.close()


@LOCKED_WAYS
async def test_an_ack_with_no_other_recent_lock_commits_at_the_end_of_the_loop_turn(data_dir, noted):
    store = _locked_store(data_dir, 1, noted, group_wait_ms=60_000)
    store.delete_message(Q, 1)
    await asyncio.wait_for(store.durable(), 30)     # not held: nothing else is Locked
    assert durable_rows(store.path) == set()
    store.close()


@LOCKED_WAYS
async def test_a_nack_of_the_last_recent_lock_releases_the_held_commit(data_dir, noted):
    store = _locked_store(data_dir, 2, noted, group_wait_ms=60_000)
    store.delete_message(Q, 1)
    waiting = asyncio.ensure_future(store.durable())
    for _ in range(3):
        await asyncio.sleep(0)
    assert not waiting.done()                   # held for message 2's ACK
    store.set_message_state(Q, 2, "Available")  # NACKed instead
    await asyncio.wait_for(waiting, 30)
    store.close()


@pytest.mark.parametrize("synchronous, on_loop_thread", [("NORMAL", True), ("FULL", False)])
async def test_under_normal_the_event_loops_thread_commits_what_durable_waits_for(data_dir, synchronous,
                                                                                 on_loop_thread):
    store = SqliteStore(data_dir, commit_interval_ms=60_000, synchronous=synchronous)
    threads = []
    store.on_commit = lambda seconds: threads.append(threading.get_ident())
    store.put_message(_msg(1))
    await store.durable()
    assert threads and (threads[-1] == threading.get_ident()) is on_loop_thread
    store.close()


async def test_a_writer_thread_commit_answers_its_waiters_before_it_checkpoints(data_dir):
    store = SqliteStore(data_dir, synchronous="FULL")       # FULL: the writer thread commits what durable() awaits
    checkpointing, release = threading.Event(), threading.Event()

    def slow_checkpoint():                      # a checkpoint's page copy and fsyncs, held until the test lets go
        checkpointing.set()
        release.wait(30)
    store._maybe_checkpoint = slow_checkpoint
    store.put_message(_msg(1))
    try:
        await asyncio.wait_for(store.durable(), 5)          # answered though the checkpoint has not finished
        assert checkpointing.wait(5)
    finally:
        release.set()
    store.close()


async def test_the_wal_is_checkpointed_off_the_event_loop_and_stays_bounded(data_dir):
    store = SqliteStore(data_dir, commit_interval_ms=60_000)
    assert store._conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)  # the store's: no checkpoint in a commit
    body = b"w" * 60_000
    wal = store.path.with_name(store.path.name + "-wal")
    for lookup in range(1, 401):                # about 24 MB through commits on this thread
        store.put_message(_msg(lookup, body=body))
        await store.durable()
        store.delete_message(Q, lookup)
    deadline = time.monotonic() + 30
    while os.path.getsize(wal) > 16 * 2**20 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)               # the writer thread's PASSIVE checkpoint lets the WAL restart
    assert os.path.getsize(wal) <= 16 * 2**20
    store.close()


async def test_a_commit_asked_on_a_loop_since_closed_does_not_strand_later_waiters(data_dir):
    store = SqliteStore(data_dir, commit_interval_ms=60_000)
    store.put_message(_msg(1))
    dead = asyncio.new_event_loop()
    store._register(dead)                       # its end-of-turn commit was scheduled on ``dead`` ...
    dead.close()                                # ... which never runs it
    store.put_message(_msg(2))
    await asyncio.wait_for(store.durable(), 30)
    assert _rows(store.path, "SELECT count(*) FROM messages") == [(2,)]
    store.close()
