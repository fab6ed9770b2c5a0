"""RemoteQMCloseQueue (MS-MQQP 3.1.4.4, opnum 3) through the RPC path: one test per processing bullet."""
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE
from qm2qm.mqqp.handlers._read import MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT
from qm2qm.rpc.handles import NCA_S_FAULT_CONTEXT_MISMATCH
from shared_adm import status as st
from shared_adm.enums import PositionState

from tests.mqqp.conftest import NULL_HANDLE


async def test_close_queue_returns_invalid_handle_when_pphcontext_is_null(env):
    c = await env.connect()
    assert await c.call(c.close_queue, NULL_HANDLE) == (st.MQ_ERROR_INVALID_HANDLE, NULL_HANDLE)


async def test_close_queue_removes_the_open_queue_entry(env):
    c, d, session = await env.session()
    assert len(env.adm.open_queue_entries) == 1
    await c.call(c.close_queue, session)
    assert len(env.adm.open_queue_entries) == 0
    assert (await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT)).status \
        == st.MQ_ERROR_INVALID_PARAMETER


async def test_close_queue_cancels_the_pending_reads_of_its_descriptor(env):
    c, d, session = await env.session()
    reader = await env.connect()
    pending = await env.blocked(reader, reader.start_receive, d.handle, timeout=0xFFFFFFFF, request_id=9)
    assert (await c.call(c.close_queue, session))[0] == st.MQ_OK
    r = await pending
    assert (r.status, r.context) == (MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT, NULL_HANDLE)
    assert len(env.adm.remote_read_entries) == 0


async def test_close_queue_leaves_the_reads_of_other_descriptors_alone(env):
    c, d, session = await env.session()
    other, d2, _ = await env.session()
    pending = await env.blocked(other, other.start_receive, d2.handle, timeout=0xFFFFFFFF, request_id=9)
    await c.call(c.close_queue, session)
    assert not pending.done()
    env.enqueue(b"for d2")
    assert (await pending).status == st.MQ_OK


async def test_close_queue_generates_close_queue_on_the_descriptor(env):
    c, d, session = await env.session()
    cursor = env.qm.open_cursor(d)
    await c.call(c.close_queue, session)
    assert env.qm.descriptor_by_handle(d.handle) is None
    assert env.qm.cursor_by_handle(cursor.handle) is None
    assert d not in env.queue.open_queue_descriptor_collection


async def test_close_queue_releases_the_locked_messages_of_its_receives(env):
    c, d, session = await env.session()
    message = env.enqueue()
    assert (await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)).status == st.MQ_OK
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}
    await c.call(c.close_queue, session)
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}
    assert env.adm.is_idle()


async def test_close_queue_deletes_the_entry_and_sets_pphcontext_to_null(env):
    c, d, session = await env.session()
    assert await c.call(c.close_queue, session) == (st.MQ_OK, NULL_HANDLE)
    assert await c.call(c.fault, c.close_queue, session) == NCA_S_FAULT_CONTEXT_MISMATCH
    assert env.adm.is_idle()
