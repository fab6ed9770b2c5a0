"""qm2qm scenarios across opnums and connections (MS-MQQP 3.1.4, 4.1, 4.2), through the RPC path."""
import asyncio
import uuid

from hypothesis import event, given, settings, strategies as hs

from qm2qm.mqqp import codec, idl
from qm2qm.mqqp.constants import (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE,
                                  MQ_LOOKUP_PEEK_CURRENT, MQ_LOOKUP_PEEK_NEXT, MQ_LOOKUP_PEEK_PREV,
                                  MQ_LOOKUP_RECEIVE_CURRENT, MQ_LOOKUP_RECEIVE_NEXT, MQ_LOOKUP_RECEIVE_PREV, RR_ACK,
                                  RR_NACK)
from qm2qm.mqqp.handlers._read import MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT
from qm2qm.mqqp.interface import build_service, service_interface
from qm2qm.rpc.handles import HandleTable
from qm2qm.rpc.interface import RpcFault
from shared_adm import status as st
from shared_adm.clock import ManualScheduler
from shared_adm.enums import PositionState, QueueAccessType, QueueShareMode, RemoteReadState
from shared_adm.message import Message
from shared_adm.packet import deserialize_message_from_buffer
from shared_adm.queue_manager import QueueManager

from tests.mqqp.conftest import NDR64, NULL_HANDLE, Client

INFINITE = 0xFFFFFFFF
LAST = 0xFFFFFFFFFFFFFFFF
LOW_7_BYTES = (1 << 56) - 1


async def test_a_blocked_receive_is_woken_by_a_message_enqueued_through_the_queue_manager(env):
    c, d, _ = await env.session()
    pending = await env.blocked(c, c.start_receive2, d.handle, MQ_ACTION_RECEIVE, timeout=INFINITE, request_id=1)
    message = env.enqueue(b"wake up")
    r = await pending
    assert r.status == st.MQ_OK and r.sequential_id == message.lookup_identifier & LOW_7_BYTES
    assert deserialize_message_from_buffer(r.buffer).body == b"wake up"
    assert (await c.call(c.end_receive, r.context, RR_ACK))[0] == st.MQ_OK
    assert env.positions() == {} and len(env.adm.receive_handles) == 0


async def test_a_receive_is_cancelled_from_a_second_connection(env):
    reader, d, _ = await env.session()
    canceller = await env.connect()
    pending = await env.blocked(reader, reader.start_receive, d.handle, timeout=INFINITE, request_id=42)
    assert await canceller.call(canceller.cancel_receive, d.handle, 42) == st.MQ_OK
    r = await pending
    assert (r.status, r.context) == (MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT, NULL_HANDLE)
    env.enqueue(b"next")
    again = await reader.call(reader.start_receive, d.handle, timeout=INFINITE, request_id=42)
    assert again.status == st.MQ_OK and b"next" in again.buffer


async def test_close_queue_with_a_pending_read_and_a_locked_message(env):
    owner, d, session = await env.session()
    locked = env.enqueue(b"locked")
    r = await owner.call(owner.start_receive, d.handle, MQ_ACTION_RECEIVE)
    waiter = await env.connect()
    pending = await env.blocked(waiter, waiter.start_receive, d.handle, timeout=INFINITE, request_id=2)
    assert await owner.call(owner.close_queue, session) == (st.MQ_OK, NULL_HANDLE)
    assert (await pending).status == MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT
    assert env.positions() == {locked.lookup_identifier: PositionState.AVAILABLE}
    assert env.qm.descriptor_by_handle(d.handle) is None
    assert env.adm.is_idle()
    assert await owner.call(owner.end_receive, r.context, RR_ACK) == (st.MQ_ERROR_INVALID_HANDLE, NULL_HANDLE)
    other, d2, _ = await env.session()
    assert b"locked" in (await other.call(other.start_receive, d2.handle, MQ_ACTION_RECEIVE)).buffer


async def test_a_connection_killed_between_start_receive_and_end_receive_returns_the_message(env):
    reader, d, _ = await env.session()
    owner, d2, _ = await env.session()
    message = env.enqueue(b"in flight")
    r = await reader.call(reader.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert r.status == st.MQ_OK
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}
    await env.kill(reader)
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}
    again = await owner.call(owner.start_receive, d2.handle, MQ_ACTION_RECEIVE)
    assert again.status == st.MQ_OK and b"in flight" in again.buffer


async def test_purge_while_a_message_is_locked(env):
    reader, d, _ = await env.session()
    admin = await env.connect()
    assert (await admin.call(admin.open_queue, d.handle))[0] == st.MQ_OK
    locked = env.enqueue(b"locked")
    env.enqueue(b"available: deleted at once")
    r = await reader.call(reader.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert await admin.call(admin.purge_queue, d.handle) == st.MQ_OK
    assert env.positions() == {locked.lookup_identifier: PositionState.PURGE_PENDING}
    peek = await admin.call(admin.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT, timeout=0)
    assert peek.status == st.MQ_ERROR_IO_TIMEOUT
    assert (await reader.call(reader.end_receive, r.context, RR_NACK))[0] == st.MQ_OK
    assert env.positions() == {}


async def test_lookup_reads_walk_a_queue_forwards_and_backwards(env):
    c, d, _ = await env.session()
    messages = [env.enqueue(b"item-%d" % i, priority=p) for i, p in enumerate([3, 3, 5, 0, 3])]
    order = sorted(m.lookup_identifier for m in messages)        # priority first, then arrival
    forwards, lookup_id = [], 0
    while True:
        r = await c.call(c.start_receive_by_lookup_id, d.handle, lookup_id, MQ_LOOKUP_PEEK_NEXT)
        if r.status != st.MQ_OK:
            assert r.status == st.MQ_ERROR_MESSAGE_NOT_FOUND
            break
        forwards.append(r.sequential_id)
        lookup_id = next(x for x in order if x & LOW_7_BYTES == r.sequential_id)
    backwards, lookup_id = [], LAST
    while True:
        r = await c.call(c.start_receive_by_lookup_id, d.handle, lookup_id, MQ_LOOKUP_PEEK_PREV)
        if r.status != st.MQ_OK:
            assert r.status == st.MQ_ERROR_MESSAGE_NOT_FOUND
            break
        backwards.append(r.sequential_id)
        lookup_id = next(x for x in order if x & LOW_7_BYTES == r.sequential_id)
    assert forwards == [x & LOW_7_BYTES for x in order]
    assert backwards == forwards[::-1]
    middle = order[2]
    r = await c.call(c.start_receive_by_lookup_id, d.handle, middle, MQ_LOOKUP_RECEIVE_CURRENT)
    assert (await c.call(c.end_receive, r.context, RR_ACK))[0] == st.MQ_OK
    r = await c.call(c.start_receive_by_lookup_id, d.handle, order[1], MQ_LOOKUP_PEEK_NEXT)
    assert r.sequential_id == order[3] & LOW_7_BYTES


def _receive_raw(client: Client, h_queue: int) -> bytes:
    req = idl.RemoteQMStartReceive()
    req["lpRemoteReadDesc"] = client.desc(h_queue, MQ_ACTION_RECEIVE, 0, 0, 1, None)
    return client.raw(req)


async def test_a_4_3_mb_message_is_received_whole(env):
    # 4 300 000 body bytes: a packet just under REMOTEREADDESC.dwSize's [range(0, 4325376)].
    c, d, _ = await env.session()
    body = bytes(range(256)) * (4_300_000 // 256) + b"\x01" * (4_300_000 % 256)
    message = env.enqueue(body, label="big")
    stub = await asyncio.to_thread(_receive_raw, c, d.handle)
    response = codec.decode_response(0, stub, env.syntax == NDR64)
    desc = response.lpRemoteReadDesc
    assert response.ErrorCode == st.MQ_OK and response.pphContext != NULL_HANDLE
    assert 4_300_000 < desc.dwSize <= 4_325_376 and desc.dwSize == len(desc.lpBuffer)
    received = deserialize_message_from_buffer(desc.lpBuffer, max_packet_size=4_325_376)
    assert received.body == body and received.label == "big"
    assert (await c.call(c.end_receive, response.pphContext, RR_ACK))[0] == st.MQ_OK
    assert message.lookup_identifier not in env.positions()


async def test_a_message_too_large_for_dwsize_is_refused_and_stays_in_the_queue(env):
    c, d, _ = await env.session()
    message = env.enqueue(b"x" * 4_325_376)
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert (r.status, r.context, r.size) == (st.MQ_ERROR_INSUFFICIENT_RESOURCES, NULL_HANDLE, 0)
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}
    assert env.adm.receive_handles.for_descriptor(d.handle) == []


async def test_a_receive_whose_answer_cannot_be_encoded_returns_the_message_and_its_handle(env, monkeypatch):
    from qm2qm.mqqp.handlers import _read
    c, d, _ = await env.session()
    message = env.enqueue()

    def broken(opnum, response, ndr64, **kw):
        raise codec.EncodeError("simulated defect")
    monkeypatch.setattr(_read.codec, "encode_response", broken)
    assert await c.call(c.fault, c.start_receive, d.handle, MQ_ACTION_RECEIVE) == 0x1C000012   # nca_s_fault_unspec
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}
    assert len(env.adm.receive_handles) == 0 and len(env.adm.remote_read_entries) == 0
    monkeypatch.undo()
    assert (await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)).status == st.MQ_OK


async def test_malformed_stubs_fault_and_the_connection_keeps_serving(env):
    from tests.mqqp.conftest import Fault
    c, d, _ = await env.session()
    env.enqueue()

    def send(opnum, stub):
        try:
            c.stub_fault(opnum, stub)
        except Fault as fault:
            return fault.status
    for opnum in range(11):
        if opnum == 8:
            continue                      # no [in] parameters: any stub with trailing bytes is checked below
        assert await asyncio.to_thread(send, opnum, b"\x01\x02\x03") == 0x000006F7      # RPC_X_BAD_STUB_DATA
    assert await asyncio.to_thread(send, 8, b"\x00" * 4) == 0x000006F7
    assert (await c.call(c.start_receive, d.handle, MQ_ACTION_PEEK_CURRENT)).status == st.MQ_OK
    assert len(env.adm.remote_read_entries) == 0 and len(env.adm.open_queue_entries) == 1


async def test_a_read_handle_is_refused_on_another_association(env):
    from qm2qm.rpc.handles import NCA_S_FAULT_CONTEXT_MISMATCH
    c, d, _ = await env.session()
    message = env.enqueue()
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)
    thief = await env.connect()
    assert await thief.call(thief.fault, thief.end_receive, r.context, RR_ACK) == NCA_S_FAULT_CONTEXT_MISMATCH
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}
    assert (await c.call(c.end_receive, r.context, RR_ACK))[0] == st.MQ_OK


# ---------------------------------------------------------------------------------------------------------
# Hostile read descriptors: whatever a client puts in REMOTEREADDESC, the handlers answer with a status (or a
# fault) and leave no entry, no waiting read and no Locked message behind once the reads are ended.
# In-process (the Interface's handlers with the runtime's HandleTable), so hypothesis can try many inputs.
# ---------------------------------------------------------------------------------------------------------

VALID_ACTIONS = [MQ_ACTION_RECEIVE, MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_LOOKUP_PEEK_CURRENT,
                 MQ_LOOKUP_PEEK_NEXT, MQ_LOOKUP_PEEK_PREV, MQ_LOOKUP_RECEIVE_CURRENT, MQ_LOOKUP_RECEIVE_NEXT,
                 MQ_LOOKUP_RECEIVE_PREV]


class _Ctx:
    """A CallContext over one association's HandleTable (qm2qm/rpc/interface.py)."""

    def __init__(self, ndr64: bool) -> None:
        self.ndr64, self.call_id, self.opnum, self.connection_id, self.association_group_id = ndr64, 1, 0, 1, 1
        self.peer_host = "127.0.0.1"
        self.table = HandleTable()

    def lookup_handle(self, wire, handle_type):
        return self.table.lookup(wire, handle_type)

    def new_handle(self, handle_type, obj):
        return self.table.new(handle_type, obj)

    def close_handle(self, wire):
        self.table.close(wire)
        return NULL_HANDLE


def _read_call():
    """(opnum, hRemoteQueue, dwQueue, hCursor, ulAction, ulTimeout, dwRequestID, LookupId, use a real LookupId,
    keep the handle until the end): mostly plausible values, so reads succeed, wait and lock as well as fail."""
    return hs.tuples(hs.sampled_from([0, 9, 10]),
                     hs.sampled_from(["own"] * 6 + ["other", 0, 0x7777]),
                     hs.sampled_from(["same"] * 6 + [0, 0x7777]),
                     hs.sampled_from([0] * 5 + ["own", 0x5151]),
                     hs.sampled_from(VALID_ACTIONS * 2 + [0x12345678, 0xFFFFFFFF]),
                     hs.sampled_from([0] * 4 + [1, INFINITE, 0x7FFFFFFF]),
                     hs.integers(0, 3),
                     hs.sampled_from([0, LAST, 1, 0x0400000000000002]) | hs.integers(0, (1 << 64) - 1),
                     hs.booleans(), hs.booleans())


@settings(max_examples=200, deadline=None)
@given(calls=hs.lists(_read_call(), min_size=1, max_size=8), preload=hs.integers(0, 3), ndr64=hs.booleans())
def test_hostile_read_descriptors_get_an_answer_and_leave_nothing_behind(calls, preload, ndr64):
    asyncio.run(_hostile(calls, preload, ndr64))


async def _hostile(calls, preload, ndr64):
    qm = QueueManager(scheduler=ManualScheduler())
    qm.initialize()
    _, queue = qm.create_queue(".\\private$\\orders")
    fmt = "DIRECT=OS:qm2qm\\private$\\orders"
    _, own = qm.open_queue(fmt, QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE, RemoteReadState.OPENED)
    _, other = qm.open_queue(fmt, QueueAccessType.PEEK_ACCESS, QueueShareMode.DENY_NONE, RemoteReadState.OPENED)
    messages = [Message(body=b"m%d" % i, destination_queue_format_name=fmt) for i in range(preload)]
    for m in messages:
        qm.enqueue_message(queue, m)
    cursor = qm.open_cursor(own)
    service = build_service(qm)
    ops = service_interface(service).operations
    ctx = _Ctx(ndr64)
    for desc in (own, other):
        stub = codec.encode_request(2, codec.RemoteQMOpenQueueRequest(uuid.uuid4(), 0, desc.handle, desc.handle,
                                                                      desc.handle), ndr64)
        assert codec.decode_response(2, ops[2].handler(ctx, stub), ndr64).ErrorCode == st.MQ_OK
    named = {"own": own.handle, "other": other.handle}
    waits = []
    for opnum, h, q, c, action, timeout, rid, lookup, real_lookup, keep in calls:
        h = named.get(h, h)
        q = h if q == "same" else q
        c = cursor.handle if c == "own" else c
        d = codec.REMOTEREADDESC(hRemoteQueue=h, hCursor=c, ulAction=action, ulTimeout=timeout, dwQueue=q,
                                 dwRequestID=rid)
        if opnum == 0:
            request = codec.RemoteQMStartReceiveRequest(d)
        elif opnum == 9:
            request = codec.RemoteQMStartReceive2Request(codec.REMOTEREADDESC2(d, 0))
        else:
            lookup = messages[lookup % preload].lookup_identifier if real_lookup and preload else lookup
            request = codec.RemoteQMStartReceiveByLookupIdRequest(lookup, codec.REMOTEREADDESC2(d, 0))
        try:
            out = ops[opnum].handler(ctx, codec.encode_request(opnum, request, ndr64))
            if not isinstance(out, bytes):
                task = asyncio.ensure_future(out)
                await asyncio.sleep(0)
                if not task.done():
                    event(f"opnum {opnum} -> waits")
                    waits.append(task)
                    continue
                out = task.result()
        except RpcFault as fault:
            event(f"opnum {opnum} -> fault 0x{fault.status:x}")
            continue
        response = codec.decode_response(opnum, out, ndr64)
        event(f"opnum {opnum} -> {st.status_name(response.ErrorCode & 0xFFFFFFFF)}")
        if response.pphContext != NULL_HANDLE and not keep:
            stub = codec.encode_request(1, codec.RemoteQMEndReceiveRequest(response.pphContext, RR_NACK), ndr64)
            assert codec.decode_response(1, await ops[1].handler(ctx, stub), ndr64).ErrorCode == st.MQ_OK
    for wait in waits:
        wait.cancel()
    await asyncio.gather(*waits, return_exceptions=True)
    for handle_entry in ctx.table.drain():          # as if the connection dropped: rundown of what is left
        handle_entry.handle_type.rundown(handle_entry.obj)
    assert len(service.adm.remote_read_entries) == 0 and len(service.adm.receive_handles) == 0
    assert not own.waiting_message_read_operation_collection and not other.waiting_message_read_operation_collection
    assert all(p.state is PositionState.AVAILABLE for p in queue.message_position_list)
    assert len(queue.message_position_list) == preload
