"""Choosing and reading the UserHeader queue encodings (MS-MQMQ 2.2.19.2 DQ/AQ/RQ tables; MS-MQDMPR 3.1.1.12
DestinationQueueType, AdministrationQueueType, ResponseQueueType)."""
from __future__ import annotations

import uuid

from shared_adm.message import GUID_NULL
from shared_adm.packet.errors import PacketError
from shared_adm.packet.format_names import DirectName, FormatName, PrivateName, PublicName, parse_format_name
from shared_adm.packet.layout import (
    QFT_DIRECT, QFT_NONE, QFT_PRIVATE_ON_ADMIN, QFT_PRIVATE_ON_DESTINATION, QFT_PRIVATE_ON_OTHER,
    QFT_PRIVATE_ON_SOURCE, QFT_PUBLIC, QFT_SAME_AS_ADMIN,
)
from shared_adm.packet.user_header import QueueField

DESTINATION, ADMIN, RESPONSE = "DestinationQueue", "AdminQueue", "ResponseQueue"


def encoding_options(role: str, name: FormatName, source: uuid.UUID, destination_qm: uuid.UUID,
                     admin: FormatName | None) -> list[int]:
    """Queue Format Type codes able to carry ``name`` in ``role``, preferred first (1 is never preferred)."""
    options: list[int] = []
    if isinstance(name, DirectName):
        options.append(QFT_DIRECT)
    elif isinstance(name, PublicName):
        options.append(QFT_PUBLIC)
    elif isinstance(name, PrivateName):
        qm = name.queue_manager
        if role != DESTINATION and qm == source:
            options.append(QFT_PRIVATE_ON_SOURCE)
        if qm == destination_qm and destination_qm != GUID_NULL:
            options.append(QFT_PRIVATE_ON_DESTINATION)
        if role == RESPONSE and isinstance(admin, PrivateName) and admin.queue_manager == qm:
            options.append(QFT_PRIVATE_ON_ADMIN)
        if role != DESTINATION:
            options.append(QFT_PRIVATE_ON_OTHER)
    if role == RESPONSE and admin is not None and admin == name:
        options.append(QFT_SAME_AS_ADMIN)
    return options


def field_value(code: int, name: FormatName) -> QueueField:
    """The UserHeader field value that encodes ``name`` with Queue Format Type ``code``."""
    if code == QFT_DIRECT:
        return name.address
    if code == QFT_PUBLIC:
        return name.queue
    if code == QFT_PRIVATE_ON_OTHER:
        return name
    if code == QFT_SAME_AS_ADMIN:
        return None
    return name.identifier


def encode_queue(role: str, text: str | None, wanted: int | None, source: uuid.UUID,
                 destination_qm: uuid.UUID, admin: FormatName | None) -> tuple[int, QueueField, FormatName | None]:
    """(code, field value, parsed name) for one queue attribute; ``wanted`` is the Message's *QueueType."""
    if text is None:
        if wanted not in (None, QFT_NONE):
            raise PacketError("UserHeader", role, None, f"queue type {wanted} given but no format name")
        return QFT_NONE, None, None
    name = parse_format_name(text, role)
    options = encoding_options(role, name, source, destination_qm, admin)
    if not options:
        raise PacketError("UserHeader", role, None, f"{text!r} cannot be encoded as a {role}")
    if wanted is None:
        return options[0], field_value(options[0], name), name
    if wanted not in options:
        raise PacketError("UserHeader", role, None,
                          f"queue type {wanted} cannot carry {text!r} here (possible: {options})")
    return wanted, field_value(wanted, name), name


def decode_queue(code: int, value: QueueField, source: uuid.UUID, destination_qm: uuid.UUID,
                 admin: FormatName | None) -> FormatName | None:
    """The format name a UserHeader queue field stands for (the caller has validated code/admin)."""
    if code == QFT_NONE:
        return None
    if code == QFT_SAME_AS_ADMIN:
        return admin
    if code == QFT_DIRECT:
        return DirectName(value)
    if code == QFT_PUBLIC:
        return PublicName(value)
    if code == QFT_PRIVATE_ON_OTHER:
        return value
    host = {QFT_PRIVATE_ON_SOURCE: source, QFT_PRIVATE_ON_DESTINATION: destination_qm}.get(code)
    if code == QFT_PRIVATE_ON_ADMIN:
        host = admin.queue_manager
    return PrivateName(host, value)
