"""R_EndReceive (MS-MQRR 3.1.4.9, opnum 9): ACK deletes the received message, NACK makes it available again."""
from __future__ import annotations

from typing import Any

from qm2qm.mqrr.codec import decode, encode, signed
from qm2qm.mqrr.constants import RPC_S_INVALID_BOUND, RR_ACK, RR_NACK
from qm2qm.mqrr.handlers._queue import queue_of
from qm2qm.mqrr.service import Service
from qm2qm.remote_read.durable import answer_once_durable
from qm2qm.remote_read.locks import finish_receive
from qm2qm.rpc.interface import CallContext, RpcFault
from shared_adm import status as st


def end(service: Service, ctx: CallContext, wire: bytes, ack: int, request_id: int) -> tuple[int, bool]:
    """The processing rules of 3.1.4.9 and 3.1.4.15: (HRESULT, whether the answer waits for the ACK's commit).
    iTransactional is whether the entry's receive was in a transaction, whichever of the two
    methods ends it: R_StartTransactionalReceive without a transaction is R_StartReceive (3.1.4.13), yet its
    client ends it with R_EndTransactionalReceive — with iTransactional True its message would stay Locked."""
    if ack not in (RR_NACK, RR_ACK):
        raise RpcFault(RPC_S_INVALID_BOUND, f"dwAck {ack} is outside [range(1,2)]")
    context, descriptor = queue_of(service, ctx, wire)
    handle = context.descriptor.handle if context is not None else None
    if handle is None or not service.table.has_handle(handle):
        return st.MQ_ERROR_INVALID_HANDLE, False
    entry = service.table.find(handle, request_id)
    if entry is None:
        return st.MQ_ERROR_INVALID_PARAMETER, False
    if entry.position is None:
        # still waiting: it has no message yet. Its entry stays with the read (removing it would leave a
        # message the read may yet Lock without an entry to end it).
        return st.MQ_ERROR_MESSAGE_NOT_FOUND, False
    if descriptor is None:
        service.locked.remove(entry)
        return st.MQ_ERROR_INVALID_HANDLE, False
    return finish_receive(service, entry, ack=ack == RR_ACK, transactional=entry.transaction is not None)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes | Any:
    """Opnum 9 on the wire; inline when the ACK is durable at once (qm2qm.remote_read.durable)."""
    r = decode(9, stub, ctx.ndr64)
    status, wait = end(service, ctx, r["phContext"], r["dwAck"], r["dwRequestId"])
    return answer(service, ctx, 9, status, wait)


def answer(service: Service, ctx: CallContext, opnum: int, status: int, wait: bool) -> bytes | Any:
    """The response of opnum 9 or 15: now, or once the ACK is durable (qm2qm.remote_read.durable)."""
    if not wait:
        return encode(opnum, ctx.ndr64, ErrorCode=signed(status))
    return answer_once_durable(service.qm, lambda failed: encode(opnum, ctx.ndr64,
                                                                 ErrorCode=signed(status if failed is None else failed)),
                               "R_EndReceive: the ACK")
