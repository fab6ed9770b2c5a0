"""A message packet as SectionBuffers (MS-MQRR 2.2.5–2.2.7; the ppPacketSections rules of 3.1.4.7 and 3.1.4.13)."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from qm2qm.mqrr.constants import stBinaryFirstSection, stBinarySecondSection, stFullPacket
from shared_adm.packet import UserMessagePacket
from shared_adm.packet.layout import BASE_HEADER, USER_AH

_U32 = struct.Struct("<I")
_TIME_TO_REACH_QUEUE = 12               # BaseHeader (MS-MQMQ 2.2.19.1)
_SENT_TIME = BASE_HEADER.size + 36      # UserHeader.SentTime (MS-MQMQ 2.2.19.2)
_USER_FLAGS = BASE_HEADER.size + 44     # UserHeader.Flags
INFINITE_SECONDS = 0xFFFFFFFF


@dataclass(slots=True)
class Section:
    """One SectionBuffer (2.2.6)."""
    section_type: int
    size_alloc: int
    buffer: bytes


def absolute_expiry(packet: bytes) -> bytes:
    """2.2.5.1 / 3.1.4.7: BaseHeader.TimeToReachQueue := UserHeader.SentTime + TimeToReachQueue (seconds since
    1970). An infinite TimeToReachQueue (0xFFFFFFFF) stays infinite and a sum past 32 bits saturates: the spec's
    sum would otherwise wrap to an early expiry."""
    relative = _U32.unpack_from(packet, _TIME_TO_REACH_QUEUE)[0]
    if relative == INFINITE_SECONDS:
        return packet
    absolute = min(_U32.unpack_from(packet, _SENT_TIME)[0] + relative, INFINITE_SECONDS)
    return packet[:_TIME_TO_REACH_QUEUE] + _U32.pack(absolute) + packet[_TIME_TO_REACH_QUEUE + 4:]


def relative_expiry(packet: bytes) -> bytes:
    """The client's reconstruction (3.2.4.3): a received packet's absolute TimeToReachQueue back to the MS-MQMQ
    2.2.19.1 relative form (minus UserHeader.SentTime), so it decodes as the same message qm2qm returns. Infinite
    stays infinite (a saturated sum comes back as at most 0xFFFFFFFF - SentTime)."""
    absolute = _U32.unpack_from(packet, _TIME_TO_REACH_QUEUE)[0]
    if absolute == INFINITE_SECONDS:
        return packet
    relative = max(absolute - _U32.unpack_from(packet, _SENT_TIME)[0], 0)
    return packet[:_TIME_TO_REACH_QUEUE] + _U32.pack(relative) + packet[_TIME_TO_REACH_QUEUE + 4:]


def body_span(packet: bytes) -> tuple[int, int, int]:
    """(start of the message body, its end, end of the MessagePropertiesHeader) in a Binary Message packet."""
    parsed = UserMessagePacket.parse(packet)
    offset = BASE_HEADER.size + len(parsed.user.pack())
    for header in (parsed.transaction, parsed.security):
        if header is not None:
            offset += len(header.pack())
    fixed, label, extension, body, tail, padding = parsed.properties.pack_parts()
    start = offset + len(fixed) + len(label) + len(extension)
    return start, start + len(body), start + len(body) + len(tail) + len(padding)


def is_srmp(packet: bytes) -> bool:
    """UserHeader.Flags.AH: an SRMP Message (2.2.5.1.2)."""
    return bool(_U32.unpack_from(packet, _USER_FLAGS)[0] & USER_AH)


def packet_sections(packet: bytes, max_body_size: int) -> list[Section]:
    """The ppPacketSections of 3.1.4.7 for one packet and dwMaxBodySize.

    A Binary Message whose body is larger than dwMaxBodySize gives a first section (the headers and the first
    dwMaxBodySize body bytes; SectionSizeAlloc = headers + the whole body) and, when there are trailers (the
    headers after the MessagePropertiesHeader), a second section holding them. The 0–3 padding bytes that end
    the MessagePropertiesHeader are in neither: 2.2.7 puts the first section "up to" and the second "beyond
    the end of" that header, and SectionSizeAlloc counts only headers + body. SRMP Messages (AH set) are not
    produced by this queue manager; should one be stored, it is returned whole (its CompoundMessageHeader
    cannot be cut by dwMaxCompoundMessageSize without re-encoding it)."""
    packet = absolute_expiry(packet)
    if max_body_size >= len(packet) or is_srmp(packet):     # the body is shorter than the packet: not cut
        return [Section(stFullPacket, len(packet), packet)]
    start, end, properties_end = body_span(packet)
    actual = end - start
    if max_body_size >= actual:
        return [Section(stFullPacket, len(packet), packet)]
    sections = [Section(stBinaryFirstSection, start + actual, packet[:start + max_body_size])]
    trailers = packet[properties_end:]
    if trailers:
        sections.append(Section(stBinarySecondSection, len(trailers), trailers))
    return sections
