"""RemoteQMOpenQueue (MS-MQQP 3.1.4.3, opnum 2) through the RPC path: one test per processing bullet."""
import uuid

from qm2qm.mqqp.adm import OpenQueueEntry, OpenQueueEntryCollection
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, RPC_S_INVALID_BOUND
from qm2qm.mqqp.handlers.open_queue import open_queue
from shared_adm import status as st
from shared_adm.enums import RemoteReadState

from tests.mqqp.conftest import NULL_HANDLE


async def test_open_queue_returns_invalid_parameter_when_plicguid_is_null(env):
    # pLicGuid is a [ref] pointer: NDR cannot carry NULL, so the bullet is checked below the stub.
    assert open_queue(env.service, None, None, 0, 1, 1, 1) == (st.MQ_ERROR_INVALID_PARAMETER, NULL_HANDLE)


async def test_open_queue_returns_invalid_parameter_when_pqueue_is_zero(env):
    c = await env.connect()
    d = env.open_descriptor()
    assert await c.call(c.open_queue, d.handle, 0, d.handle) == (st.MQ_ERROR_INVALID_PARAMETER, NULL_HANDLE)
    assert len(env.adm.open_queue_entries) == 0


async def test_open_queue_returns_invalid_parameter_when_dwpcontext_is_zero(env):
    c = await env.connect()
    d = env.open_descriptor()
    assert await c.call(c.open_queue, d.handle, d.handle, 0) == (st.MQ_ERROR_INVALID_PARAMETER, NULL_HANDLE)


async def test_open_queue_returns_invalid_parameter_when_pqueue_differs_from_dwpcontext(env):
    c = await env.connect()
    d = env.open_descriptor()
    status, context = await c.call(c.open_queue, d.handle, d.handle + 1, d.handle)
    assert (status, context) == (st.MQ_ERROR_INVALID_PARAMETER, NULL_HANDLE)
    assert len(env.adm.open_queue_entries) == 0


async def test_open_queue_adds_an_open_queue_entry_for_dwpcontext_with_the_client_id(env):
    c = await env.connect()
    d = env.open_descriptor()
    client_id = uuid.UUID("6f1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
    status, context = await c.call(c.open_queue, 0xDEAD, d.handle, d.handle, lic_guid=client_id)
    assert status == st.MQ_OK
    [entry] = list(env.adm.open_queue_entries)
    assert (entry.open_queue_descriptor_handle, entry.client_id) == (d.handle, client_id)


async def test_open_queue_ignores_hqueue(env):
    c = await env.connect()
    d = env.open_descriptor()
    env.enqueue()
    status, _ = await c.call(c.open_queue, 0, d.handle, d.handle)     # hQueue 0: not even a descriptor
    assert status == st.MQ_OK
    assert (await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT)).status == st.MQ_OK


async def test_open_queue_sets_phcontext_and_returns_mq_ok(env):
    c = await env.connect()
    d = env.open_descriptor()
    status, context = await c.call(c.open_queue, d.handle)
    assert status == st.MQ_OK and context != NULL_HANDLE
    assert (await c.call(c.close_queue, context)) == (st.MQ_OK, NULL_HANDLE)


async def test_open_queue_ignores_dwmqs_within_its_range(env):
    c = await env.connect()
    for mqs in (0, 1, 16):
        d = env.open_descriptor()
        assert (await c.call(c.open_queue, d.handle, mqs=mqs))[0] == st.MQ_OK


async def test_open_queue_refuses_dwmqs_outside_its_range(env):
    c = await env.connect()
    d = env.open_descriptor()
    assert await c.call(c.fault, c.open_queue, d.handle, mqs=17) == RPC_S_INVALID_BOUND


async def test_open_queue_makes_an_opened_descriptor_ready_for_read(env):
    c = await env.connect()
    d = env.open_descriptor()
    assert d.remote_read_state is RemoteReadState.OPENED
    await c.call(c.open_queue, d.handle)
    assert d.remote_read_state is RemoteReadState.READY_FOR_READ


async def test_open_queue_on_an_unknown_descriptor_succeeds_and_reads_answer_invalid_handle(env):
    c = await env.connect()
    status, context = await c.call(c.open_queue, 0x4242)
    assert status == st.MQ_OK
    assert (await c.call(c.start_receive, 0x4242, MQ_ACTION_PEEK_CURRENT)).status == st.MQ_ERROR_INVALID_HANDLE


async def test_open_queue_does_not_expose_a_descriptor_opened_for_local_use(env):
    c = await env.connect()
    d = env.open_descriptor(state=RemoteReadState.NONE)
    env.enqueue()
    assert (await c.call(c.open_queue, d.handle))[0] == st.MQ_OK
    assert (await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT)).status == st.MQ_ERROR_INVALID_HANDLE
    assert d.remote_read_state is RemoteReadState.NONE


def test_open_queue_entries_on_one_descriptor_keep_their_order_and_each_goes_alone():
    # many sessions may name one descriptor (an unknown one too, as 3.1.4.3 does not check): each is found in the
    # order added and removed as itself, however many share the descriptor
    entries = OpenQueueEntryCollection()
    sessions = [OpenQueueEntry(open_queue_descriptor_handle=0x5EED, client_id=uuid.UUID(int=i)) for i in range(3)]
    other = OpenQueueEntry(open_queue_descriptor_handle=9, client_id=uuid.UUID(int=9))
    for entry in (*sessions, other):
        entries.add(entry)
    assert entries.find(0x5EED) is sessions[0] and len(entries) == 4 and list(entries) == [*sessions, other]
    twin = OpenQueueEntry(open_queue_descriptor_handle=0x5EED, client_id=uuid.UUID(int=1))
    assert twin not in entries and not entries.remove(twin)         # equal fields, not that session
    assert entries.remove(sessions[0]) and not entries.remove(sessions[0])
    assert entries.find(0x5EED) is sessions[1] and sessions[0] not in entries and sessions[2] in entries
    assert entries.remove(sessions[2]) and entries.remove(sessions[1]) and entries.find(0x5EED) is None
    assert list(entries) == [other]
