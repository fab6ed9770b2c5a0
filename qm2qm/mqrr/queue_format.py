"""QUEUE_FORMAT (MS-MQMQ 2.2.7) → the format name the Open Queue event takes (MS-MQMQ 2.1); MS-MQRR 2.2.3's subset."""
from __future__ import annotations

import uuid
from typing import Any

QUEUE_FORMAT_TYPE_PUBLIC = 1
QUEUE_FORMAT_TYPE_PRIVATE = 2
QUEUE_FORMAT_TYPE_DIRECT = 3
QUEUE_FORMAT_TYPE_MACHINE = 4
QUEUE_FORMAT_TYPE_SUBQUEUE = 8
# m_SuffixAndFlags, Suffix Type subfield (MS-MQMQ 2.2.7)
_SUFFIXES = {0: "", 1: ";JOURNAL", 2: ";DEADLETTER", 3: ";DEADXACT"}
QUEUE_SUFFIX_TYPE_SUBQUEUE = 5      # with m_qft QUEUE_FORMAT_TYPE_SUBQUEUE only; the name is in m_pDirectSubqueueID


def _guid_bytes(value: Any) -> bytes:
    return bytes(value.getData() if hasattr(value, "getData") else value)


def format_name(queue_format: Any) -> str | None:
    """The format name of an R_OpenQueue pQueueFormat, or None when MS-MQRR 3.1.4.2 does not accept it. The
    QUEUE_FORMAT is impacket's (idl.py) or, from codec_fast, the tuple (m_qft, m_SuffixAndFlags, the arm's value)."""
    if type(queue_format) is tuple:
        return format_name_of(*queue_format)
    qft = queue_format["m_qft"]
    arm = queue_format["u"]
    if arm["tag"] != qft:
        return None
    if qft in (QUEUE_FORMAT_TYPE_PUBLIC, QUEUE_FORMAT_TYPE_MACHINE):
        value = _guid_bytes(arm["m_gPublicID" if qft == QUEUE_FORMAT_TYPE_PUBLIC else "m_gMachineID"])
    elif qft == QUEUE_FORMAT_TYPE_PRIVATE:
        private = arm["m_oPrivateID"]
        value = (_guid_bytes(private["Lineage"]), private["Uniquifier"])
    elif qft in (QUEUE_FORMAT_TYPE_DIRECT, QUEUE_FORMAT_TYPE_SUBQUEUE):
        try:
            value = arm["m_pDirectID" if qft == QUEUE_FORMAT_TYPE_DIRECT else "m_pDirectSubqueueID"]
        except UnicodeDecodeError:          # an unpaired surrogate: no format name can contain it
            return None
        if not isinstance(value, str):
            return None
        value = value.rstrip("\x00")
    else:
        return None
    return format_name_of(qft, queue_format["m_SuffixAndFlags"], value)


def format_name_of(qft: int, flags: int, value: Any) -> str | None:
    """format_name of a QUEUE_FORMAT's parts: ``value`` is the arm's, the GUID's 16 bytes_le, (Lineage bytes_le,
    Uniquifier) or the direct name without its terminating NULs."""
    if qft == QUEUE_FORMAT_TYPE_SUBQUEUE:
        # MS-MQMQ 2.2.7: Suffix Type QUEUE_SUFFIX_TYPE_SUBQUEUE (NONE taken too); the direct name holds ";Subqueue"
        return "DIRECT=" + value if (flags & 0x0F) in (0, QUEUE_SUFFIX_TYPE_SUBQUEUE) and ";" in value else None
    suffix = _SUFFIXES.get(flags & 0x0F)
    if suffix is None:
        return None
    if qft == QUEUE_FORMAT_TYPE_PUBLIC:
        return f"PUBLIC={uuid.UUID(bytes_le=value)}{suffix}"
    if qft == QUEUE_FORMAT_TYPE_PRIVATE:
        return f"PRIVATE={uuid.UUID(bytes_le=value[0])}\\{value[1]:08x}{suffix}"
    if qft == QUEUE_FORMAT_TYPE_MACHINE:
        return f"MACHINE={uuid.UUID(bytes_le=value)}{suffix}" if suffix else None
    if qft == QUEUE_FORMAT_TYPE_DIRECT:
        return "DIRECT=" + value + suffix if value else None
    return None


def queue_format(name: str) -> Any:
    """The QUEUE_FORMAT (an idl.py NDR structure) of a PUBLIC=, PRIVATE=, DIRECT= or MACHINE= format name: what
    a client puts in pQueueFormat. Raises ValueError for anything else."""
    from qm2qm.mqrr import idl
    value = idl.QUEUE_FORMAT()
    key, _, rest = name.partition("=")
    key = key.strip().upper()
    suffix = 0
    for code, text in _SUFFIXES.items():
        if code and rest.upper().endswith(text):
            rest, suffix = rest[:-len(text)], code
    value["m_SuffixAndFlags"] = suffix | (0x80 if suffix else 0)
    arm = value["u"]
    if key == "DIRECT":
        qft = QUEUE_FORMAT_TYPE_SUBQUEUE if ";" in rest else QUEUE_FORMAT_TYPE_DIRECT
        if qft == QUEUE_FORMAT_TYPE_SUBQUEUE:
            value["m_SuffixAndFlags"] = QUEUE_SUFFIX_TYPE_SUBQUEUE        # Flags 0x00 (MS-MQMQ 2.2.7)
        value["m_qft"] = arm["tag"] = qft
        arm["m_pDirectID" if qft == QUEUE_FORMAT_TYPE_DIRECT else "m_pDirectSubqueueID"] = rest + "\x00"
    elif key in ("PUBLIC", "MACHINE"):
        qft = QUEUE_FORMAT_TYPE_PUBLIC if key == "PUBLIC" else QUEUE_FORMAT_TYPE_MACHINE
        value["m_qft"] = arm["tag"] = qft
        arm["m_gPublicID" if key == "PUBLIC" else "m_gMachineID"] = uuid.UUID(rest).bytes_le
    elif key == "PRIVATE":
        guid, _, number = rest.partition("\\")
        value["m_qft"] = arm["tag"] = QUEUE_FORMAT_TYPE_PRIVATE
        arm["m_oPrivateID"]["Lineage"] = uuid.UUID(guid).bytes_le
        arm["m_oPrivateID"]["Uniquifier"] = int(number, 16)
    else:
        raise ValueError(f"{name!r} is not a PUBLIC=, PRIVATE=, DIRECT= or MACHINE= format name")
    return value
