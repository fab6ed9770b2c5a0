"""R_CreateCursor (MS-MQRR 3.1.4.4, opnum 4): Open Cursor on the queue's descriptor."""
from __future__ import annotations

from qm2qm.mqrr.codec import decode, encode, signed
from qm2qm.mqrr.handlers._queue import queue_of
from qm2qm.mqrr.service import Service
from qm2qm.remote_read.cursors import open_cursor
from qm2qm.rpc.interface import CallContext


def create_cursor(service: Service, ctx: CallContext, wire: bytes) -> tuple[int, int]:
    """The processing rules of 3.1.4.4; returns (HRESULT, phCursor)."""
    _, descriptor = queue_of(service, ctx, wire)
    return open_cursor(service.qm, descriptor)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 4 on the wire: decode, apply 3.1.4.4, encode."""
    status, cursor = create_cursor(service, ctx, decode(4, stub, ctx.ndr64)["phContext"])
    return encode(4, ctx.ndr64, phCursor=cursor, ErrorCode=signed(status))
