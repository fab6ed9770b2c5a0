"""Reads answered from the request stub straight to the response stub (MS-MQQP 3.1.4.10, 3.1.4.11): the handlers'
own checks, read events, packet and handle (start_receive_now, start_receive_by_lookup_id) without the request and
response objects around them. The runtime calls these as the interface's lanes (qm2qm/rpc/interface.py).

A lane answers None — having changed nothing — for a shape it does not serve (an action it does not know, a stub
the one-struct layouts of codec_lane do not read), and the opnum's handler then serves the call. A read that would
wait (tried once here, having changed nothing) is answered with the coroutine the handler itself would hand the
runtime for it (start_receive2.serve_request), so the handler does not try it at once a second time.
tests/mqqp/test_inline.py proves a lane's bytes equal the handler's for drawn requests and queue states.
"""
from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from qm2qm.mqqp.codec_lane import pack_response_2x, read_request_2x
from qm2qm.mqqp.codec_types import REMOTEREADDESC, REMOTEREADDESC2, RemoteQMStartReceive2Request
from qm2qm.mqqp.constants import REMOTEREADDESC_RESERVED_SERVER
from qm2qm.mqqp.handlers._read import NULL_HANDLE, SEQUENTIAL_ID_MASK, Delivery, release
from qm2qm.mqqp.handlers._service import Service
from qm2qm.mqqp.handlers.start_receive import start_receive_now
from qm2qm.mqqp.handlers.start_receive2 import serve_request
from qm2qm.mqqp.handlers.start_receive_by_lookup_id import start_receive_by_lookup_id
from qm2qm.remote_read.actions import LOOKUP_ACTIONS, READ_ACTIONS
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st

_MQ_OK = st.MQ_OK


def read2(service: Service, ctx: CallContext, stub: Any) -> bytes | Coroutine[Any, Any, bytes] | None:
    """RemoteQMStartReceive2 (opnum 9) with a known ulAction, as start_receive2.serve answers it: inline, or for a
    read that must wait the handler's coroutine; None for a shape it leaves to the handler."""
    found = read_request_2x(9, stub, ctx.ndr64)
    if found is None or found[2].ulAction not in READ_ACTIONS:
        return None
    _, seq, desc = found
    delivery = start_receive_now(service, ctx, desc)
    if delivery is None:        # decode_request_9 reads this stub as this request
        return serve_request(service, ctx, RemoteQMStartReceive2Request(REMOTEREADDESC2(desc, seq)))
    return _answer(service, ctx, delivery, seq, desc)


def lookup_read(service: Service, ctx: CallContext, stub: Any) -> bytes | None:
    """RemoteQMStartReceiveByLookupId (opnum 10) with a known ulAction, as its serve answers it, or None."""
    found = read_request_2x(10, stub, ctx.ndr64)
    if found is None or found[2].ulAction not in LOOKUP_ACTIONS:
        return None
    lookup_id, seq, desc = found
    return _answer(service, ctx, start_receive_by_lookup_id(service, ctx, lookup_id, desc), seq, desc)


def _answer(service: Service, ctx: CallContext, delivery: Delivery, seq: int, desc: REMOTEREADDESC) -> bytes:
    """The [out] handle, REMOTEREADDESC2 and HRESULT of a read's Delivery (_read.answer2, then the codec lane).
    Should that fail once a receive holds its handle, the handle is closed and the message returned to the queue
    before the error propagates (_read.encode_delivery)."""
    buffer, reserved, arrive = None, desc.Reserved, desc.dwArriveTime
    try:
        if delivery.status == _MQ_OK:
            buffer = delivery.buffer
            if len(buffer) != delivery.size:
                raise ValueError(f"a packet of {len(buffer)} bytes with PacketSize {delivery.size}")
            seq = delivery.lookup_identifier & SEQUENTIAL_ID_MASK
            arrive = delivery.arrival_time & 0xFFFFFFFF
            reserved = REMOTEREADDESC_RESERVED_SERVER
        return pack_response_2x(ctx.ndr64, delivery.handle, seq, desc, buffer, reserved, arrive, delivery.status)
    except BaseException:
        if delivery.handle != NULL_HANDLE:
            ctx.close_handle(delivery.handle)
            release(service, delivery.entry)
        raise
