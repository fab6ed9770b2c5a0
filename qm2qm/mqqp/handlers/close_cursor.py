"""RemoteQMCloseCursor (MS-MQQP 3.1.4.5, opnum 4): close a cursor qmcomm R_QMCreateRemoteCursor created."""
from __future__ import annotations

from qm2qm.mqqp import codec
from qm2qm.mqqp.handlers._events import find_cursor, find_open_queue_descriptor
from qm2qm.mqqp.handlers._service import Service
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st


def close_cursor(service: Service, h_queue: int, h_cursor: int) -> int:
    """The processing rules of 3.1.4.5; returns rStatus (reads waiting on the cursor end, cancelled)."""
    descriptor = find_open_queue_descriptor(service.qm, h_queue)
    cursor = find_cursor(descriptor, h_cursor) if descriptor is not None else None
    if descriptor is None or cursor is None:
        return st.MQ_ERROR_INVALID_HANDLE
    service.qm.close_cursor(cursor)
    return st.MQ_OK


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 4 on the wire: decode, apply 3.1.4.5, encode."""
    request = codec.decode_request(4, stub, ctx.ndr64)
    status = close_cursor(service, request.hQueue, request.hCursor)
    return codec.encode_response(4, codec.RemoteQMCloseCursorResponse(status), ctx.ndr64)
