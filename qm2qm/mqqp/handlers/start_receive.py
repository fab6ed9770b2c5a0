"""RemoteQMStartReceive (MS-MQQP 3.1.4.1, opnum 0): peek or receive through an open queue, with or without a cursor."""
from __future__ import annotations

from typing import Any

from qm2qm.mqqp import codec
from qm2qm.mqqp.adm import RemoteReadEntry
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE
from qm2qm.mqqp.handlers._events import find_cursor, find_open_queue_descriptor
from qm2qm.mqqp.handlers._read import Delivery, answer, deliver, encode_delivery, wait_for_read
from qm2qm.mqqp.handlers._service import Service
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st

ACTIONS = frozenset({MQ_ACTION_RECEIVE, MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT})


async def start_receive(service: Service, ctx: CallContext, desc: Any) -> Delivery:
    """The processing rules of 3.1.4.1 (also those of RemoteQMStartReceive2, 3.1.4.10) for one REMOTEREADDESC."""
    adm, qm = service.adm, service.qm
    if desc is None:
        return Delivery(st.MQ_ERROR_INVALID_HANDLE)
    if desc.dwQueue == 0 or desc.dwQueue != desc.hRemoteQueue:
        return Delivery(st.MQ_ERROR_INVALID_PARAMETER)
    if adm.remote_read_entries.find(desc.hRemoteQueue, desc.dwRequestID) is not None:
        return Delivery(st.MQ_ERROR_INVALID_PARAMETER)
    if desc.hCursor == 0 and desc.ulAction == MQ_ACTION_PEEK_NEXT:
        return Delivery(st.STATUS_INVALID_PARAMETER)
    if desc.ulAction not in ACTIONS:
        return Delivery(st.MQ_ERROR_INVALID_PARAMETER)
    if adm.open_queue_entries.find(desc.hRemoteQueue) is None:
        return Delivery(st.MQ_ERROR_INVALID_PARAMETER)
    descriptor = find_open_queue_descriptor(qm, desc.hRemoteQueue)
    if descriptor is None:
        return Delivery(st.MQ_ERROR_INVALID_HANDLE)
    cursor = None
    if desc.hCursor != 0:
        cursor = find_cursor(descriptor, desc.hCursor)
        if cursor is None:
            return Delivery(st.STATUS_INVALID_PARAMETER)
    entry = RemoteReadEntry(open_queue_descriptor_handle=desc.hRemoteQueue, timeout=desc.ulTimeout,
                            action=desc.ulAction, request_id=desc.dwRequestID, user_message_packet=None,
                            open_queue_descriptor=descriptor)
    adm.remote_read_entries.add(entry)
    receive = desc.ulAction == MQ_ACTION_RECEIVE
    try:
        if receive:
            result = qm.dequeue_message_begin(descriptor, desc.ulTimeout, cursor=cursor, tag=desc.dwRequestID)
        elif desc.ulAction == MQ_ACTION_PEEK_CURRENT:
            result = qm.peek_message(descriptor, desc.ulTimeout, cursor=cursor, tag=desc.dwRequestID)
        else:
            result = qm.peek_next_message(descriptor, desc.ulTimeout, cursor=cursor, tag=desc.dwRequestID)
        result = await wait_for_read(entry, result)
        return deliver(service, ctx, entry, result, receive=receive)
    finally:
        adm.remote_read_entries.remove(entry)


async def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 0 on the wire: decode, apply 3.1.4.1, encode."""
    request = codec.decode_request(0, stub, ctx.ndr64)
    delivery = await start_receive(service, ctx, request.lpRemoteReadDesc)
    response = codec.RemoteQMStartReceiveResponse(
        delivery.handle, answer(request.lpRemoteReadDesc, delivery), delivery.status)
    return encode_delivery(service, ctx, 0, response, delivery)
