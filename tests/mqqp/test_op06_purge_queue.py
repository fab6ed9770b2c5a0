"""RemoteQMPurgeQueue (MS-MQQP 3.1.4.7, opnum 6) through the RPC path: one test per processing bullet."""
from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE, RR_ACK, RR_NACK
from shared_adm import status as st
from shared_adm.enums import PositionState


async def test_purge_queue_faults_with_invalid_handle_when_no_open_queue_entry(env):
    # <18>: every Windows after XP throws the failure instead of returning it.
    c = await env.connect()
    d = env.open_descriptor()
    env.enqueue()
    assert await c.call(c.fault, c.purge_queue, d.handle) == st.MQ_ERROR_INVALID_HANDLE
    assert len(env.positions()) == 1


async def test_purge_queue_generates_purge_queue_and_returns_mq_ok(env):
    c, d, _ = await env.session()
    for i in range(5):
        env.enqueue(b"m%d" % i)
    assert await c.call(c.purge_queue, d.handle) == st.MQ_OK
    assert env.positions() == {}


async def test_purge_queue_marks_a_locked_message_purge_pending_and_nack_deletes_it(env):
    c, d, _ = await env.session()
    locked = env.enqueue(b"locked")
    env.enqueue(b"available: deleted at once")
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert await c.call(c.purge_queue, d.handle) == st.MQ_OK
    assert env.positions() == {locked.lookup_identifier: PositionState.PURGE_PENDING}
    assert (await c.call(c.end_receive, r.context, RR_NACK))[0] == st.MQ_OK
    assert env.positions() == {}


async def test_purge_queue_then_ack_deletes_the_locked_message(env):
    c, d, _ = await env.session()
    env.enqueue(b"locked")
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)
    await c.call(c.purge_queue, d.handle)
    assert (await c.call(c.end_receive, r.context, RR_ACK))[0] == st.MQ_OK
    assert env.positions() == {}


async def test_purge_queue_on_a_peek_only_session_faults_with_access_denied(env):
    # MS-MQDMPR 3.1.7.1.7 leaves the ReceiveAccess check to the caller (QueueAccessType: PeekAccess = peek only).
    from shared_adm.enums import QueueAccessType
    c, d, _ = await env.session(QueueAccessType.PEEK_ACCESS)
    env.enqueue()
    assert await c.call(c.fault, c.purge_queue, d.handle) == st.MQ_ERROR_ACCESS_DENIED
    assert len(env.positions()) == 1


async def test_purge_queue_faults_with_invalid_handle_when_the_descriptor_is_gone(env):
    c, d, _ = await env.session()
    env.qm.close_queue(d)
    assert await c.call(c.fault, c.purge_queue, d.handle) == st.MQ_ERROR_INVALID_HANDLE


async def test_purge_queue_faults_with_queue_deleted_when_the_queue_was_deleted(env):
    c, d, _ = await env.session()
    assert env.qm.delete_queue(env.queue) == st.MQ_OK
    assert await c.call(c.fault, c.purge_queue, d.handle) == st.MQ_ERROR_QUEUE_DELETED


async def test_purge_queue_that_cannot_be_made_durable_faults_with_insufficient_resources(make_env):
    # <18>: failures are faults; a purge the store cannot commit (disk full, read-only) is not answered MQ_OK.
    from tests.mqqp.conftest import FullDiskStore
    store = FullDiskStore()
    env = await make_env(store)
    c, d, _ = await env.session()
    env.enqueue(b"x")
    store.full = True
    assert await c.call(c.fault, c.purge_queue, d.handle) == st.MQ_ERROR_INSUFFICIENT_RESOURCES
