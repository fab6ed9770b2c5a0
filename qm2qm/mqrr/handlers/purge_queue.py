"""R_PurgeQueue (MS-MQRR 3.1.4.6, opnum 6): Purge Queue when the queue was opened with ReceiveAccess."""
from __future__ import annotations

from qm2qm.mqrr.codec import decode, encode, signed
from qm2qm.mqrr.constants import STATUS_ACCESS_DENIED
from qm2qm.mqrr.handlers._queue import queue_of
from qm2qm.mqrr.service import Service
from qm2qm.remote_read.durable import await_durable
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st
from shared_adm.enums import QueueAccessType


async def purge_queue(service: Service, ctx: CallContext, wire: bytes) -> int:
    """The processing rules of 3.1.4.6; MQ_OK once the purge is durable."""
    _, descriptor = queue_of(service, ctx, wire)
    if descriptor is None:
        return st.MQ_ERROR_INVALID_HANDLE
    if descriptor.access_type is QueueAccessType.RECEIVE_ACCESS:
        if descriptor.queue_reference is None:
            return st.MQ_ERROR_QUEUE_DELETED
        service.qm.purge_queue(descriptor.queue_reference)
        failed = await await_durable(service.qm.durable(), "R_PurgeQueue")
        return st.MQ_OK if failed is None else failed
    return STATUS_ACCESS_DENIED


async def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 6 on the wire: decode, apply 3.1.4.6, encode."""
    status = await purge_queue(service, ctx, decode(6, stub, ctx.ndr64)["phContext"])
    return encode(6, ctx.ndr64, ErrorCode=signed(status))
