"""RemoteQMStartReceive2 (MS-MQQP 3.1.4.10, opnum 9): RemoteQMStartReceive that also returns the SequentialId."""
from __future__ import annotations

from typing import Any

from qm2qm.mqqp import codec
from qm2qm.mqqp.handlers._read import Delivery, answer2, encode_delivery
from qm2qm.mqqp.handlers._service import Service
from qm2qm.mqqp.handlers.start_receive import start_receive, start_receive_now
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st


async def start_receive2(service: Service, ctx: CallContext, desc2: Any) -> Delivery:
    """The processing rules of 3.1.4.10: the NULL checks on lpRemoteReadDesc2, then those of 3.1.4.1."""
    if desc2 is None:
        return Delivery(st.MQ_ERROR_INVALID_HANDLE)
    if desc2.pRemoteReadDesc is None:
        return Delivery(st.MQ_ERROR_INVALID_HANDLE)
    return await start_receive(service, ctx, desc2.pRemoteReadDesc)


def start_receive2_now(service: Service, ctx: CallContext, desc2: Any) -> Delivery | None:
    """start_receive2 when the read completes at once; None (nothing changed, no wait registered) when it
    would have to wait (see start_receive.start_receive_now)."""
    if desc2 is None:
        return Delivery(st.MQ_ERROR_INVALID_HANDLE)
    if desc2.pRemoteReadDesc is None:
        return Delivery(st.MQ_ERROR_INVALID_HANDLE)
    return start_receive_now(service, ctx, desc2.pRemoteReadDesc)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes | Any:
    """Opnum 9 on the wire: decode, apply 3.1.4.10, encode — inline when the runtime allows it
    (ctx.answer_now) and the read completes at once; otherwise as a coroutine (a task)."""
    if not getattr(ctx, "answer_now", False):
        return _serve(service, ctx, stub)
    request = codec.decode_request(9, stub, ctx.ndr64)
    delivery = start_receive2_now(service, ctx, request.lpRemoteReadDesc2)
    if delivery is None:
        return serve_request(service, ctx, request)
    return _encode(service, ctx, request.lpRemoteReadDesc2, delivery)


async def _serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    return await serve_request(service, ctx, codec.decode_request(9, stub, ctx.ndr64))


async def serve_request(service: Service, ctx: CallContext, request: Any) -> bytes:
    """A decoded request served as a task: the read tried, then (if it finds no message) waiting."""
    desc2 = request.lpRemoteReadDesc2
    delivery = await start_receive2(service, ctx, desc2)
    return _encode(service, ctx, desc2, delivery)


def _encode(service: Service, ctx: CallContext, desc2: Any, delivery: Delivery) -> bytes:
    response = codec.RemoteQMStartReceive2Response(delivery.handle, answer2(desc2, delivery), delivery.status)
    return encode_delivery(service, ctx, 9, response, delivery)
