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


def _guid(value: Any) -> uuid.UUID:
    return uuid.UUID(bytes_le=bytes(value.getData() if hasattr(value, "getData") else value))


def format_name(queue_format: Any) -> str | None:
    """The format name of an R_OpenQueue pQueueFormat, or None when MS-MQRR 3.1.4.2 does not accept it."""
    qft = queue_format["m_qft"]
    suffix = _SUFFIXES.get(queue_format["m_SuffixAndFlags"] & 0x0F)
    arm = queue_format["u"]
    if suffix is None or arm["tag"] != qft:
        return None
    if qft == QUEUE_FORMAT_TYPE_PUBLIC:
        return f"PUBLIC={_guid(arm['m_gPublicID'])}{suffix}"
    if qft == QUEUE_FORMAT_TYPE_PRIVATE:
        private = arm["m_oPrivateID"]
        return f"PRIVATE={_guid(private['Lineage'])}\\{private['Uniquifier']:08x}{suffix}"
    if qft == QUEUE_FORMAT_TYPE_MACHINE:
        return f"MACHINE={_guid(arm['m_gMachineID'])}{suffix}" if suffix else None
    if qft in (QUEUE_FORMAT_TYPE_DIRECT, QUEUE_FORMAT_TYPE_SUBQUEUE):
        try:
            text = arm["m_pDirectID" if qft == QUEUE_FORMAT_TYPE_DIRECT else "m_pDirectSubqueueID"]
        except UnicodeDecodeError:          # an unpaired surrogate: no format name can contain it
            return None
        if not isinstance(text, str) or not text.rstrip("\x00"):
            return None
        return "DIRECT=" + text.rstrip("\x00") + suffix
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
