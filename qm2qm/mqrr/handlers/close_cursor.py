"""R_CloseCursor (MS-MQRR 3.1.4.5, opnum 5): Close Cursor (reads waiting on it end, cancelled)."""
from __future__ import annotations

from qm2qm.mqrr.codec import decode, encode, signed
from qm2qm.mqrr.handlers._queue import queue_of
from qm2qm.mqrr.service import Service
from qm2qm.remote_read.cursors import close_cursor as close_cursor_of
from qm2qm.rpc.interface import CallContext


def close_cursor(service: Service, ctx: CallContext, wire: bytes, h_cursor: int) -> int:
    """The processing rules of 3.1.4.5; returns the HRESULT."""
    return close_cursor_of(service.qm, queue_of(service, ctx, wire)[1], h_cursor)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 5 on the wire: decode, apply 3.1.4.5, encode."""
    request = decode(5, stub, ctx.ndr64)
    return encode(5, ctx.ndr64, ErrorCode=signed(close_cursor(service, ctx, request["phContext"],
                                                              request["hCursor"])))
