"""R_QMCloseRemoteQueueContext (MS-MQMP 3.1.4.3, opnum 3) and the PCTX_OPENREMOTE_HANDLE_TYPE rundown (3.1.7.2)."""
from __future__ import annotations

from qm2qm.mqmp import codec, codec_fast
from qm2qm.mqmp.handlers._service import QmcommService, RemoteQueueOpenContextHandle
from qm2qm.rpc.interface import CallContext
from shared_adm.enums import RemoteReadState


def close_context(service: QmcommService, entry: RemoteQueueOpenContextHandle) -> None:
    """Bullets 3–5: Close Queue only while the descriptor is still Opened (a qm2qm RemoteQMOpenQueue moved it to
    ReadyForRead and now owns it), then drop the entry from iRemoteQueueOpenContextHandleTable; once."""
    if entry.closed:
        return
    entry.closed = True
    service.open_contexts.discard(entry)
    descriptor = entry.open_queue_descriptor_reference
    if descriptor.remote_read_state is RemoteReadState.OPENED:
        service.qm.close_queue(descriptor)


def run_down(service: QmcommService, entry: RemoteQueueOpenContextHandle) -> None:
    """PCTX_OPENREMOTE_HANDLE_TYPE rundown (3.1.7.2): the steps of R_QMCloseRemoteQueueContext."""
    close_context(service, entry)


def close_remote_queue_context(service: QmcommService, ctx: CallContext, wire: bytes) -> bytes:
    """The processing rules of 3.1.4.3; returns pphContext (NULL). Bullets 1–2: the NULL handle locates nothing and
    returns at once; an unknown or closed one is refused by the runtime (nca_s_fault_context_mismatch)."""
    entry = ctx.lookup_handle(wire, service.open_remote_handle_type)
    if entry is None:
        return codec.NULL_CONTEXT_HANDLE
    close_context(service, entry)
    return ctx.close_handle(wire)


def serve(service: QmcommService, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 3 on the wire: decode, apply 3.1.4.3, encode (no return value): the stub each way is the context
    handle alone, the same 20 bytes in NDR and NDR64 (codec_fast; any other stub: impacket's decode faults it)."""
    wire = codec_fast.decode_context_handle(stub)
    if wire is None:
        wire = codec.wire_handle(codec.decode_request(3, stub, ctx.ndr64)["pphContext"])
    return close_remote_queue_context(service, ctx, wire)
