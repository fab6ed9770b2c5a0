"""What a restart of a SqliteStore would load, read beside the open store: its message rows less the deletions its
delete journal holds and the database does not (MS-MQDMPR 3.1.1.11; shared_adm/store/delete_journal.py)."""
import contextlib
import os
import shutil
import sqlite3
from pathlib import Path

from shared_adm.store.delete_journal import HEADER_SIZE, JOURNAL_SUFFIX, DeleteJournal
from shared_adm.store.sqlite import _JOURNAL_APPLIED_KEY, _JOURNAL_GENERATION_KEY, DB_FILE_NAME


def unapplied_deletions(path) -> list[tuple[str, int]]:
    """The (queue identifier, row key) pairs journaled and not yet deleted from the database."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
    keys, _ = DeleteJournal(f"{path}{JOURNAL_SUFFIX}").read_unapplied(meta.get(_JOURNAL_GENERATION_KEY, 0),
                                                                      meta.get(_JOURNAL_APPLIED_KEY, HEADER_SIZE))
    return keys


def durable_rows(path) -> set[tuple[str, int]]:
    """(queue identifier, row key) of every message a restart would load."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rows = set(conn.execute("SELECT queue_identifier, lookup_identifier FROM messages"))
    return rows - set(unapplied_deletions(path))


def crash_copy(store, target) -> Path:
    """Copy into the new directory ``target`` the files a kill -9 of the process would leave now: the database, its
    WAL and the delete journal (no lock, no -shm)."""
    target = Path(target)
    target.mkdir()
    for suffix in ("", "-wal", JOURNAL_SUFFIX):
        if os.path.exists(f"{store.path}{suffix}"):
            shutil.copyfile(f"{store.path}{suffix}", target / f"{DB_FILE_NAME}{suffix}")
    return target
