"""Message (MS-MQDMPR 3.1.1.12): every attribute a UserMessage packet (MS-MQMQ 2.2.20) can carry."""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

INFINITE = 0xFFFFFFFF
GUID_NULL = uuid.UUID(int=0)


class DeliveryGuarantee(enum.IntEnum):
    """Message.DeliveryGuarantee (3.1.1.12); values are UserHeader.Flags.DM."""
    EXPRESS = 0
    RECOVERABLE = 1


@dataclass(slots=True)
class Message:
    """MS-MQDMPR 3.1.1.12 Message. Field names are the spec's attribute names in snake_case.

    Times are seconds since 1970-01-01 UTC (as on the wire). Queue format names are the
    MS-MQMQ 2.1 format-name strings (e.g. ``DIRECT=OS:host\\private$\\q``) or None.
    """
    # identity and position (set by Enqueue Message, 3.1.7.1.9)
    lookup_identifier: int = 0
    identifier: tuple[uuid.UUID, int] = (GUID_NULL, 0)   # OBJECTID: (Lineage = source QM GUID, Uniquifier)
    arrival_time: int = 0
    sent_time: int = 0
    # delivery
    priority: int = 3
    delivery_guarantee: DeliveryGuarantee = DeliveryGuarantee.EXPRESS
    time_to_reach_queue: int = 0x54600
    time_to_be_received: int = INFINITE
    positive_journaling_requested: bool = False
    negative_journaling_requested: bool = False
    allow_peek_when_locked: bool = False
    application_deadletter_queue: str = ""
    class_: int = 0x0000                          # MESSAGE_CLASS_VALUES (MS-MQMQ 2.2.18.1.6)
    acknowledgements_requested: int = 0           # MessagePropertiesHeader.Flags bits (PA/PR/NA/NR)
    # content
    label: str = ""
    body: bytes = b""
    body_type: int = 0
    extension: bytes = b""
    application_tag: int = 0                      # AppSpecific
    correlation_identifier: bytes = bytes(20)
    # queues
    destination_queue_format_name: str | None = None
    destination_multi_queue_format_name: list[str] | None = None
    response_queue_format_name: str | None = None
    response_multi_queue_format_name: list[str] | None = None
    administration_queue_format_name: str | None = None
    administration_multi_queue_format_name: list[str] | None = None
    destination_queue_type: int | None = None          # UserHeader.Flags.DQ code; None = derive from the name
    administration_queue_type: int | None = None       # UserHeader.Flags.AQ code; None = derive
    response_queue_type: int | None = None             # UserHeader.Flags.RQ code; None = derive (1 only if asked)
    multiple_destination_signature: bytes = b""        # MultiQueueFormatHeader.Signature
    destination_queue_manager_identifier: uuid.UUID = GUID_NULL
    source_machine_identifier: uuid.UUID = GUID_NULL
    # security
    privacy_level: int = 0
    authentication_level: int = 0                 # 0 None, 1 Sig10, 3 Sig20, 5 Sig30 (SecurityHeader.Flags.AS)
    hash_algorithm: int = 0x8004                  # CALG_SHA1
    encryption_algorithm: int = 0x6801            # CALG_RC4
    sender_id: bytes = b""
    sender_id_type: int = 0                       # SecurityHeader.Flags.ST: 0 None, 1 Sid, 2 QueueManagerIdentifier
    sender_certificate: bytes = b""
    symmetric_key: bytes = b""
    signature: bytes = b""
    authentication_provider_type: int = 1
    authentication_provider_name: str = ""
    # transactions
    # The transaction the message was captured under; None = not transactional. The queue manager may use its
    # own key (e.g. XACTUOW bytes); the packet carries a 20-bit TransactionHeader.Flags.ID: an int is written
    # as is, bytes/str are reduced to 20 bits (shared_adm/packet/README.md); a parsed packet gives the int.
    transaction_identifier: bytes | str | int | None = None
    transactional_message_sequence_identifier: tuple[int, int] | None = None   # TxSequenceId (Ordinal, TimeStamp)
    transaction_sequence_number: int = 0
    transaction_previous_sequence_number: int = 0
    first_in_transaction: bool = False
    last_in_transaction: bool = False
    final_ack_required: bool = False
    connector_queue_manager_identifier: uuid.UUID | None = None
    # other
    tracing_requested: bool = False
    tracing_queue_identifier: uuid.UUID | None = None
    connector_type_identifier: uuid.UUID | None = None
    soap_envelope: str | None = None
    soap_header: str | None = None
    soap_body: str | None = None
    extra: dict = field(default_factory=dict)     # reserved bits etc. of a parsed packet (shared_adm/packet/README.md)
