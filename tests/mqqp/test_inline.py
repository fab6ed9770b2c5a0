"""The lanes of opnums 1, 9 and 10 (qm2qm/mqqp/inline.py, end_receive.lane): a call answered from the stub bytes
straight to the response bytes must answer exactly what the opnum's handler answers — bytes, handles, queue state,
the fault for hostile bytes; hand the runtime the handler's own coroutine for a read that must wait; and leave the
call to the handler, having changed nothing, for every shape it does not serve (MS-MQQP 3.1.4.2, 3.1.4.10,
3.1.4.11)."""
from __future__ import annotations

import asyncio
import inspect
import random
import struct
import uuid

import pytest

from qm2qm.mqqp import codec, codec_lane, inline
from qm2qm.mqqp.constants import (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE,
                                  MQ_LOOKUP_PEEK_CURRENT, MQ_LOOKUP_PEEK_NEXT, MQ_LOOKUP_PEEK_PREV,
                                  MQ_LOOKUP_RECEIVE_CURRENT, QM2QM_UUID, RR_ACK, RR_NACK)
from qm2qm.mqqp.handlers import end_receive, start_receive, start_receive2, start_receive_by_lookup_id
from qm2qm.rpc.faults import NCA_S_FAULT_UNSPEC
from qm2qm.rpc.interface import RpcFault
from qm2qm.remote_read.locks import release
from shared_adm import queue, queue_manager
from shared_adm import status as st
from shared_adm.clock import INFINITE

from .conftest import NDR64
from .test_read_fast_path import FakeCall

MODULES = {1: end_receive, 9: start_receive2, 10: start_receive_by_lookup_id}
LANES = {1: end_receive.lane, 9: inline.read2, 10: inline.lookup_read}
ACTIONS_9 = [MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE, 0x1234]
ACTIONS_10 = [MQ_LOOKUP_PEEK_CURRENT, MQ_LOOKUP_PEEK_NEXT, MQ_LOOKUP_PEEK_PREV, MQ_LOOKUP_RECEIVE_CURRENT, 0x77]


async def _world(make_env, bodies, monkeypatch=None):
    """An Env with these messages queued, a qm2qm session on the queue and two cursors on its descriptor; with
    ``monkeypatch``, its handles and identifiers drawn from a fixed seed (two such worlds are the same)."""
    if monkeypatch is not None:
        fixed = random.Random(1)
        monkeypatch.setattr(queue_manager.secrets, "randbits", fixed.getrandbits)
        for module in (queue_manager, queue):
            monkeypatch.setattr(module.uuid, "uuid4", lambda: uuid.UUID(int=fixed.getrandbits(128), version=4))
    env = await make_env()
    for i, body in enumerate(bodies):
        env.enqueue(body, label=f"m{i}" if i % 3 else "", priority=i % 8)
    _, descriptor, _ = await env.session()
    cursors = [env.qm.open_cursor(descriptor).handle for _ in range(2)]
    return env, descriptor, cursors


def _draw(rng: random.Random, opnum: int, handle: int, cursors: list[int], lookup_ids: list[int]) -> tuple:
    """A request of ``opnum``: mostly well formed, sometimes naming a wrong handle, cursor, action or timeout."""
    queue = rng.choice([handle] * 6 + [handle + 99, 0])
    desc = codec.REMOTEREADDESC(
        hRemoteQueue=queue, dwQueue=rng.choice([queue] * 5 + [queue + 1]),
        hCursor=rng.choice([0, 0] + cursors + [12345]) if opnum == 9 else rng.choice([0] * 6 + cursors),
        ulAction=rng.choice(ACTIONS_9 if opnum == 9 else ACTIONS_10),
        ulTimeout=rng.choice([0, 0, 0, 5, INFINITE]) if opnum == 9 else rng.choice([0] * 6 + [5]),
        dwRequestID=rng.randrange(1 << 32), Reserved=rng.choice([0, 0, 1, 7]),
        dwArriveTime=rng.choice([0, rng.randrange(1 << 32)]), eAckNack=rng.choice([0, 0, 1, 2]))
    desc2 = codec.REMOTEREADDESC2(desc, rng.choice([0, rng.randrange(1 << 56)]))
    if opnum == 9:
        return codec.RemoteQMStartReceive2Request(desc2), desc
    lookup_id = rng.choice(lookup_ids + [0, 0, 0xFFFFFFFFFFFFFFFF, 424242])
    return codec.RemoteQMStartReceiveByLookupIdRequest(lookup_id, desc2), desc


def _end_stub(rng: random.Random, ctx: FakeCall, ndr64: bool) -> tuple[bytes, int]:
    """RemoteQMEndReceive of a receive's handle (or of a closed, NULL or foreign one) with some dwAck."""
    wire = rng.choice(list(ctx.handles) * 4 + [bytes(20), struct.pack("<I", 999) + bytes(16)])
    ack = rng.choice([RR_ACK, RR_ACK, RR_NACK, 0, 3])
    return codec.encode_request(1, codec.RemoteQMEndReceiveRequest(wire, ack), ndr64, strict=False), ack


def _mangle(rng: random.Random, stub: bytes) -> bytes:
    """The stub with one to three bytes set at random, or a byte added or dropped."""
    kind = rng.choice(["set", "set", "longer", "shorter"])
    if kind == "longer":
        return stub + bytes([rng.randrange(256)])
    if kind == "shorter":
        return stub[:-1]
    data = bytearray(stub)
    for _ in range(rng.randint(1, 3)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


async def _settled(answer):
    """A handler's or lane's answer as bytes: an ACK waiting for its commit (a Future or a coroutine) awaited."""
    return await answer if isinstance(answer, asyncio.Future) or inspect.iscoroutine(answer) else answer


def _by_handler(env, ctx: FakeCall, opnum: int, stub: bytes):
    try:
        answer = MODULES[opnum].serve(env.service, ctx, stub)
    except RpcFault as fault:
        return fault.status                 # a request the decoder refuses: the runtime's fault
    return _unless_waiting(answer, opnum)


def _unless_waiting(answer, opnum: int):
    """A read's coroutine (one that must wait: the runtime's task path, not run here) closed, as "waits"."""
    if inspect.iscoroutine(answer) and opnum != 1:
        assert inspect.getcoroutinestate(answer) == inspect.CORO_CREATED      # not started: it changed nothing
        answer.close()
        return "waits"
    return answer


@pytest.mark.parametrize("seed", range(6))
async def test_a_lane_answers_every_drawn_request_exactly_as_the_handler_and_changes_nothing_when_it_declines(
        make_env, monkeypatch, seed):
    rng = random.Random(seed)
    bodies = [bytes([i]) * rng.choice([0, 1, 3, 100, 1024]) for i in range(12)]
    lane_env, lane_desc, cursors = await _world(make_env, bodies, monkeypatch)
    ref_env, ref_desc, ref_cursors = await _world(make_env, bodies, monkeypatch)
    assert (lane_desc.handle, cursors) == (ref_desc.handle, ref_cursors)      # two identical worlds
    ndr64 = lane_env.syntax == NDR64
    lane_ctx, ref_ctx = FakeCall(ndr64, answer_now=True), FakeCall(ndr64, answer_now=True)
    served = declined = received = acked = waits = 0
    for _ in range(200):
        opnum = rng.choice([1, 9, 9, 10])
        if opnum == 1:
            stub, desc = _end_stub(rng, lane_ctx, ndr64)
        else:
            lookup_ids = [p.lookup_identifier for p in ref_env.queue.message_position_list]
            request, desc = _draw(rng, opnum, lane_desc.handle, cursors, lookup_ids)
            stub = codec.encode_request(opnum, request, ndr64)
        mangled = rng.random() < 0.25
        if mangled:                         # hostile bytes: a few changed, or one too many or too few
            stub = _mangle(rng, stub)
        answer = LANES[opnum](lane_env.service, lane_ctx, stub)
        if answer is None:
            declined += 1
            answer = _by_handler(lane_env, lane_ctx, opnum, stub)
        elif _unless_waiting(answer, opnum) == "waits":
            answer = "waits"
            waits += 1
        elif not mangled:
            served += 1
            received += opnum != 1 and desc.ulAction in (MQ_ACTION_RECEIVE, MQ_LOOKUP_RECEIVE_CURRENT)
            acked += opnum == 1 and desc == RR_ACK
        assert await _settled(answer) == await _settled(_by_handler(ref_env, ref_ctx, opnum, stub)), (opnum, desc)
        assert lane_env.positions() == ref_env.positions()
        assert list(lane_ctx.handles) == list(ref_ctx.handles)
        if rng.random() < 0.2 and lane_ctx.handles:        # an RR_NACK now and then: the queue does not run dry
            wire = rng.choice(list(lane_ctx.handles))
            for env, ctx in ((lane_env, lane_ctx), (ref_env, ref_ctx)):
                release(env.service, ctx.handles.pop(wire))
    assert served > 40 and declined > 10 and received > 5 and acked > 3 and waits > 3    # every side is drawn


async def test_a_lane_declines_a_receive_a_read_that_must_wait_and_a_stub_it_does_not_lay_out(make_env):
    env, descriptor, [cursor, _] = await _world(make_env, [b"only"])
    empty, empty_descriptor, _ = await _world(make_env, [])
    ndr64 = env.syntax == NDR64

    def stub9(handle, action, timeout=0, cursor=0):
        desc = codec.REMOTEREADDESC(hRemoteQueue=handle, dwQueue=handle, hCursor=cursor, ulAction=action,
                                    ulTimeout=timeout)
        return codec.encode_request(9, codec.RemoteQMStartReceive2Request(codec.REMOTEREADDESC2(desc)), ndr64)

    before = env.positions()
    handle = descriptor.handle
    ctx = FakeCall(ndr64, answer_now=True)
    assert inline.read2(env.service, ctx, stub9(handle, 0x1234)) is None
    assert inline.read2(env.service, ctx, stub9(handle, MQ_ACTION_PEEK_CURRENT)[:-1]) is None
    # a cursor read with a timeout is never tried at once (it may move its cursor before waiting): the task's
    cursor_read = inline.read2(env.service, ctx, stub9(handle, MQ_ACTION_PEEK_NEXT, 1000, cursor))
    assert inspect.getcoroutinestate(cursor_read) == inspect.CORO_CREATED
    cursor_read.close()
    assert env.positions() == before and ctx.handles == {}
    assert inline.read2(env.service, ctx, stub9(handle, MQ_ACTION_PEEK_NEXT, 0, cursor)) is not None
    # an empty queue: a receive that would wait is the handler's coroutine, not started, no wait registered yet
    stub = stub9(empty_descriptor.handle, MQ_ACTION_RECEIVE, INFINITE)
    waiting = inline.read2(empty.service, ctx, stub)
    assert inspect.iscoroutine(waiting) and waiting.cr_code is start_receive2.serve_request.__code__
    assert not empty_descriptor.waiting_message_read_operation_collection
    assert len(empty.adm.remote_read_entries) == 0 and ctx.handles == {}
    waiting.close()


async def test_a_read_that_must_wait_is_tried_once_by_the_lane_and_once_by_its_task_which_then_waits_and_delivers(
        make_env, monkeypatch):
    env, descriptor, _ = await _world(make_env, [])
    ndr64 = env.syntax == NDR64
    tries = []
    read_event = start_receive.read_event
    monkeypatch.setattr(start_receive, "read_event", lambda *a: tries.append(a[2]) or read_event(*a))
    desc = codec.REMOTEREADDESC(hRemoteQueue=descriptor.handle, dwQueue=descriptor.handle,
                                ulAction=MQ_ACTION_RECEIVE, ulTimeout=INFINITE, dwRequestID=7)
    stub = codec.encode_request(9, codec.RemoteQMStartReceive2Request(codec.REMOTEREADDESC2(desc, 3)), ndr64)
    ctx = FakeCall(ndr64, answer_now=True)
    task = asyncio.ensure_future(inline.read2(env.service, ctx, stub))
    for _ in range(3):
        await asyncio.sleep(0)
    assert len(tries) == 2 and not task.done()          # the lane's try, then the task's, which now waits
    assert len(descriptor.waiting_message_read_operation_collection) == 1
    env.enqueue(b"late")
    response = codec.decode_response(9, await task, ndr64)
    assert response.ErrorCode == st.MQ_OK and len(tries) == 2
    assert list(ctx.handles) == [response.pphContext] and env.positions() != {}


async def test_a_receive_whose_answer_cannot_be_encoded_closes_its_handle_and_returns_the_message(
        make_env, monkeypatch):
    env, descriptor, _ = await _world(make_env, [b"kept"])
    ndr64 = env.syntax == NDR64
    ctx = FakeCall(ndr64, answer_now=True)
    desc = codec.REMOTEREADDESC(hRemoteQueue=descriptor.handle, dwQueue=descriptor.handle,
                                ulAction=MQ_ACTION_RECEIVE)
    stub = codec.encode_request(9, codec.RemoteQMStartReceive2Request(codec.REMOTEREADDESC2(desc)), ndr64)
    before = env.positions()

    def unpackable(*args):
        raise struct.error("a value out of range")
    monkeypatch.setattr(inline, "pack_response_2x", unpackable)
    with pytest.raises(struct.error):
        inline.read2(env.service, ctx, stub)
    assert ctx.handles == {} and env.positions() == before


async def test_peeks_through_the_runtime_take_the_lane_and_a_lane_that_raises_costs_the_call_a_fault(make_env):
    env, descriptor, _ = await _world(make_env, [b"a", b"b"])
    [interface] = [i for i in env.server.registry.values() if i.uuid == QM2QM_UUID]
    taken = []
    lane = interface.lanes[9]
    interface.lanes[9] = lambda ctx, stub: taken.append(len(stub)) or lane(ctx, stub)
    client = env.clients[0]
    read = await client.call(client.start_receive2, descriptor.handle, MQ_ACTION_PEEK_CURRENT)
    assert read.status == st.MQ_OK and read.buffer and len(taken) == 1

    def broken(ctx, stub):
        raise RuntimeError("a defect in a lane")
    interface.lanes[9] = broken
    status = await client.call(client.fault, client.start_receive2, descriptor.handle, MQ_ACTION_PEEK_CURRENT)
    assert status == NCA_S_FAULT_UNSPEC          # as for a handler that raises
    interface.lanes[9] = lane
    again = await client.call(client.start_receive2, descriptor.handle, MQ_ACTION_PEEK_CURRENT)
    assert (again.status, again.buffer) == (st.MQ_OK, read.buffer)     # the connection and the queue survive


def test_pack_response_2x_refuses_a_value_out_of_range():
    with pytest.raises(struct.error):
        codec_lane.pack_response_2x(False, bytes(20), 0, codec.REMOTEREADDESC(hRemoteQueue=1 << 32), None, 0, 0, 0)
