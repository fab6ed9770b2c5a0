"""RemoteQMOpenQueue (MS-MQQP 3.1.4.3, opnum 2): start a remote-read session on a descriptor qmcomm opened."""
from __future__ import annotations

import uuid

from qm2qm.mqqp import codec
from qm2qm.mqqp.adm import OpenQueueEntry
from qm2qm.mqqp.handlers._events import find_open_queue_descriptor
from qm2qm.mqqp.handlers._read import NULL_HANDLE
from qm2qm.mqqp.handlers._service import Service
from qm2qm.rpc.handles import HandleLimitReached
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st
from shared_adm.enums import RemoteReadState


def open_queue(service: Service, ctx: CallContext, lic_guid: uuid.UUID | None, mqs: int, h_queue: int,
               p_queue: int, dwp_context: int) -> tuple[int, bytes]:
    """The processing rules of 3.1.4.3; returns (rStatus, phContext). dwMQS and hQueue are ignored (<12>, <13>)."""
    if lic_guid is None or p_queue == 0 or dwp_context == 0:
        return st.MQ_ERROR_INVALID_PARAMETER, NULL_HANDLE
    if p_queue != dwp_context:
        return st.MQ_ERROR_INVALID_PARAMETER, NULL_HANDLE
    entry = OpenQueueEntry(open_queue_descriptor_handle=dwp_context, client_id=lic_guid, peer_host=ctx.peer_host)
    try:
        handle = ctx.new_handle(service.rrsession_handle_type, entry)
    except HandleLimitReached:              # [DESIGN] the association's most handles (rpc/handles.py)
        return st.MQ_ERROR_INSUFFICIENT_RESOURCES, NULL_HANDLE
    service.adm.open_queue_entries.add(entry)
    descriptor = find_open_queue_descriptor(service.qm, dwp_context, ctx.peer_host)
    if descriptor is not None and descriptor.remote_read_state is RemoteReadState.OPENED:
        descriptor.remote_read_state = RemoteReadState.READY_FOR_READ
    return st.MQ_OK, handle


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 2 on the wire: decode, apply 3.1.4.3, encode."""
    r = codec.decode_request(2, stub, ctx.ndr64)
    status, context = open_queue(service, ctx, r.pLicGuid, r.dwMQS, r.hQueue, r.pQueue, r.dwpContext)
    return codec.encode_response(2, codec.RemoteQMOpenQueueResponse(context, status), ctx.ndr64)
