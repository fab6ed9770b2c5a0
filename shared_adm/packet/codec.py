"""MS-MQDMPR 3.1.7.1.30–3.1.7.1.32: Message (3.1.1.12) <-> UserMessage Packet (MS-MQMQ 2.2.20).

Decisions where the specs are silent or disagree are listed in shared_adm/packet/README.md.
"""
from __future__ import annotations

import operator
import struct
import uuid
import zlib

from shared_adm.message import GUID_NULL, DeliveryGuarantee, Message
from shared_adm.packet.base_header import BaseHeader
from shared_adm.packet.debug_header import DebugHeader
from shared_adm.packet.errors import PacketError
from shared_adm.packet.format_names import parse_format_name
from shared_adm.packet.layout import (
    BASE_DH, BASE_PR, BASE_RESERVED, BASE_SH, BASE_TR, DEBUG_RESERVED, MAX_PACKET_SIZE, MAX_TX_ID, PROPERTIES_ACKS,
    QFT_DIRECT, SEC_AS, SEC_AS_SHIFT, SEC_AU, SEC_DE, SEC_EB, SEC_ST, SENDER_ID_TYPES, SESSION_HEADER_SIZE, TX_CG,
    TX_FA, TX_FM, TX_ID_SHIFT, TX_LM, TX_RESERVED, USER_AQ_SHIFT, USER_CQ, USER_DM_SHIFT, USER_DQ_SHIFT, USER_HH,
    USER_JN, USER_JP, USER_MP, USER_MQ, USER_RC, USER_RESERVED, USER_RQ_SHIFT, USER_SH, USER_TH,
)
from shared_adm.packet.multi_queue_header import MultiQueueFormatHeader
from shared_adm.packet.packet import UserMessagePacket
from shared_adm.packet.properties_header import MessagePropertiesHeader
from shared_adm.packet.queue_encoding import ADMIN, DESTINATION, RESPONSE, decode_queue, encode_queue
from shared_adm.packet.security_header import ProviderInfo, SecurityHeader
from shared_adm.packet.soap_header import SoapHeader
from shared_adm.packet.transaction_header import TransactionHeader
from shared_adm.packet.user_header import UserHeader

# Message.extra keys: packet bits with no ADM attribute, kept so a parsed packet re-serializes byte for byte.
X_BASE_RESERVED = "BaseHeader.Reserved"
X_BASE_FLAGS = "BaseHeader.Flags.reserved"
X_BASE_PR = "BaseHeader.Flags.PR"                # PR of a transactional packet (receiver ignores it)
X_USER_RC = "UserHeader.Flags.RC"
X_USER_FLAGS = "UserHeader.Flags.reserved"
X_MPH_FLAGS = "MessagePropertiesHeader.Flags.reserved"
X_LABEL_NUL = "MessagePropertiesHeader.Label.empty"     # LabelLength 1: an empty label with its NUL
X_BODY_TAIL = "MessagePropertiesHeader.AllocationBodySize.tail"
X_TX_FLAGS = "TransactionHeader.Flags.reserved"
X_SEC_FLAGS = "SecurityHeader.Flags.xor"             # bits differing from those derived from the Message
X_DEBUG = "DebugHeader.reserved"                     # (Flags bits 2-15, Reserved); forces a DebugHeader
X_SOAP = "SoapHeader.Reserved"
X_MQF = "MultiQueueFormatHeader.Reserved"
X_SESSION = "SessionHeader"
X_PROVIDER_EXTENSION = "SecurityHeader.ProviderInfo.extension"   # bytes after ProviderName's NUL (SecInfoEx)
X_DIRECT_QMA = "UserHeader.QueueManagerAddress"      # non-NULL address beside a direct destination (MS-MQRR use)

_U32 = (0, 0xFFFFFFFF)
_RANGES = (  # attribute, (low, high), packet field
    ("priority", (0, 7), "BaseHeader.Flags.PR"),
    ("time_to_reach_queue", _U32, "BaseHeader.TimeToReachQueue"),
    ("time_to_be_received", _U32, "UserHeader.TimeToBeReceived"),
    ("sent_time", _U32, "UserHeader.SentTime"),
    ("class_", (0, 0xFFFF), "MessagePropertiesHeader.MessageClass"),
    ("acknowledgements_requested", (0, PROPERTIES_ACKS), "MessagePropertiesHeader.Flags"),
    ("body_type", _U32, "MessagePropertiesHeader.BodyType"),
    ("application_tag", _U32, "MessagePropertiesHeader.ApplicationTag"),
    ("privacy_level", _U32, "MessagePropertiesHeader.PrivacyLevel"),
    ("hash_algorithm", _U32, "MessagePropertiesHeader.HashAlgorithm"),
    ("encryption_algorithm", _U32, "MessagePropertiesHeader.EncryptionAlgorithm"),
)
_OPTIONAL_SECURITY = ("sender_id", "symmetric_key", "signature", "sender_certificate",
                      "authentication_provider_name")


def _fail(field: str, reason: str) -> PacketError:
    header, _, rest = field.partition(".")
    return PacketError(header, rest, None, reason)


_RANGE_VALUES = operator.attrgetter(*(attribute for attribute, _, _ in _RANGES))


def _check_ranges(m: Message) -> None:
    for value, (attribute, (low, high), field) in zip(_RANGE_VALUES(m), _RANGES):
        if not isinstance(value, int) or not low <= value <= high:
            raise _fail(field, f"Message.{attribute} = {value!r} is outside {low}..{high:#x}")


def _guid(value, field: str) -> uuid.UUID:
    if not isinstance(value, uuid.UUID):
        raise _fail(field, f"expected a uuid.UUID, got {value!r}")
    return value


def _security_derived(m: Message) -> int:
    """SecurityHeader.Flags as derived from the Message (MS-MQDMPR 3.1.7.1.32; AU/AS: README)."""
    flags = m.sender_id_type | (m.authentication_level << SEC_AS_SHIFT)
    if m.authentication_level:
        flags |= SEC_AU
    if m.privacy_level:
        flags |= SEC_EB
    if m.signature and not m.authentication_provider_name:
        flags |= SEC_DE
    return flags


def _wants_security_header(m: Message) -> bool:
    return (bool(m.authentication_level) or any(getattr(m, a) for a in _OPTIONAL_SECURITY)
            or X_PROVIDER_EXTENSION in m.extra)


def build_user_message_packet(m: Message) -> UserMessagePacket:
    """MS-MQDMPR 3.1.7.1.30 + 3.1.7.1.32: the packet structure for ``m`` (PacketSize filled by pack())."""
    _check_ranges(m)
    extra = m.extra
    lineage, ordinal = m.identifier
    source = _guid(m.source_machine_identifier, "UserHeader.SourceQueueManager")
    if source == GUID_NULL:
        source = _guid(lineage, "UserHeader.SourceQueueManager")
    elif lineage not in (GUID_NULL, source):
        raise _fail("UserHeader.SourceQueueManager", f"Message.identifier lineage {lineage} differs from "
                    f"source_machine_identifier {source}; both are SourceQueueManager")
    if not isinstance(ordinal, int) or not 0 <= ordinal <= 0xFFFFFFFF:
        raise _fail("UserHeader.MessageID", f"Message.identifier ordinal {ordinal!r} is not a uint32")
    destination_qm = _guid(m.destination_queue_manager_identifier, "UserHeader.QueueManagerAddress")
    dest_name = m.destination_queue_format_name
    if dest_name is not None:
        parsed = parse_format_name(dest_name, DESTINATION)
        qm = getattr(parsed, "queue_manager", None)
        if qm is not None:
            if destination_qm == GUID_NULL:
                destination_qm = qm
            elif destination_qm != qm:
                raise _fail("UserHeader.QueueManagerAddress", f"private destination {dest_name!r} is not on "
                            f"destination_queue_manager_identifier {destination_qm}")
    dq, dq_value, _ = encode_queue(DESTINATION, dest_name, m.destination_queue_type, source, destination_qm, None)
    if dq == QFT_DIRECT:
        destination_qm = _guid(extra.get(X_DIRECT_QMA, GUID_NULL), "UserHeader.QueueManagerAddress")
    aq, aq_value, admin = encode_queue(ADMIN, m.administration_queue_format_name, m.administration_queue_type,
                                       source, destination_qm, None)
    rq, rq_value, _ = encode_queue(RESPONSE, m.response_queue_format_name, m.response_queue_type,
                                   source, destination_qm, admin)
    if m.acknowledgements_requested and admin is None:
        raise _fail("MessagePropertiesHeader.Flags", "acknowledgements requested but no administration queue")

    transactional = m.transaction_identifier is not None
    security = _wants_security_header(m)
    tracing = m.tracing_requested or m.tracing_queue_identifier is not None or X_DEBUG in extra
    soap = m.soap_header is not None or m.soap_body is not None
    multi = m.destination_multi_queue_format_name is not None
    connector = m.connector_type_identifier is not None
    if transactional and m.delivery_guarantee != DeliveryGuarantee.RECOVERABLE:
        raise _fail("UserHeader.Flags.DM", "a transactional message MUST be recoverable (TH requires DM = 1)")
    if m.delivery_guarantee not in (0, 1):
        raise _fail("UserHeader.Flags.DM", f"delivery_guarantee {m.delivery_guarantee!r} is not 0 or 1")

    user_flags = (extra.get(X_USER_RC, 0) & USER_RC | int(m.delivery_guarantee) << USER_DM_SHIFT
                  | dq << USER_DQ_SHIFT | aq << USER_AQ_SHIFT | rq << USER_RQ_SHIFT | USER_MP
                  | extra.get(X_USER_FLAGS, 0) & USER_RESERVED)
    if m.negative_journaling_requested:
        user_flags |= USER_JN
    if m.positive_journaling_requested:
        user_flags |= USER_JP
    if security:
        user_flags |= USER_SH
    if transactional:
        user_flags |= USER_TH
    if connector:
        user_flags |= USER_CQ
    if multi:
        user_flags |= USER_MQ
    if soap:
        user_flags |= USER_HH
    user = UserHeader(source, destination_qm, m.time_to_be_received, m.sent_time, ordinal, user_flags,
                      dq_value, aq_value, rq_value,
                      _guid(m.connector_type_identifier, "UserHeader.ConnectorType") if connector else None)

    session = extra.get(X_SESSION)
    base_flags = (extra.get(X_BASE_PR, 0) if transactional else m.priority) & BASE_PR
    base_flags |= extra.get(X_BASE_FLAGS, 0) & BASE_RESERVED
    if tracing:
        base_flags |= BASE_DH
    if m.tracing_requested:
        base_flags |= BASE_TR
    if session is not None:
        if len(session) != SESSION_HEADER_SIZE:
            raise _fail("SessionHeader", f"{len(session)} bytes, MUST be 16")
        base_flags |= BASE_SH
    base = BaseHeader(base_flags, 0, m.time_to_reach_queue, extra.get(X_BASE_RESERVED, 0) & 0xFF)

    label = m.label
    if not isinstance(label, str):
        raise _fail("MessagePropertiesHeader.Label", f"label must be a str, got {type(label).__name__}")
    if "\x00" in label:
        raise _fail("MessagePropertiesHeader.Label", "embedded NUL character in the label")
    correlation = bytes(m.correlation_identifier)
    if len(correlation) != 20:
        raise _fail("MessagePropertiesHeader.CorrelationID", f"{len(correlation)} bytes, MUST be 20")
    properties = MessagePropertiesHeader(
        m.acknowledgements_requested | extra.get(X_MPH_FLAGS, 0) & 0xF0, m.class_, correlation, m.body_type,
        m.application_tag, m.privacy_level, m.hash_algorithm, m.encryption_algorithm,
        label if label or extra.get(X_LABEL_NUL) else None, m.extension, m.body, extra.get(X_BODY_TAIL, b""))

    packet = UserMessagePacket(base, user, properties, session_header=session)
    if transactional:
        packet.transaction = _transaction_header(m, extra)
    if security:
        packet.security = _security_header(m, extra)
    if tracing:
        flags, reserved = extra.get(X_DEBUG, (0, 0))
        queue = m.tracing_queue_identifier
        packet.debug = DebugHeader(flags & DEBUG_RESERVED | (queue is not None), reserved,
                                   None if queue is None else _guid(queue, "DebugHeader.QueueIdentifier"))
    if soap:
        packet.soap = SoapHeader(m.soap_header, m.soap_body, *extra.get(X_SOAP, (0, 0)))
    if multi:
        packet.multi_queue = MultiQueueFormatHeader(
            *([parse_format_name(n, "MultiQueueFormatHeader." + role, allow_dl=True) for n in names or ()]
              for role, names in (("Destination", m.destination_multi_queue_format_name),
                                  ("Administration", m.administration_multi_queue_format_name),
                                  ("Response", m.response_multi_queue_format_name))),
            m.multiple_destination_signature, tuple(extra.get(X_MQF, (0, 0, 0, 0))))
    return packet


def _transaction_header(m: Message, extra: dict) -> TransactionHeader:
    tx_id = transaction_header_id(m.transaction_identifier)
    flags = tx_id << TX_ID_SHIFT | extra.get(X_TX_FLAGS, 0) & TX_RESERVED
    connector = m.connector_queue_manager_identifier
    for flag, wanted in ((TX_CG, connector is not None), (TX_FA, m.final_ack_required),
                         (TX_FM, m.first_in_transaction), (TX_LM, m.last_in_transaction)):
        if wanted:
            flags |= flag
    ordinal, timestamp = m.transactional_message_sequence_identifier or (0, 0)
    if connector is not None:
        _guid(connector, "TransactionHeader.ConnectorQMGuid")
    return TransactionHeader(flags, ordinal, timestamp, m.transaction_sequence_number,
                             m.transaction_previous_sequence_number, connector)


def transaction_header_id(transaction_identifier: bytes | str | int) -> int:
    """TransactionHeader.Flags.ID (2.2.20.5) for a Message.TransactionIdentifier: an int (0..0xFFFFF) as is;
    the queue manager's own key (bytes, or str as UTF-8) reduced to 20 bits with CRC-32, so every message of
    one transaction gets the same ID."""
    if isinstance(transaction_identifier, int) and not isinstance(transaction_identifier, bool):
        if not 0 <= transaction_identifier <= MAX_TX_ID:
            raise _fail("TransactionHeader.Flags.ID", f"transaction_identifier {transaction_identifier} is "
                        "outside the 20-bit range 0..0xFFFFF")
        return transaction_identifier
    if isinstance(transaction_identifier, str):
        transaction_identifier = transaction_identifier.encode("utf-8")
    if isinstance(transaction_identifier, (bytes, bytearray, memoryview)):
        return zlib.crc32(transaction_identifier) & MAX_TX_ID
    raise _fail("TransactionHeader.Flags.ID", f"transaction_identifier {transaction_identifier!r} is not an int, "
                "bytes or str")


def _security_header(m: Message, extra: dict) -> SecurityHeader:
    if m.sender_id_type not in SENDER_ID_TYPES:
        raise _fail("SecurityHeader.Flags.ST", f"sender_id_type {m.sender_id_type!r} is not 0, 1 or 2")
    if m.sender_id_type == 0 and m.sender_id:
        raise _fail("SecurityHeader.SenderIdSize", "sender_id given with sender_id_type None (ST = 0)")
    if not isinstance(m.authentication_level, int) or not 0 <= m.authentication_level <= 0xF:
        raise _fail("SecurityHeader.Flags.AS", f"authentication_level {m.authentication_level!r} is not 0..15")
    info = None
    if m.authentication_provider_name or X_PROVIDER_EXTENSION in extra:
        info = ProviderInfo(m.authentication_provider_type, m.authentication_provider_name,
                            bytes(extra.get(X_PROVIDER_EXTENSION, b"")))
    return SecurityHeader(_security_derived(m) ^ extra.get(X_SEC_FLAGS, 0), m.sender_id, m.symmetric_key,
                          m.signature, m.sender_certificate, info)


def serialize_message_to_buffer(message: Message, max_packet_size: int = MAX_PACKET_SIZE) -> bytes:
    """MS-MQDMPR 3.1.7.1.32 Serialize Message to Buffer: the UserMessage Packet bytes, PacketSize set last."""
    try:
        return build_user_message_packet(message).pack(max_packet_size)
    except PacketError:
        raise
    except (struct.error, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise PacketError("UserMessagePacket", "", None, f"Message attribute of the wrong type or range: {exc}") \
            from exc


def construct_user_message_packet(message: Message) -> bytes:
    """MS-MQDMPR 3.1.7.1.30 Construct a UserMessage Packet: headers chosen from the Message, then serialized."""
    return serialize_message_to_buffer(message)


def deserialize_message_from_buffer(buffer: bytes | bytearray | memoryview,
                                    max_packet_size: int = MAX_PACKET_SIZE) -> Message:
    """MS-MQDMPR 3.1.7.1.31 Deserialize Message From Buffer: parse strictly, then map fields to attributes."""
    return message_from_packet(UserMessagePacket.parse(buffer, max_packet_size))


def message_from_packet(p: UserMessagePacket) -> Message:
    """The attribute table of MS-MQDMPR 3.1.7.1.31 applied to a parsed packet."""
    base, user, props = p.base, p.user, p.properties
    extra: dict = {}
    src, qma = user.source_queue_manager, user.queue_manager_address
    admin = decode_queue(user.aq, user.admin_queue, src, qma, None)
    m = Message(
        identifier=(src, user.message_id), source_machine_identifier=src, sent_time=user.sent_time,
        time_to_reach_queue=base.time_to_reach_queue, time_to_be_received=user.time_to_be_received,
        priority=0 if p.transaction is not None else base.flags & BASE_PR,
        delivery_guarantee=DeliveryGuarantee((user.flags >> USER_DM_SHIFT) & 3),
        positive_journaling_requested=bool(user.flags & USER_JP),
        negative_journaling_requested=bool(user.flags & USER_JN),
        class_=props.message_class, acknowledgements_requested=props.flags & PROPERTIES_ACKS,
        label=props.label or "", body=props.body, body_type=props.body_type, extension=props.extension,
        application_tag=props.application_tag, correlation_identifier=props.correlation_id,
        privacy_level=props.privacy_level, hash_algorithm=props.hash_algorithm,
        encryption_algorithm=props.encryption_algorithm,
        destination_queue_manager_identifier=GUID_NULL if user.dq == QFT_DIRECT else qma,
        destination_queue_type=user.dq, administration_queue_type=user.aq, response_queue_type=user.rq,
        tracing_requested=bool(base.flags & BASE_TR), connector_type_identifier=user.connector_type,
        extra=extra,
    )
    dest = decode_queue(user.dq, user.destination_queue, src, qma, None)
    response = decode_queue(user.rq, user.response_queue, src, qma, admin)
    m.destination_queue_format_name = None if dest is None else str(dest)
    m.administration_queue_format_name = None if admin is None else str(admin)
    m.response_queue_format_name = None if response is None else str(response)
    _keep(extra, X_BASE_RESERVED, base.reserved)
    _keep(extra, X_BASE_FLAGS, base.flags & BASE_RESERVED)
    _keep(extra, X_USER_RC, user.flags & USER_RC)
    _keep(extra, X_USER_FLAGS, user.flags & USER_RESERVED)
    _keep(extra, X_MPH_FLAGS, props.flags & 0xF0)
    _keep(extra, X_LABEL_NUL, props.label == "")
    _keep(extra, X_BODY_TAIL, props.body_tail)
    _keep(extra, X_SESSION, p.session_header)
    if user.dq == QFT_DIRECT:
        _keep(extra, X_DIRECT_QMA, qma, GUID_NULL)
    if p.transaction is not None:
        _transaction_attributes(m, p.transaction, base.flags & BASE_PR)
    if p.security is not None:
        _security_attributes(m, p.security)
    if p.debug is not None:
        m.tracing_queue_identifier = p.debug.queue_identifier
        kept = (p.debug.flags & DEBUG_RESERVED, p.debug.reserved)
        if kept != (0, 0) or not (m.tracing_requested or m.tracing_queue_identifier):
            extra[X_DEBUG] = kept           # also marks a DebugHeader that carries nothing (DH, TR 0, QT 0)
    if p.soap is not None:
        m.soap_header, m.soap_body = p.soap.header, p.soap.body
        _keep(extra, X_SOAP, (p.soap.reserved, p.soap.reserved1), (0, 0))
    if p.multi_queue is not None:
        mq = p.multi_queue
        m.destination_multi_queue_format_name = [str(n) for n in mq.destination]
        m.administration_multi_queue_format_name = [str(n) for n in mq.administration] or None
        m.response_multi_queue_format_name = [str(n) for n in mq.response] or None
        m.multiple_destination_signature = mq.signature
        _keep(extra, X_MQF, mq.reserved, (0, 0, 0, 0))
    return m


def _keep(extra: dict, key: str, value, default=0) -> None:
    if value and value != default:
        extra[key] = value


def _transaction_attributes(m: Message, tx: TransactionHeader, priority: int) -> None:
    m.transaction_identifier = (tx.flags >> TX_ID_SHIFT) & MAX_TX_ID
    m.transactional_message_sequence_identifier = (tx.ordinal, tx.timestamp)
    m.transaction_sequence_number = tx.tx_sequence_number
    m.transaction_previous_sequence_number = tx.previous_tx_sequence_number
    m.final_ack_required = bool(tx.flags & TX_FA)
    m.first_in_transaction = bool(tx.flags & TX_FM)
    m.last_in_transaction = bool(tx.flags & TX_LM)
    m.connector_queue_manager_identifier = tx.connector_qm_guid
    _keep(m.extra, X_TX_FLAGS, tx.flags & TX_RESERVED)
    _keep(m.extra, X_BASE_PR, priority)


def _security_attributes(m: Message, sec: SecurityHeader) -> None:
    m.sender_id_type = sec.flags & SEC_ST
    m.authentication_level = (sec.flags & SEC_AS) >> SEC_AS_SHIFT
    m.sender_id = sec.security_id
    m.symmetric_key = sec.encryption_key
    m.signature = sec.signature
    m.sender_certificate = sec.sender_cert
    info = sec.provider_info
    if info is not None:
        m.authentication_provider_type = info.provider_type
        m.authentication_provider_name = info.provider_name
        if info.extension or not info.provider_name:
            m.extra[X_PROVIDER_EXTENSION] = info.extension     # also marks a ProviderInfo with an empty name
    _keep(m.extra, X_SEC_FLAGS, sec.flags ^ _security_derived(m))
