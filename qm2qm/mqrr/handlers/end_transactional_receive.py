"""R_EndTransactionalReceive (MS-MQRR 3.1.4.15, opnum 15): R_EndReceive with iTransactional True for a receive
made in a transaction — the message is left to the transaction's outcome (MS-MQDMPR 3.1.7.1.12)."""
from __future__ import annotations

from typing import Any

from qm2qm.mqrr.codec import decode
from qm2qm.mqrr.handlers.end_receive import answer, end
from qm2qm.mqrr.service import Service
from qm2qm.rpc.interface import CallContext


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes | Any:
    """Opnum 15 on the wire: decode, apply 3.1.4.15, encode."""
    r = decode(15, stub, ctx.ndr64)
    status, wait = end(service, ctx, r["phContext"], r["dwAck"], r["dwRequestId"])
    return answer(service, ctx, 15, status, wait)
