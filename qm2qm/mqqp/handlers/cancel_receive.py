"""RemoteQMCancelReceive (MS-MQQP 3.1.4.6, opnum 5): end a pending read with MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT."""
from __future__ import annotations

from qm2qm.mqqp import codec
from qm2qm.mqqp.adm import RemoteReadEntry
from qm2qm.mqqp.handlers._read import MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT
from qm2qm.mqqp.handlers._service import Service
from qm2qm.remote_read.locks import cancel
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st


def cancel_receive(service: Service, h_queue: int, p_queue: int, request_id: int, peer_host: str) -> int:
    """The processing rules of 3.1.4.6; returns rStatus."""
    if p_queue == 0 or p_queue != h_queue:
        return st.MQ_ERROR_INVALID_PARAMETER
    descriptor = service.qm.descriptor_by_handle(h_queue)
    if not service.adm.remote_read_entries.has_descriptor(h_queue) \
            or descriptor is not None and not descriptor.serves(peer_host):
        return st.MQ_ERROR_INVALID_HANDLE           # another host's reads are not this caller's to cancel
    entry = service.adm.remote_read_entries.find(h_queue, request_id)
    if entry is None:
        return st.MQ_ERROR
    return cancel_remote_read(service, entry)


def cancel_remote_read(service: Service, entry: RemoteReadEntry,
                       status: int = MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT) -> int:
    """Cancel Waiting Message Read Request (MS-MQDMPR 3.1.7.1.17) for the entry, then delete the entry."""
    return cancel(service, entry, status)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 5 on the wire: decode, apply 3.1.4.6, encode."""
    r = codec.decode_request(5, stub, ctx.ndr64)
    status = cancel_receive(service, r.hQueue, r.pQueue, r.dwRequestID, ctx.peer_host)
    return codec.encode_response(5, codec.RemoteQMCancelReceiveResponse(status), ctx.ndr64)
