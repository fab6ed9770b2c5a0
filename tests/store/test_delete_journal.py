"""SqliteStore's delete journal: a batch of deletions alone made durable by one append, moved into the database
later, replayed after a crash (MS-MQDMPR 3.1.1.11 deletions of MessagePositions; shared_adm/store/delete_journal.py)."""
import asyncio
import contextlib
import logging
import os
import sqlite3
import time

import pytest

from shared_adm.store import SqliteStore, StoreError
from shared_adm.store import sqlite as sqlite_module
from shared_adm.store.delete_journal import HEADER_SIZE, JOURNAL_SUFFIX, decode_records, encode_keys
from shared_adm.store.sqlite import DB_FILE_NAME, SCHEMA_VERSION
from tests.store.durable_rows import crash_copy, durable_rows, unapplied_deletions
from tests.store.test_sqlite import BIAS, Q, _msg, _rows

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def _lookups(path) -> list[int]:
    return sorted(lookup + BIAS for _, lookup in durable_rows(path))


def _db_lookups(path) -> list[int]:
    return sorted(row[0] + BIAS for row in _rows(path, "SELECT lookup_identifier FROM messages"))


@pytest.fixture
def no_apply(monkeypatch):
    """The writer leaves journaled deletions in the journal (as a crash would find them)."""
    monkeypatch.setattr(sqlite_module, "_APPLY_AFTER_S", 3600.0)


def _store_of(data_dir, count) -> SqliteStore:
    store = SqliteStore(data_dir, commit_interval_ms=60_000)
    for lookup in range(1, count + 1):
        store.put_message(_msg(lookup))
    store.flush()
    return store


async def _crashed_after_deletions(data_dir, target, count, deleted) -> os.PathLike:
    """A store of ``count`` messages, each of ``deleted`` then deleted and made durable (journaled, not moved):
    the files a kill -9 leaves then, copied to ``target`` (crash_copy)."""
    store = _store_of(data_dir, count)
    for lookup in deleted:
        store.delete_message(Q, lookup)
        await store.durable()
    crashed = crash_copy(store, target)
    store.close()
    return crashed


async def test_a_batch_of_deletions_alone_is_made_durable_by_one_journal_append(data_dir, no_apply):
    store = _store_of(data_dir, 3)
    commits, journaled = store.commits, store.journaled
    store.delete_message(Q, 1)
    store.delete_message(Q, 2)
    await store.durable()
    assert (store.commits, store.journaled) == (commits + 1, journaled + 1)
    assert _db_lookups(store.path) == [1, 2, 3]                 # not in the database yet ...
    assert sorted(lookup + BIAS for _, lookup in unapplied_deletions(store.path)) == [1, 2]
    assert _lookups(store.path) == [3]                          # ... but what a restart loads
    store.close()


async def test_a_batch_with_anything_but_deletions_commits_in_the_database(data_dir, no_apply):
    store = _store_of(data_dir, 2)
    store.delete_message(Q, 1)
    store.set_message_state(Q, 2, "Locked")
    await store.durable()
    assert store.journaled == 0 and _db_lookups(store.path) == [2]
    store.close()


async def test_the_writer_moves_journaled_deletions_into_the_database_within_apply_after(data_dir):
    store = _store_of(data_dir, 2)
    store.delete_message(Q, 1)
    await store.durable()
    assert store.journaled == 1
    deadline = time.monotonic() + 30
    while _db_lookups(store.path) != [2] and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert _db_lookups(store.path) == [2] and unapplied_deletions(store.path) == []
    store.close()


async def test_journaled_deletions_are_replayed_when_the_store_opens_after_a_crash(data_dir, tmp_path, no_apply):
    crashed = await _crashed_after_deletions(data_dir, tmp_path / "crashed", 5, (1, 3, 4))
    assert _db_lookups(crashed / DB_FILE_NAME) == [1, 2, 3, 4, 5]
    reopened = SqliteStore(crashed)
    assert sorted(m.lookup_identifier for m in reopened.load().messages) == [2, 5]
    assert _db_lookups(reopened.path) == [2, 5] and unapplied_deletions(reopened.path) == []
    reopened.close()


async def test_a_later_put_of_a_journaled_key_is_applied_after_its_deletion(data_dir, tmp_path, no_apply):
    """Every database transaction applies the journaled deletions before its own batches, and records how far."""
    store = _store_of(data_dir, 2)
    store.delete_message(Q, 1)
    await store.durable()                           # journaled, not applied
    store.put_message(_msg(1, body=b"again"))       # the same key stored again: a database commit
    await store.durable()
    assert _db_lookups(store.path) == [1, 2] and unapplied_deletions(store.path) == []
    crashed = crash_copy(store, tmp_path / "crashed")
    store.close()
    reopened = SqliteStore(crashed)
    [again] = [m for m in reopened.load().messages if m.lookup_identifier == 1]
    assert again.message.body == b"again"
    reopened.close()


async def test_a_record_cut_short_by_a_crash_is_ignored(data_dir, tmp_path, no_apply, caplog):
    crashed = await _crashed_after_deletions(data_dir, tmp_path / "crashed", 3, (1,))
    cut = encode_keys([(Q, 2 - BIAS)])
    with open(crashed / f"{DB_FILE_NAME}{JOURNAL_SUFFIX}", "ab") as journal:
        journal.write(cut[:-3])                     # its write never finished: its ACK was never answered
    with caplog.at_level(logging.WARNING, logger="shared_adm.store.delete_journal"):
        reopened = SqliteStore(crashed)
    assert "a record cut short" in caplog.text
    assert sorted(m.lookup_identifier for m in reopened.load().messages) == [2, 3]
    reopened.close()


async def test_a_record_whose_checksum_does_not_match_is_ignored_with_every_later_one(
        data_dir, tmp_path, no_apply, caplog):
    crashed = await _crashed_after_deletions(data_dir, tmp_path / "crashed", 4, (1, 2, 3))
    path = crashed / f"{DB_FILE_NAME}{JOURNAL_SUFFIX}"
    data = bytearray(path.read_bytes())
    second = HEADER_SIZE + len(encode_keys([(Q, 1 - BIAS)]))
    data[second + 9] ^= 0xFF                        # a byte of the second record's payload
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="shared_adm.store.delete_journal"):
        reopened = SqliteStore(crashed)
    assert "checksum does not match" in caplog.text
    assert sorted(m.lookup_identifier for m in reopened.load().messages) == [2, 3, 4]
    reopened.close()


async def test_a_journal_emptied_for_a_new_generation_before_its_header_was_written_replays_nothing(
        data_dir, tmp_path, no_apply):
    store = _store_of(data_dir, 2)
    crashed = crash_copy(store, tmp_path / "crashed")
    store.close()
    (crashed / f"{DB_FILE_NAME}{JOURNAL_SUFFIX}").write_bytes(b"")
    reopened = SqliteStore(crashed)
    assert sorted(m.lookup_identifier for m in reopened.load().messages) == [1, 2]
    reopened.close()


async def test_a_new_generation_is_replayed_from_its_start(data_dir, tmp_path, monkeypatch):
    """Once every record of a long journal is in the database the journal starts again, empty, as the next
    generation; the database still names the older one until its next move, so a crash replays the new one whole."""
    monkeypatch.setattr(sqlite_module, "_RESTART_JOURNAL_BYTES", 1)
    store = _store_of(data_dir, 4)
    first = store._journal.generation
    store.delete_message(Q, 1)
    await store.durable()
    store.flush()                                   # moved into the database: the journal restarts
    assert store._journal.generation == first + 1 and os.path.getsize(f"{store.path}{JOURNAL_SUFFIX}") == HEADER_SIZE
    monkeypatch.setattr(sqlite_module, "_APPLY_AFTER_S", 3600.0)
    store.delete_message(Q, 2)
    await store.durable()
    crashed = crash_copy(store, tmp_path / "crashed")
    store.close()
    meta = dict(_rows(crashed / DB_FILE_NAME, "SELECT key, value FROM meta"))
    assert meta[sqlite_module._JOURNAL_GENERATION_KEY] == first     # the older generation, at its end
    reopened = SqliteStore(crashed)
    assert sorted(m.lookup_identifier for m in reopened.load().messages) == [3, 4]
    reopened.close()


async def test_a_failed_journal_append_commits_in_the_database(data_dir, monkeypatch, caplog):
    store = _store_of(data_dir, 2)

    def disk_full(record):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(store._journal, "append", disk_full)
    store.delete_message(Q, 1)
    with caplog.at_level(logging.WARNING, logger="shared_adm.store.sqlite"):
        await store.durable()
    assert "delete journal append failed" in caplog.text
    assert store.journaled == 0 and _db_lookups(store.path) == [2]
    store.close()


async def test_a_defect_in_the_journal_append_fails_the_waiters_instead_of_hanging(data_dir, monkeypatch, caplog):
    store = _store_of(data_dir, 1)

    def defect(keys):
        raise RuntimeError("simulated bug")
    monkeypatch.setattr(sqlite_module, "encode_keys", defect)
    store.delete_message(Q, 1)
    with caplog.at_level(logging.CRITICAL, logger="shared_adm.store.sqlite"):
        with pytest.raises(StoreError, match="delete journal append died.*simulated bug"):
            await asyncio.wait_for(store.durable(), 30)
    with pytest.raises(StoreError, match="delete journal append died"):
        store.close()
    monkeypatch.undo()
    reopened = SqliteStore(data_dir)                # the file and its lock were released; nothing was deleted
    assert [m.lookup_identifier for m in reopened.load().messages] == [1]
    reopened.close()


async def test_a_failed_move_into_the_database_keeps_the_deletions_and_is_retried(data_dir, monkeypatch, caplog):
    store = _store_of(data_dir, 3)
    original = store._commit
    failures = []

    def fails_once(batches, stash=(), mark=(0, 0)):
        if stash and not failures:
            failures.append(len(stash))
            return sqlite3.OperationalError("database or disk is full")
        return original(batches, stash, mark)
    monkeypatch.setattr(store, "_commit", fails_once)
    store.delete_message(Q, 1)
    await store.durable()
    with caplog.at_level(logging.ERROR, logger="shared_adm.store.sqlite"):
        with pytest.raises(StoreError, match="full"):
            store.flush()
    assert failures == [1] and _lookups(store.path) == [2, 3]
    store.delete_message(Q, 2)
    await store.durable()
    store.flush()                                   # both, in one transaction
    assert _db_lookups(store.path) == [3] and unapplied_deletions(store.path) == []
    store.close()


def test_a_file_that_is_not_a_delete_journal_is_refused(data_dir):
    SqliteStore(data_dir).close()
    journal = data_dir / f"{DB_FILE_NAME}{JOURNAL_SUFFIX}"
    journal.write_bytes(b"NOTAJRNL" + bytes(8))
    with pytest.raises(StoreError, match="not a qm2qm delete journal"):
        SqliteStore(data_dir)


def test_a_delete_journal_that_cannot_be_read_is_named_in_the_error(data_dir):
    SqliteStore(data_dir).close()
    journal = data_dir / f"{DB_FILE_NAME}{JOURNAL_SUFFIX}"
    journal.unlink()
    journal.mkdir()
    with pytest.raises(StoreError, match=f"cannot read its delete journal {journal}: Is a directory"):
        SqliteStore(data_dir)


def test_a_schema_2_store_opens_as_schema_3(data_dir):
    store = _store_of(data_dir, 1)
    store.close()
    with contextlib.closing(sqlite3.connect(data_dir / DB_FILE_NAME)) as conn:
        conn.execute("UPDATE schema_version SET version = 2")
        conn.commit()
    reopened = SqliteStore(data_dir)
    assert _rows(reopened.path, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)] == [(3,)]
    assert [m.lookup_identifier for m in reopened.load().messages] == [1]
    reopened.close()


async def test_close_moves_every_journaled_deletion_into_the_database_and_closes_the_journal(data_dir, no_apply):
    store = _store_of(data_dir, 2)
    store.delete_message(Q, 2)
    await store.durable()
    store.close()
    assert not store._journal.usable
    assert _db_lookups(data_dir / DB_FILE_NAME) == [1] and unapplied_deletions(data_dir / DB_FILE_NAME) == []


def test_records_decode_to_the_keys_they_were_encoded_from():
    keys = [(Q, -BIAS), ("é" * 40, BIAS - 1), ("", 0)]
    data = encode_keys(keys[:1]) + encode_keys(keys[1:])
    assert decode_records(data, 0) == (keys, len(data), None)
    assert decode_records(data[:-1], 0)[1:] == (len(encode_keys(keys[:1])), "a record cut short")
