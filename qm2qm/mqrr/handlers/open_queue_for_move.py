"""R_OpenQueueForMove (MS-MQRR 3.1.4.11, opnum 11): open a move destination; pMoveContext names its handle."""
from __future__ import annotations

import secrets
from typing import Any

from qm2qm.mqrr.codec import decode, encode
from qm2qm.mqrr.handlers.open_queue import new_queue_handle, open_descriptor
from qm2qm.mqrr.service import QueueContext, Service
from qm2qm.rpc.interface import CallContext
from shared_adm.enums import QueueAccessType


def new_move_context(service: Service) -> int:
    """A random, non-zero 64-bit value not in use (pMoveContext: "a random value")."""
    while True:
        value = secrets.randbits(64)
        if value and value not in service.move_contexts:
            return value


def open_queue_for_move(service: Service, ctx: CallContext, request: Any) -> tuple[int, bytes]:
    """The processing rules of 3.1.4.11 (iRequiredAccess is always MoveAccess; dwAccess is the client's
    MUST, not a server check); returns (pMoveContext, pphContext)."""
    descriptor = open_descriptor(service, ctx, request["pQueueFormat"], QueueAccessType.MOVE_ACCESS,
                                 request["dwShareMode"])
    context = QueueContext(descriptor, new_move_context(service))
    handle = new_queue_handle(service, ctx, context)
    service.move_contexts[context.move_context] = context
    return context.move_context, handle


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 11 on the wire: decode, apply 3.1.4.11, encode."""
    move_context, handle = open_queue_for_move(service, ctx, decode(11, stub, ctx.ndr64))
    return encode(11, ctx.ndr64, pMoveContext=move_context, pphContext=handle)
