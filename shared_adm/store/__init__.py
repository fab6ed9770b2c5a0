"""The durable store behind the Persistent attributes of MS-MQDMPR 3.1.1: contract, MemoryStore, SqliteStore."""
from __future__ import annotations

import os

from shared_adm.store.base import (MemoryStore, PackedStoredMessage, Snapshot, Store, StoredMessage, StoredQueue,
                                   StoreError)
from shared_adm.store.sqlite import SqliteStore

__all__ = ["Store", "StoreError", "Snapshot", "StoredQueue", "StoredMessage", "PackedStoredMessage", "MemoryStore",
           "SqliteStore",
           "open_store"]

MEMORY = ":memory:"


def open_store(data_dir: str | os.PathLike, **sqlite_options) -> Store:
    """The Store for a ``--data-dir`` value (3.1.1 Persistent attributes): ':memory:' is volatile, else SqliteStore."""
    if isinstance(data_dir, str) and data_dir == MEMORY:
        return MemoryStore()
    return SqliteStore(data_dir, **sqlite_options)
