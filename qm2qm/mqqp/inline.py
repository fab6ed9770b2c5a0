"""Peeks answered from the request stub straight to the response stub (MS-MQQP 3.1.4.10, 3.1.4.11): the handlers'
own checks, read events and packet (start_receive_now, start_receive_by_lookup_id) without the request, response
and call objects around them. The runtime calls these as the interface's lanes (qm2qm/rpc/interface.py).

A lane answers None — having changed nothing — for a shape it does not serve (a receive, a read that would wait,
a stub the one-struct layouts of codec_lane do not read), and the opnum's handler then serves the call.
tests/mqqp/test_inline.py proves a lane's bytes equal the handler's for drawn requests and queue states.
"""
from __future__ import annotations

from typing import Any

from qm2qm.mqqp.codec_lane import pack_response_2x, unpack_request_2x
from qm2qm.mqqp.codec_types import REMOTEREADDESC
from qm2qm.mqqp.constants import (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, REMOTEREADACK,
                                  REMOTEREADDESC_RESERVED_SERVER)
from qm2qm.mqqp.handlers._read import NULL_HANDLE, SEQUENTIAL_ID_MASK, Delivery
from qm2qm.mqqp.handlers._service import Service
from qm2qm.mqqp.handlers.start_receive import start_receive_now
from qm2qm.mqqp.handlers.start_receive_by_lookup_id import start_receive_by_lookup_id
from qm2qm.remote_read.actions import LOOKUP_ACTIONS
from shared_adm import status as st

_ACKS = tuple(REMOTEREADACK)
_MQ_OK = st.MQ_OK
_PEEKS = frozenset({MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT})
_LOOKUP_PEEKS = frozenset(action for action, (peek, _) in LOOKUP_ACTIONS.items() if peek)


def peek2(service: Service, stub: Any, ndr64: bool) -> bytes | None:
    """RemoteQMStartReceive2 (opnum 9) with MQ_ACTION_PEEK_CURRENT or MQ_ACTION_PEEK_NEXT, as start_receive2.serve
    answers it, or None."""
    values = unpack_request_2x(9, stub, ndr64)
    if values is None or values[3] not in _PEEKS:
        return None
    seq, queue, cursor, action, timeout, dw_queue, request_id, reserved, arrive, ack = values
    desc = REMOTEREADDESC(queue, cursor, action, timeout, 0, dw_queue, request_id, reserved, arrive, _ACKS[ack], None)
    delivery = start_receive_now(service, None, desc)
    if delivery is None:
        return None
    return _answer(ndr64, delivery, values)


def lookup_peek(service: Service, stub: Any, ndr64: bool) -> bytes | None:
    """RemoteQMStartReceiveByLookupId (opnum 10) with an MQ_LOOKUP_PEEK_* action, as its serve answers it, or None."""
    values = unpack_request_2x(10, stub, ndr64)
    if values is None or values[4] not in _LOOKUP_PEEKS:
        return None
    lookup_id, seq, queue, cursor, action, timeout, dw_queue, request_id, reserved, arrive, ack = values
    delivery = start_receive_by_lookup_id(
        service, None, lookup_id, REMOTEREADDESC(queue, cursor, action, timeout, 0, dw_queue, request_id, reserved,
                                                 arrive, _ACKS[ack], None))
    return _answer(ndr64, delivery, values[1:])


def _answer(ndr64: bool, delivery: Delivery, values: tuple) -> bytes:
    """The [out] handle, REMOTEREADDESC2 and HRESULT of a peek's Delivery (_read.answer2, then the codec lane)."""
    seq, queue, cursor, action, timeout, dw_queue, request_id, reserved, arrive, ack = values
    buffer = None
    if delivery.status == _MQ_OK:
        buffer = delivery.buffer
        if len(buffer) != delivery.size:
            raise ValueError(f"a packet of {len(buffer)} bytes with PacketSize {delivery.size}")
        seq = delivery.lookup_identifier & SEQUENTIAL_ID_MASK
        arrive = delivery.arrival_time & 0xFFFFFFFF
        reserved = REMOTEREADDESC_RESERVED_SERVER
    return pack_response_2x(ndr64, NULL_HANDLE, seq, queue, cursor, action, timeout, dw_queue, request_id, reserved,
                            arrive, ack, buffer, delivery.status)
