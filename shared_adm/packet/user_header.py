"""UserHeader (MS-MQMQ 2.2.19.2) and its queue-name fields (2.2.18.1.5, 2.2.18.1.7)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from shared_adm.packet.errors import PacketError
from shared_adm.packet.format_names import PrivateName
from shared_adm.packet.layout import (
    AQ_VALID, DQ_VALID, MAX_ROUTING_COUNT, QFT_DIRECT, QFT_NONE, QFT_PRIVATE_ON_ADMIN, QFT_PRIVATE_ON_DESTINATION,
    QFT_PRIVATE_ON_OTHER, QFT_PRIVATE_ON_SOURCE, QFT_PUBLIC, QFT_SAME_AS_ADMIN, U16, U32, USER_AH, USER_AQ,
    USER_AQ_SHIFT, USER_CQ, USER_DM, USER_DM_SHIFT, USER_DQ, USER_DQ_SHIFT, USER_HEADER, USER_MP, USER_RC, USER_RQ,
    USER_RQ_SHIFT, USER_TH, ZEROS, pad4,
)
from shared_adm.packet.reader import Reader, encode_wstring

# A queue field's value by Queue Format Type: int = PrivateQueueFormatNameId (2, 3, 4),
# UUID = PublicQueueFormatName (5), PrivateName = PrivateQueueFormatName (6), str = DirectQueueFormatName (7).
QueueField = int | uuid.UUID | PrivateName | str | None
PRIVATE_ADMIN_TYPES = frozenset({QFT_PRIVATE_ON_SOURCE, QFT_PRIVATE_ON_DESTINATION, QFT_PRIVATE_ON_OTHER})


def pack_queue_field(code: int, value: QueueField, field: str) -> bytes:
    """Encode one queue-name field for Queue Format Type ``code``; direct names are padded to 4 bytes."""
    if code in (QFT_NONE, QFT_SAME_AS_ADMIN):
        return b""
    if code == QFT_PUBLIC:
        return value.bytes_le
    if code == QFT_PRIVATE_ON_OTHER:
        return value.queue_manager.bytes_le + U32.pack(value.identifier)
    if code == QFT_DIRECT:
        text = encode_wstring(value, "UserHeader", field)
        if len(text) > 0xFFFF:
            raise PacketError("UserHeader", field, None, f"direct name of {len(text)} bytes exceeds Count's 65535")
        return U16.pack(len(text)) + text + ZEROS[:pad4(2 + len(text))]
    return U32.pack(value)


def parse_queue_field(r: Reader, code: int, field: str, base: int) -> QueueField:
    """Decode one queue-name field of Queue Format Type ``code`` (the caller has validated the code)."""
    if code in (QFT_NONE, QFT_SAME_AS_ADMIN):
        return None
    if code == QFT_PUBLIC:
        return r.guid(field)
    if code == QFT_PRIVATE_ON_OTHER:
        qm = r.guid(field + ".SourceQueueManager")
        return PrivateName(qm, r.unpack(U32, field + ".PrivateQueueIdentifier")[0])
    if code == QFT_DIRECT:
        (count,) = r.unpack(U16, field + ".Count")
        text = r.wstring(count, field + ".DirectFormatName")
        r.skip_padding(base, field)
        return text
    return r.unpack(U32, field + ".PrivateQueueIdentifier")[0]


@dataclass(slots=True)
class UserHeader:
    """MS-MQMQ 2.2.19.2 UserHeader: 48 fixed bytes, then DestinationQueue, AdminQueue, ResponseQueue, ConnectorType."""
    source_queue_manager: uuid.UUID
    queue_manager_address: uuid.UUID
    time_to_be_received: int
    sent_time: int
    message_id: int
    flags: int
    destination_queue: QueueField = None
    admin_queue: QueueField = None
    response_queue: QueueField = None
    connector_type: uuid.UUID | None = None

    @property
    def dq(self) -> int:
        return (self.flags & USER_DQ) >> USER_DQ_SHIFT

    @property
    def aq(self) -> int:
        return (self.flags & USER_AQ) >> USER_AQ_SHIFT

    @property
    def rq(self) -> int:
        return (self.flags & USER_RQ) >> USER_RQ_SHIFT

    def pack(self) -> bytes:
        """The header bytes, a multiple of 4 long."""
        parts = [
            USER_HEADER.pack(self.source_queue_manager.bytes_le, self.queue_manager_address.bytes_le,
                             self.time_to_be_received, self.sent_time, self.message_id, self.flags),
            pack_queue_field(self.dq, self.destination_queue, "DestinationQueue"),
            pack_queue_field(self.aq, self.admin_queue, "AdminQueue"),
            pack_queue_field(self.rq, self.response_queue, "ResponseQueue"),
        ]
        if self.flags & USER_CQ:
            parts.append(self.connector_type.bytes_le)
        return b"".join(parts)

    @classmethod
    def parse(cls, r: Reader) -> UserHeader:
        """Parse at the reader's cursor; invalid DQ/AQ codes are errors (2.2.19.2: close the session)."""
        base = r.pos
        src, qma, ttbr, sent, msg_id, flags = r.unpack(USER_HEADER, "fixed part")
        flags_offset = base + 44
        dq = (flags & USER_DQ) >> USER_DQ_SHIFT
        aq = (flags & USER_AQ) >> USER_AQ_SHIFT
        rq = (flags & USER_RQ) >> USER_RQ_SHIFT
        if dq not in DQ_VALID:
            raise r.error("Flags.DQ", f"destination queue type {dq} is invalid (MUST be 0, 3, 5 or 7)", flags_offset)
        if aq not in AQ_VALID:
            raise r.error("Flags.AQ", f"admin queue type {aq} is invalid (MUST be 0, 2, 3, 5, 6 or 7)", flags_offset)
        _check_flags(flags, dq, aq, rq, r, flags_offset)
        hdr = cls(uuid.UUID(bytes_le=src), uuid.UUID(bytes_le=qma), ttbr, sent, msg_id, flags)
        hdr.destination_queue = parse_queue_field(r, dq, "DestinationQueue", base)
        hdr.admin_queue = parse_queue_field(r, aq, "AdminQueue", base)
        hdr.response_queue = parse_queue_field(r, rq, "ResponseQueue", base)
        if flags & USER_CQ:
            hdr.connector_type = r.guid("ConnectorType")
        return hdr


def _check_flags(flags: int, dq: int, aq: int, rq: int, r: Reader, at: int) -> None:
    """Flag rules of 2.2.19.2 beyond the DQ/AQ code tables."""
    if not flags & USER_MP:
        raise r.error("Flags.MP", "MessagePropertiesHeader flag clear; it MUST always be set", at)
    if flags & USER_AH:
        raise r.error("Flags.AH", "HTTP-origin packet (SRMP headers of MS-MQRR 2.2.5.1) is not supported", at)
    dm = (flags & USER_DM) >> USER_DM_SHIFT
    if dm > 1:
        raise r.error("Flags.DM", f"delivery mode {dm} is invalid (MUST be 0 or 1)", at)
    if flags & USER_TH and dm == 0:
        raise r.error("Flags.TH", "TransactionHeader present with express delivery (DM MUST NOT be 0)", at)
    if flags & USER_RC > MAX_ROUTING_COUNT:
        raise r.error("Flags.RC", f"routing count {flags & USER_RC} exceeds 0x1D", at)
    if rq == QFT_SAME_AS_ADMIN and aq == QFT_NONE:
        raise r.error("Flags.RQ", "response queue 'same as admin queue' (1) but no admin queue (AQ = 0)", at)
    if rq == QFT_PRIVATE_ON_ADMIN and aq not in PRIVATE_ADMIN_TYPES:
        raise r.error("Flags.RQ", f"response queue on the admin host (4) but admin queue type {aq} is not private", at)
