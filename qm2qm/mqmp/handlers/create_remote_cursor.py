"""R_QMCreateRemoteCursor (MS-MQMP 3.1.4.4, opnum 4): a Cursor on a descriptor found by Handle; ``ptb1`` is parsed
(Windows sends a zeroed CACTransferBufferV1, <29>) and ignored."""
from __future__ import annotations

from qm2qm.mqmp import codec, codec_fast
from qm2qm.mqmp.handlers._service import QmcommService
from qm2qm.remote_read.cursors import open_cursor
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st


def create_remote_cursor(service: QmcommService, h_queue: int, peer_host: str) -> tuple[int, int]:
    """The processing rules of 3.1.4.4; returns (HRESULT, phCursor)."""
    # Bullets 1–2: the OpenQueueDescriptor with Handle == hQueue in some Queue's collection; none → failure
    # ([DESIGN] MQ_ERROR_INVALID_HANDLE, the status MS-MQDMPR uses for an unknown handle), as for a descriptor
    # another host opened (OpenQueueDescriptor.opener_host: no guessed handle value serves another machine).
    descriptor = service.qm.descriptor_by_handle(h_queue)
    if descriptor is None or descriptor.queue_reference is None or descriptor.multiple \
            or not descriptor.serves(peer_host):
        return st.MQ_ERROR_INVALID_HANDLE, 0
    # Bullets 3–5: Open Cursor (MS-MQDMPR 3.1.7.1.1); phCursor := rCursor.Handle.
    return open_cursor(service.qm, descriptor)


def serve(service: QmcommService, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 4 on the wire: decode (ptb1 included, then dropped), apply 3.1.4.4, encode (codec_fast; an unusual ptb1
    goes to impacket's decode, which checks it)."""
    h_queue = codec_fast.decode_create_remote_cursor(stub, ctx.ndr64)     # the zeroed ptb1 Windows sends (<29>)
    if h_queue is None:
        h_queue = codec.decode_request(4, stub, ctx.ndr64)["hQueue"]
    status, cursor = create_remote_cursor(service, h_queue, ctx.peer_host)
    return codec_fast.encode_create_remote_cursor(cursor, status)
