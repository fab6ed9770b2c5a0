"""What the three qm2qm read methods (MS-MQQP 3.1.4.1, 3.1.4.10, 3.1.4.11) answer on top of qm2qm.remote_read:
the PCTX_REMOTEREAD_HANDLE_TYPE of a receive and the [out] REMOTEREADDESC(2)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qm2qm.mqqp import codec
from qm2qm.mqqp.constants import REMOTEREADDESC_RESERVED_SERVER
from qm2qm.mqqp.handlers._service import Service
from qm2qm.remote_read.entries import ReadEntry
from qm2qm.remote_read.locks import release
from qm2qm.remote_read.packets import take_packet
from qm2qm.rpc.handles import HandleLimitReached
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st
from shared_adm.descriptor import ReadResult

MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT = st.MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT    # MS-MQQP 3.1.4.6
# REMOTEREADDESC2.SequentialId: "the least significant seven bytes" of Message.LookupIdentifier (2.2.2.2).
SEQUENTIAL_ID_MASK = (1 << 56) - 1
NULL_HANDLE = bytes(20)

__all__ = ["Delivery", "read_entry", "deliver", "release", "encode_delivery", "answer", "answer2", "NULL_HANDLE",
           "MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT"]


@dataclass(slots=True)
class Delivery:
    """What a read answers: rStatus and, on MQ_OK, the UserMessage packet, its PacketSize, the handle and the
    Message attributes the [out] REMOTEREADDESC carries."""
    status: int
    buffer: bytes | None = None
    size: int = 0
    handle: bytes = NULL_HANDLE
    entry: ReadEntry | None = None
    arrival_time: int = 0               # Message.ArrivalTime and LookupIdentifier, for the [out] descriptor
    lookup_identifier: int = 0


def read_entry(desc: Any, descriptor: Any) -> ReadEntry:
    """The RemoteReadEntry (MS-MQQP 3.1.1.2) of a read through ``descriptor`` as its REMOTEREADDESC asks it."""
    return ReadEntry(descriptor_handle=desc.hRemoteQueue, request_id=desc.dwRequestID, timeout=desc.ulTimeout,
                     action=desc.ulAction, descriptor=descriptor)


def deliver(service: Service, ctx: CallContext, entry: ReadEntry | None, result: ReadResult,
            *, receive: bool) -> Delivery:
    """The packet of a read (MS-MQDMPR 3.1.7.1.30, 3.1.7.1.32) and, for a receive, its
    PCTX_REMOTEREAD_HANDLE_TYPE (``entry``: the receive's, None for a peek); any failure returns a Locked message
    to the queue."""
    if result.status != st.MQ_OK:
        return Delivery(result.status)
    status, packet = take_packet(service, entry, result, receive=receive)
    if packet is None:
        return Delivery(status)
    handle = NULL_HANDLE
    if receive:
        try:
            handle = ctx.new_handle(service.remoteread_handle_type, entry)
        except HandleLimitReached:          # [DESIGN] the association's most handles: the message goes back
            release(service, entry)
            return Delivery(st.MQ_ERROR_INSUFFICIENT_RESOURCES)
        except BaseException:
            release(service, entry)
            raise
    return Delivery(status, packet.buffer, packet.size, handle, entry, packet.arrival_time,
                    packet.lookup_identifier)


def encode_delivery(service: Service, ctx: CallContext, opnum: int, response: Any, delivery: Delivery) -> bytes:
    """Encode a read's answer. Should that fail once a receive holds its handle, the handle is closed and the
    message returned to the queue before the error propagates (the client gets a fault, not the handle)."""
    try:
        return codec.encode_response(opnum, response, ctx.ndr64)
    except BaseException:
        if delivery.handle != NULL_HANDLE:
            ctx.close_handle(delivery.handle)
            release(service, delivery.entry)
        raise


def answer(desc: Any, delivery: Delivery) -> Any:
    """The [out] REMOTEREADDESC (2.2.2.1): on MQ_OK lpBuffer, dwSize, dwArriveTime and Reserved = 1 (server);
    otherwise no buffer. Every other field goes back as the client sent it."""
    if desc is None:
        return None
    if delivery.status != st.MQ_OK:
        desc.lpBuffer, desc.dwSize = None, 0
        return desc
    desc.lpBuffer, desc.dwSize = delivery.buffer, delivery.size
    desc.dwArriveTime = delivery.arrival_time & 0xFFFFFFFF
    desc.Reserved = REMOTEREADDESC_RESERVED_SERVER
    return desc


def answer2(desc2: Any, delivery: Delivery) -> Any:
    """The [out] REMOTEREADDESC2 (2.2.2.2): answer() plus SequentialId = low 7 bytes of LookupIdentifier."""
    if desc2 is None:
        return None
    answer(desc2.pRemoteReadDesc, delivery)
    if delivery.status == st.MQ_OK:
        desc2.SequentialId = delivery.lookup_identifier & SEQUENTIAL_ID_MASK
    return desc2
