"""RemoteQMStartReceiveByLookupId (MS-MQQP 3.1.4.11, opnum 10): peek or receive the message a lookup identifier names."""
from __future__ import annotations

from typing import Any

from qm2qm.mqqp import codec
from qm2qm.mqqp.handlers._events import find_open_queue_descriptor
from qm2qm.mqqp.handlers._read import Delivery, answer2, deliver, encode_delivery, read_entry
from qm2qm.mqqp.handlers._service import Service
from qm2qm.remote_read.actions import LOOKUP_ACTIONS
from qm2qm.remote_read.reads import lookup_event, run_read_now
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st
from shared_adm.enums import MessageSeekAction

FIRST_LOOKUP_ID = 0                         # with MQ_LOOKUP_*_NEXT: SeekFirst
LAST_LOOKUP_ID = 0xFFFFFFFFFFFFFFFF         # with MQ_LOOKUP_*_PREV: SeekLast


def lookup_operation(seek: MessageSeekAction, lookup_id: int) -> MessageSeekAction:
    """iLookupOperation (3.1.4.11): *_NEXT with LookupId 0 is SeekFirst, *_PREV with 0xFFFFFFFFFFFFFFFF SeekLast."""
    if seek is MessageSeekAction.SEEK_NEXT and lookup_id == FIRST_LOOKUP_ID:
        return MessageSeekAction.SEEK_FIRST
    if seek is MessageSeekAction.SEEK_PREVIOUS and lookup_id == LAST_LOOKUP_ID:
        return MessageSeekAction.SEEK_LAST
    return seek


def start_receive_by_lookup_id(service: Service, ctx: CallContext, lookup_id: int, desc: Any) -> Delivery:
    """The processing rules of 3.1.4.11 for one LookupId and REMOTEREADDESC (lookup reads never wait)."""
    adm, qm = service.adm, service.qm
    if desc is None:
        return Delivery(st.MQ_ERROR_INVALID_HANDLE)
    if desc.hRemoteQueue == 0 or desc.ulTimeout != 0 or desc.hCursor != 0:
        return Delivery(st.MQ_ERROR_INVALID_PARAMETER)
    action = LOOKUP_ACTIONS.get(desc.ulAction)
    if action is None:
        return Delivery(st.MQ_ERROR_INVALID_PARAMETER)
    peek, seek = action
    if lookup_id == FIRST_LOOKUP_ID and seek is not MessageSeekAction.SEEK_NEXT:
        return Delivery(st.MQ_ERROR_INVALID_PARAMETER)
    if adm.open_queue_entries.find(desc.hRemoteQueue) is None:
        return Delivery(st.MQ_ERROR_INVALID_PARAMETER)
    descriptor = find_open_queue_descriptor(qm, desc.hRemoteQueue, ctx.peer_host)
    if descriptor is None:
        return Delivery(st.MQ_ERROR_INVALID_HANDLE)
    seek = lookup_operation(seek, lookup_id)
    if peek:        # run_read_now with timeout 0 (checked above): no RemoteReadEntry, no closures
        return deliver(service, ctx, None, lookup_event(qm, descriptor, lookup_id, True, seek), receive=False)
    entry = read_entry(desc, descriptor)
    return run_read_now(
        service, entry,
        lambda: lookup_event(qm, descriptor, lookup_id, False, seek),
        lambda result: deliver(service, ctx, entry, result, receive=True))


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 10 on the wire: decode, apply 3.1.4.11, encode."""
    request = codec.decode_request(10, stub, ctx.ndr64)
    desc2 = request.lpRemoteReadDesc2
    delivery = start_receive_by_lookup_id(service, ctx, request.LookupId, desc2.pRemoteReadDesc)
    response = codec.RemoteQMStartReceiveByLookupIdResponse(delivery.handle, answer2(desc2, delivery),
                                                           delivery.status)
    return encode_delivery(service, ctx, 10, response, delivery)
