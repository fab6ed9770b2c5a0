"""Steps shared by the three read methods (MS-MQQP 3.1.4.1, 3.1.4.10, 3.1.4.11) and by every message release."""
from __future__ import annotations

import inspect
import logging
import struct
from dataclasses import dataclass
from typing import Any

from qm2qm.mqqp import codec
from qm2qm.mqqp.adm import RemoteReadEntry
from qm2qm.mqqp.constants import MAX_REMOTEREAD_BUFFER, REMOTEREADDESC_RESERVED_SERVER
from qm2qm.mqqp.handlers._service import Service
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st
from shared_adm.descriptor import ReadResult
from shared_adm.packet import PacketError, serialize_message_to_buffer

MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT = st.MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT    # MS-MQQP 3.1.4.6
# REMOTEREADDESC.dwSize is [range(0, 4325376)] (2.2.2.1): a larger packet cannot be returned at all. (MS-MQMQ
# 2.2.19.1 caps PacketSize at 0x00400000; enforcing that is the business of whoever accepts a message.)
MAX_PACKET_SIZE = MAX_REMOTEREAD_BUFFER
# REMOTEREADDESC2.SequentialId: "the least significant seven bytes" of Message.LookupIdentifier (2.2.2.2).
SEQUENTIAL_ID_MASK = (1 << 56) - 1
NULL_HANDLE = bytes(20)
# MS-MQMQ 2.2.19.1 BaseHeader: VersionNumber(1) Reserved(1) Flags(2) Signature(4) PacketSize(4) ...
_PACKET_SIZE = struct.Struct("<I")
_PACKET_SIZE_OFFSET = 8

_log = logging.getLogger("qm2qm.mqqp")


@dataclass(slots=True)
class Delivery:
    """What a read answers: rStatus and, on MQ_OK, the UserMessage packet, its PacketSize, the handle and the
    Message attributes the [out] REMOTEREADDESC carries."""
    status: int
    buffer: bytes | None = None
    size: int = 0
    handle: bytes = NULL_HANDLE
    entry: RemoteReadEntry | None = None
    arrival_time: int = 0               # Message.ArrivalTime and LookupIdentifier, for the [out] descriptor
    lookup_identifier: int = 0


async def wait_for_read(entry: RemoteReadEntry, result: Any) -> ReadResult:
    """The ReadResult of a read event, waiting while it is a PendingRead (MS-MQDMPR 3.1.7.3.1).

    If the call itself is cancelled meanwhile (co_cancel, lost connection) the PendingRead withdraws the
    read and returns a message it had already Locked to the queue (shared_adm.descriptor.PendingRead.wait)."""
    if not inspect.isawaitable(result):
        return result
    entry.waiting = result
    try:
        return await result
    finally:
        entry.waiting = None


def deliver(service: Service, ctx: CallContext, entry: RemoteReadEntry, result: ReadResult,
            *, receive: bool) -> Delivery:
    """Construct and serialize the UserMessage packet (MS-MQDMPR 3.1.7.1.30, 3.1.7.1.32) and, for a receive,
    hand out the PCTX_REMOTEREAD_HANDLE_TYPE; any failure returns a Locked message to the queue."""
    status = result.status
    if status != st.MQ_OK:
        return Delivery(status)
    entry.user_message_packet = result.position
    try:
        packed = result.packed
        cached = service.packets.get(packed)
        if cached is not None:          # a memo of what the lines below give (the Message is not rebuilt)
            buffer, size, arrival_time, lookup_identifier = cached
        else:
            message = result.message
            arrival_time, lookup_identifier = message.arrival_time, message.lookup_identifier
            try:
                buffer = serialize_message_to_buffer(message, MAX_PACKET_SIZE)
            except PacketError as exc:
                _log.error("message %#x cannot be returned: %s", getattr(message, "lookup_identifier", 0), exc)
                if receive:
                    release(service, entry)
                return Delivery(st.MQ_ERROR_INSUFFICIENT_RESOURCES)
            size = _PACKET_SIZE.unpack_from(buffer, _PACKET_SIZE_OFFSET)[0]
            if size < len(buffer):
                buffer = buffer[:size]      # a trailing SessionHeader (MS-MQQB) is not part of PacketSize
            if not receive:             # a received message is seldom read again: not worth a place
                service.packets.put(packed, buffer, size, arrival_time, lookup_identifier)
        handle = NULL_HANDLE
        if receive:
            handle = ctx.new_handle(service.remoteread_handle_type, entry)
            service.adm.receive_handles.add(entry)
    except BaseException:
        if receive:
            release(service, entry)
        raise
    return Delivery(status, buffer, size, handle, entry, arrival_time, lookup_identifier)


def release(service: Service, entry: RemoteReadEntry, *, delete: bool = False) -> int:
    """Dequeue Message End (MS-MQDMPR 3.1.7.1.12) for the message of a receive, once: ACK deletes it, NACK
    makes it Available again. Returns its rStatus; MQ_ERROR_INVALID_HANDLE if already released, or if the
    descriptor was closed (MS-MQDMPR Close Queue has then released the message itself)."""
    if entry.finished or entry.user_message_packet is None:
        return st.MQ_ERROR_INVALID_HANDLE
    entry.finished = True
    service.adm.receive_handles.remove(entry)
    descriptor = entry.open_queue_descriptor
    if descriptor is None:
        return st.MQ_ERROR_INVALID_HANDLE
    return service.qm.dequeue_message_end(descriptor, entry.user_message_packet, delete_message=delete)


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
