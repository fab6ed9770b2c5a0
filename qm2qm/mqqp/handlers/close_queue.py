"""RemoteQMCloseQueue (MS-MQQP 3.1.4.4, opnum 3) and PCTX_RRSESSION_HANDLE_TYPE rundown (3.1.6.1)."""
from __future__ import annotations

from qm2qm.mqqp import codec
from qm2qm.mqqp.adm import OpenQueueEntry
from qm2qm.mqqp.handlers._events import find_open_queue_descriptor
from qm2qm.mqqp.handlers._read import MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT, NULL_HANDLE
from qm2qm.mqqp.handlers._service import Service
from qm2qm.remote_read.locks import release_descriptor
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st


def close_queue(service: Service, ctx: CallContext, context: bytes) -> tuple[int, bytes]:
    """The processing rules of 3.1.4.4; returns (rStatus, pphContext out)."""
    entry = ctx.lookup_handle(context, service.rrsession_handle_type)
    if entry is None:
        return st.MQ_ERROR_INVALID_HANDLE, NULL_HANDLE
    close_open_queue_entry(service, entry)
    return st.MQ_OK, ctx.close_handle(context)


def close_open_queue_entry(service: Service, entry: OpenQueueEntry) -> None:
    """Remove the OpenQueueEntry, cancel its reads, release its Locked messages, raise Close Queue; once."""
    if entry.closed:
        return
    entry.closed = True
    adm, handle = service.adm, entry.open_queue_descriptor_handle
    adm.open_queue_entries.remove(entry)
    named = service.qm.descriptor_by_handle(handle)
    if named is not None and not named.serves(entry.peer_host):
        return          # another host's descriptor: this session never read through it, so nothing of it to end
    release_descriptor(service, handle, MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT)
    descriptor = find_open_queue_descriptor(service.qm, handle, entry.peer_host)
    if descriptor is not None:
        service.qm.close_queue(descriptor)


def run_down_session(service: Service, entry: OpenQueueEntry) -> None:
    """PCTX_RRSESSION_HANDLE_TYPE rundown (3.1.6.1): close the session as RemoteQMCloseQueue does."""
    close_open_queue_entry(service, entry)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 3 on the wire: decode, apply 3.1.4.4, encode."""
    request = codec.decode_request(3, stub, ctx.ndr64)
    status, context = close_queue(service, ctx, request.pphContext)
    return codec.encode_response(3, codec.RemoteQMCloseQueueResponse(context, status), ctx.ndr64)
