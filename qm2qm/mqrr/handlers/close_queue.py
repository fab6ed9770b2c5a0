"""R_CloseQueue (MS-MQRR 3.1.4.3, opnum 3) and the queue context handle rundown (3.1.6.2)."""
from __future__ import annotations

from qm2qm.mqrr.codec import decode, encode, handle_bytes, signed
from qm2qm.mqrr.handlers._queue import queue_of
from qm2qm.mqrr.service import QueueContext, Service
from qm2qm.remote_read.locks import release_descriptor
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st

NULL_HANDLE = bytes(20)


def close_context(service: Service, context: QueueContext) -> int:
    """Close Queue for the context's descriptor and remove its PendingRequestTable entries — their Locked
    messages NACKed, their waiting reads cancelled — once (3.1.4.3, 3.1.6.2)."""
    if context.closed:
        return st.MQ_ERROR_INVALID_HANDLE
    context.closed = True
    service.move_contexts.pop(context.move_context, None)
    descriptor = context.descriptor
    release_descriptor(service, descriptor.handle, st.MQ_ERROR_OPERATION_CANCELLED)
    return service.qm.close_queue(descriptor)


def close_queue(service: Service, ctx: CallContext, wire: bytes) -> tuple[int, bytes]:
    """The processing rules of 3.1.4.3; returns (HRESULT, pphContext out)."""
    context, descriptor = queue_of(service, ctx, wire)
    if context is not None and not context.closed and descriptor is None:
        # its descriptor was closed under it (DELETE /v1/handles): the context goes as qm2qm's and qmcomm's do
        context.closed = True
        service.move_contexts.pop(context.move_context, None)
        return st.MQ_OK, ctx.close_handle(wire)
    if descriptor is None:
        return st.MQ_ERROR_INVALID_HANDLE, wire
    close_context(service, context)
    return st.MQ_OK, ctx.close_handle(wire)


def run_down(service: Service, context: QueueContext) -> None:
    """Queue Context Handles Rundown Routine (3.1.6.2): Close Queue, NACK every entry's message, forget them."""
    close_context(service, context)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 3 on the wire: decode, apply 3.1.4.3, encode."""
    wire = handle_bytes(decode(3, stub, ctx.ndr64)["pphContext"])
    status, out = close_queue(service, ctx, wire)
    return encode(3, ctx.ndr64, pphContext=out, ErrorCode=signed(status))
