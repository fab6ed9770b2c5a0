"""RemoteQMStartReceive (MS-MQQP 3.1.4.1, opnum 0): peek or receive through an open queue, with or without a cursor."""
from __future__ import annotations

from typing import Any

from qm2qm.mqqp import codec
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE
from qm2qm.mqqp.handlers._events import find_open_queue_descriptor
from qm2qm.mqqp.handlers._read import Delivery, answer, deliver, encode_delivery, read_entry
from qm2qm.mqqp.handlers._service import Service
from qm2qm.remote_read.actions import READ_ACTIONS as ACTIONS
from qm2qm.remote_read.cursors import find_cursor
from qm2qm.remote_read.reads import answerable_now, read_event, run_read, would_wait
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st


def _check(service: Service, ctx: CallContext, desc: Any) -> tuple[Delivery | None, Any, Any]:
    """The argument checks of 3.1.4.1 → (the refusal or None, OpenQueueDescriptor, Cursor or None)."""
    adm = service.adm
    if desc is None:
        return Delivery(st.MQ_ERROR_INVALID_HANDLE), None, None
    if desc.dwQueue == 0 or desc.dwQueue != desc.hRemoteQueue:
        return Delivery(st.MQ_ERROR_INVALID_PARAMETER), None, None
    if adm.remote_read_entries.find(desc.hRemoteQueue, desc.dwRequestID) is not None:
        return Delivery(st.MQ_ERROR_INVALID_PARAMETER), None, None
    if desc.hCursor == 0 and desc.ulAction == MQ_ACTION_PEEK_NEXT:
        return Delivery(st.STATUS_INVALID_PARAMETER), None, None
    if desc.ulAction not in ACTIONS:
        return Delivery(st.MQ_ERROR_INVALID_PARAMETER), None, None
    if adm.open_queue_entries.find(desc.hRemoteQueue) is None:
        return Delivery(st.MQ_ERROR_INVALID_PARAMETER), None, None
    descriptor = find_open_queue_descriptor(service.qm, desc.hRemoteQueue, ctx.peer_host)
    if descriptor is None:
        return Delivery(st.MQ_ERROR_INVALID_HANDLE), None, None
    cursor = None
    if desc.hCursor != 0:
        cursor = find_cursor(descriptor, desc.hCursor)
        if cursor is None:
            return Delivery(st.STATUS_INVALID_PARAMETER), None, None
    return None, descriptor, cursor


def _begin(service: Service, ctx: CallContext, desc: Any, descriptor: Any, cursor: Any, timeout: int):
    """The RemoteReadEntry (3.1.1.2), the read event for ulAction (Dequeue Message Begin, Peek Message or
    Peek Next Message) and the delivery of its result."""
    entry = read_entry(desc, descriptor)
    receive = desc.ulAction == MQ_ACTION_RECEIVE
    return (entry,
            lambda: read_event(service.qm, descriptor, desc.ulAction, timeout, cursor, desc.dwRequestID),
            lambda result: deliver(service, ctx, entry, result, receive=receive))


async def start_receive(service: Service, ctx: CallContext, desc: Any) -> Delivery:
    """The processing rules of 3.1.4.1 (also those of RemoteQMStartReceive2, 3.1.4.10) for one REMOTEREADDESC."""
    refused, descriptor, cursor = _check(service, ctx, desc)
    if refused is not None:
        return refused
    return await run_read(service, *_begin(service, ctx, desc, descriptor, cursor, desc.ulTimeout))


def start_receive_now(service: Service, ctx: CallContext, desc: Any) -> Delivery | None:
    """start_receive when the read completes at once (3.1.4.1): the same Delivery, or None — having changed
    nothing and registered no wait (MS-MQDMPR 3.1.7.3.1) — when the read would have to wait
    (qm2qm.remote_read.reads.answerable_now)."""
    if desc is not None and not answerable_now(desc.ulTimeout, desc.hCursor != 0):
        return None
    refused, descriptor, cursor = _check(service, ctx, desc)
    if refused is not None:
        return refused
    # run_read_now(*_begin(...)) without its closures; only a receive's delivery holds a RemoteReadEntry
    action = desc.ulAction
    result = read_event(service.qm, descriptor, action, 0, cursor, desc.dwRequestID)
    if would_wait(desc.ulTimeout, result):
        return None
    if action != MQ_ACTION_RECEIVE:
        return deliver(service, ctx, None, result, receive=False)
    return deliver(service, ctx, read_entry(desc, descriptor), result, receive=True)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes | Any:
    """Opnum 0 on the wire: decode, apply 3.1.4.1, encode — inline when the runtime allows it
    (ctx.answer_now) and the read completes at once; otherwise as a coroutine (a task)."""
    if not getattr(ctx, "answer_now", False):
        return _serve(service, ctx, stub)
    request = codec.decode_request(0, stub, ctx.ndr64)
    delivery = start_receive_now(service, ctx, request.lpRemoteReadDesc)
    if delivery is None:
        return _serve_request(service, ctx, request)
    return _encode(service, ctx, request, delivery)


async def _serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    return await _serve_request(service, ctx, codec.decode_request(0, stub, ctx.ndr64))


async def _serve_request(service: Service, ctx: CallContext, request: Any) -> bytes:
    delivery = await start_receive(service, ctx, request.lpRemoteReadDesc)
    return _encode(service, ctx, request, delivery)


def _encode(service: Service, ctx: CallContext, request: Any, delivery: Delivery) -> bytes:
    response = codec.RemoteQMStartReceiveResponse(
        delivery.handle, answer(request.lpRemoteReadDesc, delivery), delivery.status)
    return encode_delivery(service, ctx, 0, response, delivery)
