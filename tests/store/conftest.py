"""Fixtures for the store tests: one Store per implementation of the base.py contract (MS-MQDMPR 3.1.1)."""
import pytest

from shared_adm.store import MemoryStore, SqliteStore


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    """A fresh Store: MemoryStore and SqliteStore run the same contract tests."""
    if request.param == "memory":
        yield MemoryStore()
        return
    sqlite_store = SqliteStore(tmp_path / "data", commit_interval_ms=1)
    yield sqlite_store
    sqlite_store.close()


@pytest.fixture
def data_dir(tmp_path):
    """A data directory for SqliteStore tests that reopen the store."""
    return tmp_path / "data"
