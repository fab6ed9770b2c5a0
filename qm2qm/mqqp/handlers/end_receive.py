"""RemoteQMEndReceive (MS-MQQP 3.1.4.2, opnum 1): ACK deletes the received message, NACK returns it to the queue."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from qm2qm.mqqp import codec
from qm2qm.mqqp.constants import RR_ACK, RR_NACK
from qm2qm.mqqp.handlers._read import NULL_HANDLE, release
from qm2qm.mqqp.handlers._service import Service
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st
from shared_adm.store.base import StoreError

log = logging.getLogger(__name__)


async def end_receive(service: Service, ctx: CallContext, context: bytes, ack: int) -> tuple[int, bytes]:
    """The processing rules of 3.1.4.2; returns (rStatus, pphContext out). An ACK is durable before the answer."""
    status, context, durable = _end_receive(service, ctx, context, ack)
    if durable is not None:
        try:
            await durable
        except StoreError as exc:
            return _not_durable(exc), context
    return status, context


def _not_durable(exc: StoreError) -> int:
    """The ACK's deletion could not be committed (disk full, read-only store): the caller is told, not MQ_OK."""
    log.warning("RemoteQMEndReceive: the ACK is not durable: %s", exc)
    return st.MQ_ERROR_INSUFFICIENT_RESOURCES


def _end_receive(service: Service, ctx: CallContext, context: bytes, ack: int) -> tuple[int, bytes, Any]:
    """3.1.4.2 up to the answer: (rStatus, pphContext out, the qm.durable() coroutine an ACK must await)."""
    entry = ctx.lookup_handle(context, service.remoteread_handle_type)
    if entry is None:
        return st.MQ_ERROR_INVALID_HANDLE, NULL_HANDLE, None
    if ack not in (RR_NACK, RR_ACK):
        return st.MQ_ERROR_INVALID_PARAMETER, context, None
    status = release(service, entry, delete=ack == RR_ACK)
    context = ctx.close_handle(context)
    if ack == RR_ACK and status == st.MQ_OK:
        return status, context, service.qm.durable()
    return status, context, None


def run_down_remote_read(service: Service, entry) -> None:
    """PCTX_REMOTEREAD_HANDLE_TYPE rundown (3.1.6.2): RemoteQMEndReceive with RR_NACK."""
    release(service, entry, delete=False)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes | Any:
    """Opnum 1 on the wire: decode, apply 3.1.4.2, encode — inline when the runtime allows it (ctx.answer_now)
    and the ACK is durable at once; otherwise as a coroutine (a task) that waits for it."""
    if not getattr(ctx, "answer_now", False):
        return _serve(service, ctx, stub)
    request = codec.decode_request(1, stub, ctx.ndr64)
    status, context, durable = _end_receive(service, ctx, request.pphContext, request.dwAck)
    if durable is not None:
        try:
            waiting = durable.send(None)
        except StopIteration:
            pass
        except StoreError as exc:
            status = _not_durable(exc)
        else:
            return _finish(service, ctx, durable, waiting, status, context)
    return _encode(ctx, status, context)


async def _serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    request = codec.decode_request(1, stub, ctx.ndr64)
    status, context = await end_receive(service, ctx, request.pphContext, request.dwAck)
    return _encode(ctx, status, context)


async def _finish(service: Service, ctx: CallContext, durable: Any, waiting: Any, status: int,
                  context: bytes) -> bytes:
    """Drive the rest of qm.durable() (already started, now waiting on ``waiting``) as the task would have."""
    try:
        await _drive(durable, waiting)
    except StoreError as exc:
        status = _not_durable(exc)
    return _encode(ctx, status, context)


async def _drive(durable: Any, waiting: Any) -> None:
    """Resume qm.durable() until it ends; a commit failure propagates as its StoreError."""
    while True:
        try:
            if waiting is None:                 # a bare yield (asyncio.sleep(0)): the task would step again
                await asyncio.sleep(0)
            else:                               # a Future: the task would wait for it (taking its yield first)
                waiting._asyncio_future_blocking = False
                await waiting
        except BaseException as exc:            # cancelled, or the commit failed: durable() sees it
            try:
                waiting = durable.throw(exc)
            except StopIteration:
                break
            continue
        try:
            waiting = durable.send(None)
        except StopIteration:
            break


def _encode(ctx: CallContext, status: int, context: bytes) -> bytes:
    return codec.encode_response(1, codec.RemoteQMEndReceiveResponse(context, status), ctx.ndr64)
