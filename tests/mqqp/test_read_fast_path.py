"""The inline paths of RemoteQMStartReceive(2) and RemoteQMEndReceive (MS-MQQP 3.1.4.1, 3.1.4.10, 3.1.4.2).

A read that completes at once is answered without a task (qm2qm/rpc/server.py CallState.answer_now); one that
must wait goes through the task path, having changed nothing and registered no wait before its task runs.
These tests hold the two paths to the same bytes and the same queue state.
"""
from __future__ import annotations

import asyncio
import inspect
import socket
import struct
import uuid

import pytest

from qm2qm.mqqp import codec
from qm2qm.mqqp.constants import (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE, QM2QM_UUID,
                                  RR_ACK, RR_NACK)
from qm2qm.mqqp.handlers import end_receive, start_receive, start_receive2
from qm2qm.remote_read.locks import release
from shared_adm import status as st
from shared_adm.clock import INFINITE
from shared_adm.enums import PositionState
from shared_adm.message import DeliveryGuarantee
from shared_adm.store.base import MemoryStore

from .conftest import NDR, NDR64


class FakeCall:
    """A CallContext whose handles are numbered (so two paths give the same wire handle)."""

    def __init__(self, ndr64: bool, answer_now: bool) -> None:
        self.call_id, self.opnum, self.ndr64 = 1, 9, ndr64
        self.connection_id = self.association_group_id = 1
        self.peer_host = "127.0.0.1"
        self.answer_now = answer_now
        self.handles: dict[bytes, object] = {}

    def new_handle(self, handle_type, obj) -> bytes:
        wire = struct.pack("<I", len(self.handles) + 1) + bytes(16)
        self.handles[wire] = obj
        return wire

    def lookup_handle(self, wire, handle_type):
        return self.handles.get(wire)

    def close_handle(self, wire) -> bytes:
        self.handles.pop(wire, None)
        return bytes(20)


def _desc(handle: int, action: int, timeout: int, cursor: int = 0, request_id: int = 7) -> codec.REMOTEREADDESC:
    return codec.REMOTEREADDESC(hRemoteQueue=handle, dwQueue=handle, hCursor=cursor, ulAction=action,
                                ulTimeout=timeout, dwRequestID=request_id)


def _stub(opnum: int, desc: codec.REMOTEREADDESC, ndr64: bool) -> bytes:
    if opnum == 0:
        return codec.encode_request(0, codec.RemoteQMStartReceiveRequest(desc), ndr64)
    return codec.encode_request(9, codec.RemoteQMStartReceive2Request(codec.REMOTEREADDESC2(desc)), ndr64)


MODULES = {0: start_receive, 9: start_receive2}


async def _task_path(env, opnum: int, stub: bytes) -> tuple[bytes, FakeCall]:
    ctx = FakeCall(env.syntax == NDR64, answer_now=False)
    pending = MODULES[opnum].serve(env.service, ctx, stub)
    assert inspect.iscoroutine(pending)           # without answer_now nothing runs before the task
    return await pending, ctx


def _inline_path(env, opnum: int, stub: bytes) -> tuple[bytes, FakeCall]:
    ctx = FakeCall(env.syntax == NDR64, answer_now=True)
    answer = MODULES[opnum].serve(env.service, ctx, stub)
    assert type(answer) is bytes
    return answer, ctx


def _nothing_pending(env, descriptor) -> None:
    assert not descriptor.waiting_message_read_operation_collection
    assert len(env.adm.remote_read_entries) == 0


@pytest.mark.parametrize("opnum", [0, 9])
@pytest.mark.parametrize("timeout", [0, 1000, INFINITE])
@pytest.mark.parametrize("body", [b"x" * 100, b"", bytes(range(256)) * 40])
async def test_a_peek_answered_inline_is_byte_identical_to_the_task_answer(make_env, opnum, timeout, body):
    env = await make_env()
    _, d, _ = await env.session()
    message = env.enqueue(body, label="fast")
    stub = _stub(opnum, _desc(d.handle, MQ_ACTION_PEEK_CURRENT, timeout), env.syntax == NDR64)
    inline, _ = _inline_path(env, opnum, stub)
    queued, _ = await _task_path(env, opnum, stub)
    assert inline == queued
    response = codec.decode_response(opnum, inline, env.syntax == NDR64)
    assert response.ErrorCode == st.MQ_OK
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}
    _nothing_pending(env, d)


@pytest.mark.parametrize("opnum", [0, 9])
@pytest.mark.parametrize("timeout", [0, 5, INFINITE])
async def test_a_receive_answered_inline_is_byte_identical_to_the_task_answer(make_env, opnum, timeout):
    env = await make_env()
    _, d, _ = await env.session()
    message = env.enqueue(b"r" * 1024)
    stub = _stub(opnum, _desc(d.handle, MQ_ACTION_RECEIVE, timeout), env.syntax == NDR64)
    inline, ctx = _inline_path(env, opnum, stub)
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}
    [entry] = ctx.handles.values()
    assert release(env.service, entry) == st.MQ_OK          # RR_NACK: Available again, same position
    queued, ctx2 = await _task_path(env, opnum, stub)
    assert inline == queued
    assert list(ctx2.handles) == list(ctx.handles)
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}
    assert len(env.adm.receive_handles) == 1
    _nothing_pending(env, d)


@pytest.mark.parametrize("opnum", [0, 9])
@pytest.mark.parametrize("action", [MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE, MQ_ACTION_PEEK_NEXT])
async def test_a_read_with_timeout_0_on_an_empty_queue_is_answered_inline_like_the_task(make_env, opnum, action):
    env = await make_env()
    _, d, _ = await env.session()
    cursor = env.qm.open_cursor(d)
    stub = _stub(opnum, _desc(d.handle, action, 0, cursor=cursor.handle), env.syntax == NDR64)
    inline, _ = _inline_path(env, opnum, stub)
    queued, _ = await _task_path(env, opnum, stub)
    assert inline == queued
    expected = st.MQ_ERROR_ILLEGAL_CURSOR_ACTION if action == MQ_ACTION_PEEK_NEXT else st.MQ_ERROR_IO_TIMEOUT
    assert codec.decode_response(opnum, inline, env.syntax == NDR64).ErrorCode == expected
    _nothing_pending(env, d)


@pytest.mark.parametrize("opnum", [0, 9])
async def test_refusals_are_answered_inline_like_the_task(make_env, opnum):
    env = await make_env()
    _, d, _ = await env.session()
    env.enqueue()
    bad = [_desc(d.handle + 1000, MQ_ACTION_PEEK_CURRENT, 0), _desc(d.handle, 0x1234, 5),
           _desc(d.handle, MQ_ACTION_PEEK_NEXT, 0), _desc(d.handle, MQ_ACTION_PEEK_CURRENT, 0, cursor=999)]
    for desc in bad:
        stub = _stub(opnum, desc, env.syntax == NDR64)
        inline, _ = _inline_path(env, opnum, stub)
        queued, _ = await _task_path(env, opnum, stub)
        assert inline == queued
        assert codec.decode_response(opnum, inline, env.syntax == NDR64).ErrorCode != st.MQ_OK
    _nothing_pending(env, d)


@pytest.mark.parametrize("opnum", [0, 9])
@pytest.mark.parametrize("action", [MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE])
async def test_a_read_that_must_wait_changes_nothing_before_its_task_and_leaves_nothing_if_dropped(
        make_env, opnum, action):
    env = await make_env()
    _, d, _ = await env.session()
    stub = _stub(opnum, _desc(d.handle, action, INFINITE), env.syntax == NDR64)
    ctx = FakeCall(env.syntax == NDR64, answer_now=True)
    pending = MODULES[opnum].serve(env.service, ctx, stub)
    assert inspect.iscoroutine(pending)
    _nothing_pending(env, d)                   # no wait registered, no RemoteReadEntry: a drop leaves nothing
    pending.close()                            # what the runtime does with a call cancelled before its task ran
    _nothing_pending(env, d)
    message = env.enqueue(b"not stolen")
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}
    assert ctx.handles == {}


@pytest.mark.parametrize("opnum", [0, 9])
async def test_a_read_that_must_wait_goes_through_the_task_path_and_is_woken(make_env, opnum):
    env = await make_env()
    _, d, _ = await env.session()
    stub = _stub(opnum, _desc(d.handle, MQ_ACTION_RECEIVE, INFINITE), env.syntax == NDR64)
    ctx = FakeCall(env.syntax == NDR64, answer_now=True)
    task = asyncio.ensure_future(MODULES[opnum].serve(env.service, ctx, stub))
    await env.wait_until(lambda: len(d.waiting_message_read_operation_collection) == 1)
    message = env.enqueue(b"woken")
    answer = await task
    response = codec.decode_response(opnum, answer, env.syntax == NDR64)
    assert response.ErrorCode == st.MQ_OK
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}
    _nothing_pending(env, d)


async def test_a_cursor_read_with_a_timeout_is_never_tried_inline(make_env):
    env = await make_env()
    _, d, _ = await env.session()
    env.enqueue(b"one")
    cursor = env.qm.open_cursor(d)
    stub = _stub(9, _desc(d.handle, MQ_ACTION_PEEK_CURRENT, 1000, cursor=cursor.handle), env.syntax == NDR64)
    ctx = FakeCall(env.syntax == NDR64, answer_now=True)
    pending = start_receive2.serve(env.service, ctx, stub)
    assert inspect.iscoroutine(pending)
    _nothing_pending(env, d)
    answer = await pending
    assert codec.decode_response(9, answer, env.syntax == NDR64).ErrorCode == st.MQ_OK


# -- through the runtime: arrival order and co_cancel --------------------------------------------------------

def _pdu(ptype: int, call_id: int, body: bytes = b"") -> bytes:
    return struct.pack("<BBBB4sHHI", 5, 0, ptype, 3, b"\x10\0\0\0", 16 + len(body), 0, call_id) + body


def _request(call_id: int, opnum: int, stub: bytes) -> bytes:
    return _pdu(0, call_id, struct.pack("<IHH", len(stub), 0, opnum) + stub)


def _bind() -> bytes:
    ndr20 = uuid.UUID(NDR[0])
    item = struct.pack("<HBB", 0, 1, 0) + QM2QM_UUID.bytes_le + struct.pack("<HH", 1, 0)
    item += ndr20.bytes_le + struct.pack("<HH", 2, 0)
    return _pdu(11, 1, struct.pack("<HHIB3x", 5840, 5840, 0, 1) + item)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _read_pdu(sock: socket.socket) -> tuple[int, int, bytes]:
    """(ptype, call_id, stub of a response / status of a fault) of one whole PDU."""
    head = _recv_exactly(sock, 16)
    body = _recv_exactly(sock, struct.unpack_from("<H", head, 8)[0] - 16)
    return head[2], struct.unpack_from("<I", head, 12)[0], body[8:]


class RawSession:
    """A raw NDR connection with a qm2qm session on one descriptor."""

    def __init__(self, port: int, handle: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(_bind())
        _read_pdu(self.sock)
        stub = codec.encode_request(2, codec.RemoteQMOpenQueueRequest(uuid.uuid4(), 0, handle, handle, handle),
                                    False)
        self.sock.sendall(_request(2, 2, stub))
        _read_pdu(self.sock)

    def replies(self, n: int) -> dict[int, tuple[int, bytes]]:
        out = {}
        for _ in range(n):
            ptype, call_id, body = _read_pdu(self.sock)
            out[call_id] = (ptype, body)
        return out

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("syntax", [NDR], ids=["ndr"])
async def test_a_read_behind_a_queued_call_still_runs_after_it(make_env):
    # EndReceive(RR_NACK) runs as a task; a receive pipelined behind it in the same segment must not be
    # answered inline before it (it would find the queue empty): arrival order is kept.
    env = await make_env()
    _, d, _ = await env.session()
    message = env.enqueue(b"nacked then received")
    raw = await asyncio.to_thread(RawSession, env.server.port, d.handle)
    receive = _stub(9, _desc(d.handle, MQ_ACTION_RECEIVE, 0, request_id=1), False)

    def first_receive() -> bytes:
        raw.sock.sendall(_request(3, 9, receive))
        _, body = raw.replies(1)[3]
        return codec.decode_response(9, body, False).pphContext

    context = await asyncio.to_thread(first_receive)
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}
    nack = codec.encode_request(1, codec.RemoteQMEndReceiveRequest(context, RR_NACK), False)
    receive_again = _stub(9, _desc(d.handle, MQ_ACTION_RECEIVE, 0, request_id=2), False)

    def nack_then_receive():
        raw.sock.sendall(_request(4, 1, nack) + _request(5, 9, receive_again))
        return raw.replies(2)

    replies = await asyncio.to_thread(nack_then_receive)
    assert codec.decode_response(1, replies[4][1], False).ErrorCode == st.MQ_OK
    again = codec.decode_response(9, replies[5][1], False)
    assert again.ErrorCode == st.MQ_OK
    assert again.lpRemoteReadDesc2.pRemoteReadDesc.lpBuffer is not None
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}
    raw.close()
    await env.wait_until(lambda: len(env.adm.receive_handles) == 0)      # the raw session ran down: NACK
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}


@pytest.mark.parametrize("syntax", [NDR], ids=["ndr"])
async def test_a_cancel_for_a_read_answered_inline_is_ignored_and_leaves_nothing(make_env):
    env = await make_env()
    _, d, _ = await env.session()
    message = env.enqueue(b"peeked")
    raw = await asyncio.to_thread(RawSession, env.server.port, d.handle)
    receive = _stub(9, _desc(d.handle, MQ_ACTION_RECEIVE, INFINITE, request_id=1), False)

    def receive_and_cancel_then_version():
        raw.sock.sendall(_request(3, 9, receive) + _pdu(18, 3))    # request + co_cancel in one segment
        raw.sock.sendall(_request(4, 8, b""))
        return raw.replies(2)

    replies = await asyncio.to_thread(receive_and_cancel_then_version)
    ptype, body = replies[3]
    assert ptype == 2                                              # a response, not the cancel fault
    assert codec.decode_response(9, body, False).ErrorCode == st.MQ_OK
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}
    _nothing_pending(env, d)
    raw.close()
    await env.wait_until(lambda: len(env.adm.receive_handles) == 0)
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}


@pytest.mark.parametrize("syntax", [NDR], ids=["ndr"])
async def test_a_waiting_read_cancelled_in_its_segment_leaves_no_wait_behind(make_env):
    env = await make_env()
    _, d, _ = await env.session()
    raw = await asyncio.to_thread(RawSession, env.server.port, d.handle)
    receive = _stub(9, _desc(d.handle, MQ_ACTION_RECEIVE, INFINITE, request_id=1), False)

    def receive_and_cancel_then_version():
        raw.sock.sendall(_request(3, 9, receive) + _pdu(18, 3))
        raw.sock.sendall(_request(4, 8, b""))
        return raw.replies(2)

    replies = await asyncio.to_thread(receive_and_cancel_then_version)
    assert replies[3][0] == 3                                      # the cancel fault
    await env.wait_until(lambda: not env.server.calls_to_start)
    _nothing_pending(env, d)
    message = env.enqueue(b"not stolen")
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}
    raw.close()


# -- RemoteQMEndReceive (3.1.4.2): inline when the ACK is durable at once ---------------------------------------

class InstantStore(MemoryStore):
    """A store with nothing to wait for (as SqliteStore when no change is pending)."""

    async def durable(self) -> None:
        return None


class GatedStore(MemoryStore):
    """A store whose group commit waits for the test; notes a cancelled wait."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.cancelled = 0

    async def durable(self) -> None:
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


def _received(env, d) -> tuple[bytes, FakeCall]:
    ctx = FakeCall(env.syntax == NDR64, answer_now=True)
    answer = start_receive2.serve(env.service, ctx, _stub(9, _desc(d.handle, MQ_ACTION_RECEIVE, 0),
                                                          env.syntax == NDR64))
    return codec.decode_response(9, answer, env.syntax == NDR64).pphContext, ctx


def _end_stub(env, context: bytes, ack: int) -> bytes:
    return codec.encode_request(1, codec.RemoteQMEndReceiveRequest(context, ack), env.syntax == NDR64)


@pytest.mark.parametrize("ack", [RR_ACK, RR_NACK])
async def test_an_end_receive_durable_at_once_is_answered_inline_like_the_task(make_env, ack):
    env = await make_env(InstantStore())
    _, d, _ = await env.session()
    env.enqueue(b"one")
    env.enqueue(b"two")
    answers = []
    for answer_now in (True, False):
        context, ctx = _received(env, d)
        ctx.answer_now = answer_now
        answer = end_receive.serve(env.service, ctx, _end_stub(env, context, ack))
        if not answer_now:
            answer = await answer
        answers.append(answer)
    assert type(answers[0]) is bytes and answers[0] == answers[1]
    assert codec.decode_response(1, answers[0], env.syntax == NDR64).ErrorCode == st.MQ_OK
    assert len(env.queue.message_position_list) == (0 if ack == RR_ACK else 2)


async def test_an_ack_waits_for_durability_in_its_task_and_its_cancel_reaches_the_store(make_env):
    store = GatedStore()
    env = await make_env(store)
    _, d, _ = await env.session()
    env.enqueue(b"one", delivery_guarantee=DeliveryGuarantee.RECOVERABLE)
    context, ctx = _received(env, d)
    pending = end_receive.serve(env.service, ctx, _end_stub(env, context, RR_ACK))
    assert inspect.iscoroutine(pending)
    assert env.positions() == {} and ctx.handles == {}          # released at once, as the task would have
    task = asyncio.ensure_future(pending)
    await asyncio.sleep(0)
    assert not task.done()
    store.gate.set()
    answer = await task
    assert codec.decode_response(1, answer, env.syntax == NDR64).ErrorCode == st.MQ_OK

    store.gate.clear()
    env.enqueue(b"two", delivery_guarantee=DeliveryGuarantee.RECOVERABLE)
    context, ctx = _received(env, d)
    task = asyncio.ensure_future(end_receive.serve(env.service, ctx, _end_stub(env, context, RR_ACK)))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.cancelled == 1 and env.positions() == {}
