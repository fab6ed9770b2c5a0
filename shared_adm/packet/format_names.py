"""Format-name strings (MS-MQMQ 2.1) <-> the queue encodings a UserMessage Packet can carry (2.2.18.1.4–7).

A Message holds queue names as MS-MQMQ 2.1 strings. Only three kinds fit in a packet: ``DIRECT=…``,
``PUBLIC=<guid>`` and ``PRIVATE=<qm guid>\\<hex id>`` (plus ``DL=<guid>`` inside a MultiQueueFormatHeader).
Names come back from a packet in canonical form: lower-case GUIDs, private ids as 8 hex digits, the
direct name exactly as on the wire after a ``DIRECT=`` prefix.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from shared_adm.packet.errors import PacketError


@dataclass(frozen=True, slots=True)
class DirectName:
    """A direct format name (2.1.2); ``address`` is the part after ``DIRECT=`` as carried on the wire."""
    address: str

    def __str__(self) -> str:
        return "DIRECT=" + self.address


@dataclass(frozen=True, slots=True)
class PublicName:
    """A public format name (2.1.3)."""
    queue: uuid.UUID

    def __str__(self) -> str:
        return f"PUBLIC={self.queue}"


@dataclass(frozen=True, slots=True)
class PrivateName:
    """A private format name (2.1.4): hosting queue manager GUID and private-queue number."""
    queue_manager: uuid.UUID
    identifier: int

    def __str__(self) -> str:
        return f"PRIVATE={self.queue_manager}\\{self.identifier:08x}"


@dataclass(frozen=True, slots=True)
class DistributionListName:
    """A distribution-list format name (2.1.5) without domain, as MQFDistributionQueueFormatName carries it."""
    list_identifier: uuid.UUID

    def __str__(self) -> str:
        return f"DL={self.list_identifier}"


FormatName = DirectName | PublicName | PrivateName | DistributionListName


GUID_TEXT = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


def _guid(text: str, field: str, name: str) -> uuid.UUID:
    if not GUID_TEXT.fullmatch(text):
        raise PacketError("FormatName", field, None, f"{name!r}: malformed GUID (needs 8-4-4-4-12 hex digits)")
    return uuid.UUID(text)


_PARSED: dict[tuple[str, bool], FormatName] = {}      # the names of the queues in use, parsed once (frozen values)
_PARSED_MAX = 4096


def parse_format_name(name: str, field: str, allow_dl: bool = False) -> FormatName:
    """Parse a format-name string (MS-MQMQ 2.1) into a form a packet can carry, or raise PacketError."""
    if type(name) is str:
        parsed = _PARSED.get((name, allow_dl))
        if parsed is not None:
            return parsed
    parsed = _parse_format_name(name, field, allow_dl)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[(name, allow_dl)] = parsed
    return parsed


def _parse_format_name(name: str, field: str, allow_dl: bool) -> FormatName:
    if not isinstance(name, str):
        raise PacketError("FormatName", field, None, f"format name must be a str, got {type(name).__name__}")
    kind, sep, rest = name.partition("=")
    kind = kind.upper()
    if not sep:
        raise PacketError("FormatName", field, None, f"{name!r} is not a format name (no '=')")
    if kind == "DIRECT":
        if not rest:
            raise PacketError("FormatName", field, None, f"{name!r}: empty direct address")
        return DirectName(rest)
    if kind == "PUBLIC":
        return PublicName(_guid(rest, field, name))
    if kind == "PRIVATE":
        qm, sep, number = rest.partition("\\")
        if not sep or not 1 <= len(number) <= 8 or any(c not in "0123456789abcdefABCDEF" for c in number):
            raise PacketError("FormatName", field, None,
                              f"{name!r}: PRIVATE= needs <guid>\\<1-8 hex digits> (no suffix can be carried)")
        return PrivateName(_guid(qm, field, name), int(number, 16))
    if kind == "DL" and allow_dl:
        if "@" in rest:
            raise PacketError("FormatName", field, None,
                              f"{name!r}: a DL domain cannot be carried by MQFDistributionQueueFormatName")
        return DistributionListName(_guid(rest, field, name))
    raise PacketError("FormatName", field, None,
                      f"{name!r}: a {kind or 'blank'} format name cannot be carried in a UserMessage Packet")
