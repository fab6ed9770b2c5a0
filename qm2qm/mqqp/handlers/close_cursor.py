"""RemoteQMCloseCursor (MS-MQQP 3.1.4.5, opnum 4): close a cursor qmcomm R_QMCreateRemoteCursor created."""
from __future__ import annotations

from qm2qm.mqqp import codec
from qm2qm.mqqp.handlers._events import find_open_queue_descriptor
from qm2qm.mqqp.handlers._service import Service
from qm2qm.remote_read.cursors import close_cursor as close_cursor_of
from qm2qm.rpc.interface import CallContext


def close_cursor(service: Service, h_queue: int, h_cursor: int, peer_host: str) -> int:
    """The processing rules of 3.1.4.5; returns rStatus (reads waiting on the cursor end, cancelled)."""
    return close_cursor_of(service.qm, find_open_queue_descriptor(service.qm, h_queue, peer_host), h_cursor)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 4 on the wire: decode, apply 3.1.4.5, encode."""
    request = codec.decode_request(4, stub, ctx.ndr64)
    status = close_cursor(service, request.hQueue, request.hCursor, ctx.peer_host)
    return codec.encode_response(4, codec.RemoteQMCloseCursorResponse(status), ctx.ndr64)
