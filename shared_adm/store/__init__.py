"""The durable store behind the Persistent attributes of MS-MQDMPR 3.1.1: contract, MemoryStore, SqliteStore."""
from shared_adm.store.base import MemoryStore, Snapshot, Store, StoredMessage, StoredQueue, StoreError
from shared_adm.store.sqlite import SqliteStore

__all__ = ["Store", "StoreError", "Snapshot", "StoredQueue", "StoredMessage", "MemoryStore", "SqliteStore"]
