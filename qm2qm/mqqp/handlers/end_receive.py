"""RemoteQMEndReceive (MS-MQQP 3.1.4.2, opnum 1): ACK deletes the received message, NACK returns it to the queue."""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from qm2qm.mqqp import codec
from qm2qm.mqqp.constants import RANGE_dwAck, RR_ACK, RR_NACK
from qm2qm.mqqp.handlers._read import NULL_HANDLE
from qm2qm.mqqp.handlers._service import Service
from qm2qm.remote_read.durable import answer_once_durable, await_durable
from qm2qm.remote_read.locks import finish_receive, release
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st

# [in] pphContext, dwAck and [out] pphContext, HRESULT: the same bytes in NDR and NDR64 (codec_fixed)
_PLAIN = struct.Struct("<20sI")
_ACK_LOW, _ACK_HIGH = RANGE_dwAck


async def end_receive(service: Service, ctx: CallContext, context: bytes, ack: int) -> tuple[int, bytes]:
    """The processing rules of 3.1.4.2; returns (rStatus, pphContext out). An ACK is durable before the answer."""
    status, context, wait = _end_receive(service, ctx, context, ack)
    failed = await await_durable(service.qm.durable() if wait else None, "RemoteQMEndReceive: the ACK")
    return (status if failed is None else failed), context


def _end_receive(service: Service, ctx: CallContext, context: bytes, ack: int) -> tuple[int, bytes, bool]:
    """3.1.4.2 up to the answer: (rStatus, pphContext out, whether the answer waits for the ACK's commit: only the
    delete of a stored, recoverable message does)."""
    entry = ctx.lookup_handle(context, service.remoteread_handle_type)
    if entry is None:
        return st.MQ_ERROR_INVALID_HANDLE, NULL_HANDLE, False
    if ack not in (RR_NACK, RR_ACK):
        return st.MQ_ERROR_INVALID_PARAMETER, context, False
    status, wait = finish_receive(service, entry, ack=ack == RR_ACK)
    return status, ctx.close_handle(context), wait


def run_down_remote_read(service: Service, entry) -> None:
    """PCTX_REMOTEREAD_HANDLE_TYPE rundown (3.1.6.2): RemoteQMEndReceive with RR_NACK."""
    release(service, entry, delete=False)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes | Any:
    """Opnum 1 on the wire: decode, apply 3.1.4.2, encode — inline when the runtime allows it (ctx.answer_now)
    and the ACK is durable at once, else a Future the commit answers; a coroutine (a task) otherwise."""
    if not getattr(ctx, "answer_now", False):
        return _serve(service, ctx, stub)
    request = codec.decode_request(1, stub, ctx.ndr64)
    return _answer_now(service, ctx, request.pphContext, request.dwAck,
                       lambda context, status: _encode(ctx, status, context))


def lane(service: Service, ctx: CallContext, stub: Any) -> bytes | Any:
    """serve (inline) for the common request, a context handle and a dwAck in range, without the request and
    response objects (the interface's lane, qm2qm/mqqp/inline.py); None for any other (serve names the error)."""
    if len(stub) != _PLAIN.size:
        return None
    context, ack = _PLAIN.unpack(stub)
    if not _ACK_LOW <= ack <= _ACK_HIGH:
        return None
    return _answer_now(service, ctx, context, ack, _PLAIN.pack)


def _answer_now(service: Service, ctx: CallContext, context: bytes, ack: int,
                encode: Callable[[bytes, int], bytes]) -> bytes | Any:
    """3.1.4.2 answered at once, or (an ACK not yet durable) as a Future the commit answers."""
    status, context, wait = _end_receive(service, ctx, context, ack)
    if not wait:
        return encode(context, status)
    return answer_once_durable(service.qm, lambda failed: encode(context, status if failed is None else failed),
                               "RemoteQMEndReceive: the ACK")


async def _serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    request = codec.decode_request(1, stub, ctx.ndr64)
    status, context = await end_receive(service, ctx, request.pphContext, request.dwAck)
    return _encode(ctx, status, context)


def _encode(ctx: CallContext, status: int, context: bytes) -> bytes:
    return codec.encode_response(1, codec.RemoteQMEndReceiveResponse(context, status), ctx.ndr64)
