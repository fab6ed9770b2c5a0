"""The UserMessage packet a read returns (MS-MQDMPR 3.1.7.1.30, 3.1.7.1.32), once per message, memoized for peeks."""
from __future__ import annotations

import logging
import struct
from dataclasses import dataclass

from qm2qm.remote_read.core import ReadCore
from qm2qm.remote_read.entries import ReadEntry
from qm2qm.remote_read.locks import lock, release
from shared_adm import status as st
from shared_adm.descriptor import ReadResult
from shared_adm.packet import PacketError, serialize_message_to_buffer
from shared_adm.packet.compact_packet import serialize_compact

# REMOTEREADDESC.dwSize is [range(0, 4325376)] (MS-MQQP 2.2.2.1): a larger packet cannot be returned at all.
# (MS-MQMQ 2.2.19.1 caps PacketSize at 0x00400000; enforcing that is the business of whoever accepts a message.)
MAX_PACKET_SIZE = 4325376
# MS-MQMQ 2.2.19.1 BaseHeader: VersionNumber(1) Reserved(1) Flags(2) Signature(4) PacketSize(4) ...
_PACKET_SIZE = struct.Struct("<I")
_PACKET_SIZE_OFFSET = 8

_log = logging.getLogger("qm2qm.remote_read")


@dataclass(slots=True)
class Packet:
    """A serialized UserMessage packet with its PacketSize and the Message attributes a read answer carries."""
    buffer: bytes
    size: int
    arrival_time: int
    lookup_identifier: int


def packet_of(core: ReadCore, result: ReadResult, *, memo: bool) -> Packet:
    """Serialize the message of a successful read; raises PacketError if it cannot be returned."""
    packed = result.packed
    cached = core.packets.get(packed)
    if cached is not None:          # a memo of what the lines below give (the Message is not rebuilt)
        return Packet(*cached)
    try:
        fast = serialize_compact(packed, MAX_PACKET_SIZE) if packed is not None else None
    except (TypeError, ValueError, AttributeError):     # a value the checks did not foresee: the general path
        fast = None                                     # (below) answers it, with its PacketError if need be
    if fast is not None:            # the common packet, straight from the compact form (same bytes)
        buffer, arrival_time, lookup_identifier = fast
        if memo:
            core.packets.put(packed, buffer, len(buffer), arrival_time, lookup_identifier)
        return Packet(buffer, len(buffer), arrival_time, lookup_identifier)
    message = result.message
    buffer = serialize_message_to_buffer(message, MAX_PACKET_SIZE)
    size = _PACKET_SIZE.unpack_from(buffer, _PACKET_SIZE_OFFSET)[0]
    if size < len(buffer):
        buffer = buffer[:size]      # a trailing SessionHeader (MS-MQQB) is not part of PacketSize
    if memo:                        # a received message is seldom read again: not worth a place
        core.packets.put(packed, buffer, size, message.arrival_time, message.lookup_identifier)
    return Packet(buffer, size, message.arrival_time, message.lookup_identifier)


def take_packet(core: ReadCore, entry: ReadEntry, result: ReadResult, *, receive: bool) -> tuple[int, Packet | None]:
    """(rStatus, packet) of a read that returned MQ_OK: a receive first holds its Locked message on the entry;
    a packet that cannot be built returns that message to the queue (MQ_ERROR_INSUFFICIENT_RESOURCES)."""
    if receive:
        lock(core, entry, result)
    try:
        return st.MQ_OK, packet_of(core, result, memo=not receive)
    except PacketError as exc:
        descriptor = entry.descriptor
        queue = descriptor.queue_reference if descriptor is not None else None
        _log.error("message %#x of %s cannot be returned: %s (take it out of the readers' way: `qm2qm move QUEUE "
                   "ID SUBQUEUE` or `qm2qm message QUEUE ID --delete`)",
                   getattr(result.message, "lookup_identifier", 0),
                   queue.pathname if queue is not None else "its queue", exc)
        if receive:
            release(core, entry)
        return st.MQ_ERROR_INSUFFICIENT_RESOURCES, None
    except BaseException:
        if receive:
            release(core, entry)
        raise
