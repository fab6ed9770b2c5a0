"""R_CancelReceive (MS-MQRR 3.1.4.8, opnum 8): answer a waiting read with MQ_ERROR_OPERATION_CANCELLED."""
from __future__ import annotations

from qm2qm.mqrr.codec import decode, encode, signed
from qm2qm.mqrr.handlers._queue import queue_of
from qm2qm.mqrr.service import Service
from qm2qm.remote_read.locks import cancel
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st


def cancel_receive(service: Service, ctx: CallContext, wire: bytes, request_id: int) -> int:
    """The processing rules of 3.1.4.8; returns the HRESULT (a read not waiting: the event's STATUS_NOT_FOUND)."""
    _, descriptor = queue_of(service, ctx, wire)
    if descriptor is None:
        return st.MQ_ERROR_INVALID_HANDLE
    entry = service.pending.find(descriptor.handle, request_id)
    if entry is None:
        return service.qm.cancel_waiting_message_read_request(descriptor, request_id,
                                                              st.MQ_ERROR_OPERATION_CANCELLED)
    status = cancel(service, entry, st.MQ_ERROR_OPERATION_CANCELLED)
    return st.MQ_OK if status == st.MQ_OK else status


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 8 on the wire: decode, apply 3.1.4.8, encode."""
    r = decode(8, stub, ctx.ndr64)
    return encode(8, ctx.ndr64, ErrorCode=signed(cancel_receive(service, ctx, r["phContext"], r["dwRequestId"])))
