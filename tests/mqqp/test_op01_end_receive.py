"""RemoteQMEndReceive (MS-MQQP 3.1.4.2, opnum 1) through the RPC path: one test per processing bullet."""
import asyncio

from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE, RPC_S_INVALID_BOUND, RR_ACK, RR_NACK
from qm2qm.rpc.handles import NCA_S_FAULT_CONTEXT_MISMATCH
from shared_adm import status as st
from shared_adm.enums import PositionState
from shared_adm.message import DeliveryGuarantee
from shared_adm.store.base import MemoryStore

from tests.store.durable_rows import durable_rows
from tests.mqqp.conftest import NULL_HANDLE

RECOVERABLE = DeliveryGuarantee.RECOVERABLE


async def received(env, body=b"payload", **attributes):
    c, d, session = await env.session()
    message = env.enqueue(body, **attributes)
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert r.status == st.MQ_OK
    return c, d, session, message, r.context


async def test_end_receive_returns_invalid_handle_when_pphcontext_is_null(env):
    c = await env.connect()
    assert await c.call(c.end_receive, NULL_HANDLE, RR_ACK) == (st.MQ_ERROR_INVALID_HANDLE, NULL_HANDLE)


async def test_end_receive_ack_removes_the_message_from_the_queue(env):
    c, d, _, message, context = await received(env)
    assert await c.call(c.end_receive, context, RR_ACK) == (st.MQ_OK, NULL_HANDLE)
    assert env.positions() == {}
    again = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE, timeout=0)
    assert again.status == st.MQ_ERROR_IO_TIMEOUT


async def test_end_receive_nack_keeps_the_message_available_for_subsequent_consumption(env):
    c, d, _, message, context = await received(env, b"retry me")
    assert await c.call(c.end_receive, context, RR_NACK) == (st.MQ_OK, NULL_HANDLE)
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}
    again = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert again.status == st.MQ_OK and b"retry me" in again.buffer


async def test_end_receive_deletes_the_remote_read_entry_and_sets_pphcontext_to_null(env):
    c, d, _, message, context = await received(env)
    status, out = await c.call(c.end_receive, context, RR_NACK)
    assert (status, out) == (st.MQ_OK, NULL_HANDLE)
    assert len(env.adm.receive_handles) == 0
    assert await c.call(c.fault, c.end_receive, context, RR_ACK) == NCA_S_FAULT_CONTEXT_MISMATCH
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}


async def test_end_receive_does_not_search_rremotereadentrycollection(env):
    # <11>: Vista+/2003+ skip the MAY search; the entry is no longer in the collection once
    # StartReceive has returned, yet EndReceive works.
    c, d, _, message, context = await received(env)
    assert len(env.adm.remote_read_entries) == 0
    assert (await c.call(c.end_receive, context, RR_ACK))[0] == st.MQ_OK


async def test_end_receive_refuses_dwack_outside_its_range(env):
    c, d, _, message, context = await received(env)
    for ack in (0, 3):
        assert await c.call(c.fault, c.end_receive, context, ack) == RPC_S_INVALID_BOUND
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}
    assert (await c.call(c.end_receive, context, RR_NACK))[0] == st.MQ_OK


async def test_end_receive_refuses_a_session_handle(env):
    c, d, session, message, context = await received(env)
    assert await c.call(c.fault, c.end_receive, session, RR_ACK) == NCA_S_FAULT_CONTEXT_MISMATCH


async def test_end_receive_after_close_queue_answers_invalid_handle(env):
    c, d, session, message, context = await received(env)
    assert (await c.call(c.close_queue, session))[0] == st.MQ_OK
    assert await c.call(c.end_receive, context, RR_ACK) == (st.MQ_ERROR_INVALID_HANDLE, NULL_HANDLE)
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}


class GatedStore(MemoryStore):
    """A store whose group commit waits until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.commits_waiting = 0

    async def durable(self) -> None:
        self.commits_waiting += 1
        await self.gate.wait()
        self.commits_waiting -= 1


async def test_end_receive_ack_answers_only_once_the_delete_is_durable(make_env):
    store = GatedStore()
    env = await make_env(store)
    c, d, _, message, context = await received(env, delivery_guarantee=RECOVERABLE)
    call = asyncio.create_task(c.call(c.end_receive, context, RR_ACK))
    await env.wait_until(lambda: store.commits_waiting == 1)
    assert not call.done() and env.positions() == {}
    store.gate.set()
    assert await call == (st.MQ_OK, NULL_HANDLE)


async def test_end_receive_ack_of_an_express_message_is_answered_while_another_ack_awaits_its_commit(make_env):
    # An express message is never stored: its ACK has nothing to make durable, so it is not held behind the commit
    # of another client's recoverable delete (docs/mqqp-choices.md, Durability).
    store = GatedStore()
    env = await make_env(store)
    c, d, _, _, stored = await received(env, b"recoverable", delivery_guarantee=RECOVERABLE)
    waiting = asyncio.create_task(c.call(c.end_receive, stored, RR_ACK))
    await env.wait_until(lambda: store.commits_waiting == 1)
    other, d2, _ = await env.session()
    env.enqueue(b"express")
    r = await other.call(other.start_receive, d2.handle, MQ_ACTION_RECEIVE)
    assert r.status == st.MQ_OK and r.buffer is not None
    assert await other.call(other.end_receive, r.context, RR_ACK) == (st.MQ_OK, NULL_HANDLE)
    assert not waiting.done() and store.commits_waiting == 1 and env.positions() == {}
    store.gate.set()
    assert await waiting == (st.MQ_OK, NULL_HANDLE)


async def test_end_receive_ack_that_cannot_be_made_durable_is_not_answered_mq_ok(make_env):
    # "An ACK is durable before the answer": when the store cannot commit (disk full, read-only), the caller
    # gets MQ_ERROR_INSUFFICIENT_RESOURCES, not MQ_OK, and the server logs no traceback (found by scripts/soak.py).
    from tests.mqqp.conftest import FullDiskStore
    store = FullDiskStore()
    env = await make_env(store)
    c, d, _, message, context = await received(env, delivery_guarantee=RECOVERABLE)
    store.full = True
    status, out = await c.call(c.end_receive, context, RR_ACK)
    assert (status, out) == (st.MQ_ERROR_INSUFFICIENT_RESOURCES, NULL_HANDLE)
    store.full = False
    assert (await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE, timeout=0)).status == st.MQ_ERROR_IO_TIMEOUT


# -- an ACK on SqliteStore: answered from the commit's Future (no task) ----------------------------------------

async def _recoverable_received(make_env, tmp_path):
    from shared_adm.message import DeliveryGuarantee, Message
    from shared_adm.store.sqlite import SqliteStore
    from tests.mqqp.conftest import FORMAT_NAME
    store = SqliteStore(tmp_path)
    env = await make_env(store)
    c, d, session = await env.session()
    message = Message(body=b"kept", destination_queue_format_name=FORMAT_NAME,
                      delivery_guarantee=DeliveryGuarantee.RECOVERABLE)
    assert env.qm.enqueue_message(env.queue, message) == 0
    await env.qm.durable()
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert r.status == st.MQ_OK
    return store, env, c, d, message, r.context


def _stored_rows(store) -> int:
    """The messages a restart of the store would load (its rows less the deletions only its journal holds)."""
    return len(durable_rows(store.path))


async def test_end_receive_ack_on_sqlite_is_answered_once_its_delete_is_committed(make_env, tmp_path):
    store, env, c, d, message, context = await _recoverable_received(make_env, tmp_path)
    commits = []
    store.on_commit = lambda seconds: commits.append(_stored_rows(store))
    assert await c.call(c.end_receive, context, RR_ACK) == (st.MQ_OK, NULL_HANDLE)
    assert commits and _stored_rows(store) == 0 and env.positions() == {}
    assert not env.server.calls_to_start and all(not rc.calls for rc in env.server.connections.values())


async def test_end_receive_ack_on_sqlite_whose_commit_fails_is_insufficient_resources(make_env, tmp_path,
                                                                                      monkeypatch):
    store, env, c, d, message, context = await _recoverable_received(make_env, tmp_path)
    import sqlite3
    original = store._apply

    def full(*args):
        raise sqlite3.OperationalError("database or disk is full")

    def journal_full(record):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(store, "_apply", full)
    monkeypatch.setattr(store._journal, "append", journal_full)     # the deletion falls back to SQLite: full too
    assert await c.call(c.end_receive, context, RR_ACK) == (st.MQ_ERROR_INSUFFICIENT_RESOURCES, NULL_HANDLE)
    monkeypatch.setattr(store, "_apply", original)
    await env.qm.durable()                  # the retried batch: the ACKed message is not stored any more
    assert _stored_rows(store) == 0 and env.positions() == {}


async def test_end_receive_ack_on_sqlite_whose_connection_is_lost_before_the_commit_still_deletes(make_env,
                                                                                                   tmp_path):
    store, env, c, d, message, context = await _recoverable_received(make_env, tmp_path)
    gate = []
    store._inline = False                   # the writer thread commits, after the gate: the ACK waits meanwhile
    original = store._commit_taken

    def gated(batches, *stash_and_mark):
        import time
        deadline = time.monotonic() + 30
        while not gate and time.monotonic() < deadline:
            time.sleep(0.001)
        return original(batches, *stash_and_mark)
    store._commit_taken = gated
    c.dce.get_rpc_transport().get_socket().settimeout(5)
    ack = asyncio.ensure_future(c.call(c.end_receive, context, RR_ACK))
    await env.wait_until(lambda: any(rc.calls for rc in env.server.connections.values()))
    [future] = [call.task for rc in env.server.connections.values() for call in rc.calls.values()]
    c.disconnect()
    await env.wait_until(lambda: future.cancelled())
    gate.append(True)
    await env.qm.durable()
    assert _stored_rows(store) == 0 and env.positions() == {}
    try:
        await ack
    except Exception:
        pass
