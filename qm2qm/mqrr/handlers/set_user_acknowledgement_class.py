"""R_SetUserAcknowledgementClass (MS-MQRR 3.1.4.14, opnum 14): mark a transactionally received message rejected."""
from __future__ import annotations

from qm2qm.mqrr.codec import decode, encode, signed
from qm2qm.mqrr.handlers._queue import queue_of
from qm2qm.mqrr.service import Service
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st
from shared_adm.enums import MessageClass


def set_user_acknowledgement_class(service: Service, ctx: CallContext, wire: bytes, lookup_id: int,
                                   ack_class: int) -> int:
    """The processing rules of 3.1.4.14; returns the HRESULT."""
    _, descriptor = queue_of(service, ctx, wire)
    if descriptor is None:
        return st.MQ_ERROR_INVALID_HANDLE
    queue = descriptor.queue_reference
    position = queue.message_position_list.get(lookup_id) if queue is not None else None
    if position is None:
        return st.MQ_ERROR_MESSAGE_NOT_FOUND
    operation = service.qm.transactional_operation_on(position)
    if operation is None:
        return st.MQ_ERROR_TRANSACTION_USAGE
    if ack_class != 0x0000:
        operation.dequeue_reason = MessageClass.NACK_RECEIVE_REJECTED
    return st.MQ_OK


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 14 on the wire: decode, apply 3.1.4.14, encode."""
    r = decode(14, stub, ctx.ndr64)
    status = set_user_acknowledgement_class(service, ctx, r["phContext"], r["LookupId"], r["usClass"])
    return encode(14, ctx.ndr64, ErrorCode=signed(status))
