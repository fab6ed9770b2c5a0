"""RemoteQMEndReceive (MS-MQQP 3.1.4.2, opnum 1): ACK deletes the received message, NACK returns it to the queue."""
from __future__ import annotations

from qm2qm.mqqp import codec
from qm2qm.mqqp.constants import RR_ACK, RR_NACK
from qm2qm.mqqp.handlers._read import NULL_HANDLE, release
from qm2qm.mqqp.handlers._service import Service
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st


async def end_receive(service: Service, ctx: CallContext, context: bytes, ack: int) -> tuple[int, bytes]:
    """The processing rules of 3.1.4.2; returns (rStatus, pphContext out). An ACK is durable before the answer."""
    entry = ctx.lookup_handle(context, service.remoteread_handle_type)
    if entry is None:
        return st.MQ_ERROR_INVALID_HANDLE, NULL_HANDLE
    if ack not in (RR_NACK, RR_ACK):
        return st.MQ_ERROR_INVALID_PARAMETER, context
    status = release(service, entry, delete=ack == RR_ACK)
    context = ctx.close_handle(context)
    if ack == RR_ACK and status == st.MQ_OK:
        await service.qm.durable()
    return status, context


def run_down_remote_read(service: Service, entry) -> None:
    """PCTX_REMOTEREAD_HANDLE_TYPE rundown (3.1.6.2): RemoteQMEndReceive with RR_NACK."""
    release(service, entry, delete=False)


async def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 1 on the wire: decode, apply 3.1.4.2, encode."""
    request = codec.decode_request(1, stub, ctx.ndr64)
    status, context = await end_receive(service, ctx, request.pphContext, request.dwAck)
    return codec.encode_response(1, codec.RemoteQMEndReceiveResponse(context, status), ctx.ndr64)
