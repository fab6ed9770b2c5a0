"""SqliteStore.when_durable: durable() as a Future the group commit completes (no coroutine, no task)."""
import asyncio
import logging

import pytest

from shared_adm.store import SqliteStore, StoreError
from tests.store.test_sqlite import Q, _limit_pages, _msg, _rows, _store_whose_next_commit_fails
from tests.store.durable_rows import durable_rows


async def test_nothing_pending_is_none(data_dir):
    store = SqliteStore(data_dir)
    assert store.when_durable(lambda error: error) is None
    store.put_message(_msg(1))
    await store.durable()
    assert store.when_durable(lambda error: error) is None
    store.close()


async def test_resolves_to_then_of_none_once_the_change_is_committed(data_dir):
    store = SqliteStore(data_dir)
    store.put_message(_msg(1))
    await store.durable()
    store.delete_message(Q, 1)
    future = store.when_durable(lambda error: ("done", error))
    assert not future.done()
    assert await future == ("done", None)
    assert durable_rows(store.path) == set()        # committed (journaled) when it resolved
    store.close()


async def test_a_failed_commit_resolves_to_then_of_the_store_error(data_dir, caplog):
    store = await _store_whose_next_commit_fails(data_dir)
    with caplog.at_level(logging.ERROR, logger="shared_adm.store.sqlite"):
        error = await store.when_durable(lambda error: error)
    assert isinstance(error, StoreError) and "full" in str(error)
    _limit_pages(store, 1_000_000)
    await store.durable()
    store.close()


async def test_an_exception_of_then_is_the_futures_and_other_waiters_still_settle(data_dir):
    store = SqliteStore(data_dir)
    store.put_message(_msg(1))
    failing = store.when_durable(lambda error: 1 / 0)
    other = store.when_durable(lambda error: "other")
    results = await asyncio.gather(failing, other, return_exceptions=True)
    assert isinstance(results[0], ZeroDivisionError) and results[1] == "other"
    store.close()


async def test_a_cancelled_future_is_left_alone_and_the_change_still_commits(data_dir):
    store = SqliteStore(data_dir)
    store.put_message(_msg(1))
    called = []
    future = store.when_durable(called.append)
    future.cancel()
    await store.durable()
    assert called == [] and future.cancelled()
    assert _rows(store.path, "SELECT count(*) FROM messages") == [(1,)]
    store.close()


async def test_a_closed_store_raises(data_dir):
    store = SqliteStore(data_dir)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.when_durable(lambda error: error)
