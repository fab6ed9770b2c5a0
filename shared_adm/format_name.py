"""Format names (MS-MQMQ 2.1) as far as Open Queue (MS-MQDMPR 3.1.7.1.5) and Get Queue Path (3.1.7.1.26) need them.

``parse`` never raises: a malformed name yields ``FormatName(kind="illegal")`` so callers answer with a
status code (MQ_ERROR_ILLEGAL_FORMATNAME) instead of crashing.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

_GUID = r"\{?[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\}?"
_SUFFIXES = {"journal", "deadletter", "deadxact"}
# MS-MQMQ 2.1.1 (MSMQ 4.0 and later): Subqueue = 1*32(%x21 / %x23-2A / %x2D-3A / %x3C-5B / %x5D-7f)
SUBQUEUE_NAME = re.compile(r"[\x21\x23-\x2A\x2D-\x3A\x3C-\x5B\x5D-\x7F]{1,32}")
MAX_FORMAT_NAME_LENGTH = 380 * 4   # MQ_MAX_Q_NAME_LEN (124) per element, generously bounded for multi-element names


@dataclass(frozen=True, slots=True)
class FormatName:
    """One parsed format name. kind: direct | private | public | machine | multicast | dl | multiple | illegal."""
    kind: str
    text: str
    protocol: str = ""          # direct: OS | TCP | HTTP | HTTPS | IPX
    host: str = ""              # direct: the ProtocolAddressSpecification's host
    path: str = ""              # direct: "private$\name" or "name" (public)
    guid: uuid.UUID | None = None
    number: int = 0             # private: QueueNumber
    suffix: str = ""            # ";journal" | ";deadletter" | ";deadxact" (lower case, no ';') or subqueue name
    subqueue: str = ""          # direct: the Subqueue of "QueueName;Subqueue" as written (MS-MQMQ 2.1.1)
    elements: tuple["FormatName", ...] = ()

    @property
    def is_private_path(self) -> bool:
        """The direct path names a private queue."""
        return self.path.lower().startswith("private$\\")


def _guid(text: str) -> uuid.UUID | None:
    if not re.fullmatch(_GUID, text):
        return None
    return uuid.UUID(text.strip("{}"))


def _split_suffix(text: str) -> tuple[str, str]:
    if ";" in text:
        base, _, suffix = text.partition(";")
        return base, suffix.lower() or ";"         # "Queue;" names nothing: ";" is no suffix any check accepts
    return text, ""


def is_subqueue_name(name: str) -> bool:
    """A name a subqueue may have: of the Subqueue ABNF (MS-MQMQ 2.1.1) and none of the suffixes JOURNAL, DEADLETTER
    and DEADXACT, which ";name" already means."""
    return isinstance(name, str) and name.lower() not in _SUFFIXES and SUBQUEUE_NAME.fullmatch(name) is not None


def parse(text: object) -> FormatName:
    """Parse a format name (MS-MQMQ 2.1.1–2.1.7); anything not understood is kind "illegal"."""
    if not isinstance(text, str) or not text or len(text) > MAX_FORMAT_NAME_LENGTH or "\x00" in text:
        return FormatName("illegal", str(text)[:64])
    if "," in text:
        parts = tuple(parse(p) for p in text.split(","))
        if any(p.kind in ("illegal", "multiple") for p in parts):
            return FormatName("illegal", text)
        return FormatName("multiple", text, elements=parts)
    key, sep, value = text.partition("=")
    if not sep or not value:
        return FormatName("illegal", text)
    key = key.strip().upper()
    if key == "DIRECT":
        return _parse_direct(text, value)
    value, suffix = _split_suffix(value)
    if key == "PRIVATE":
        guid_text, _, number = value.partition("\\")
        guid = _guid(guid_text)
        if guid is None or not re.fullmatch(r"[0-9A-Fa-f]{1,8}", number) or suffix not in _SUFFIXES | {""}:
            return FormatName("illegal", text)
        return FormatName("private", text, guid=guid, number=int(number, 16), suffix=suffix)
    if key == "PUBLIC":
        guid = _guid(value)
        if guid is None or suffix not in _SUFFIXES | {""}:     # a subqueue has a direct format name only
            return FormatName("illegal", text)
        return FormatName("public", text, guid=guid, suffix=suffix)
    if key == "MACHINE":
        guid = _guid(value)
        if guid is None or suffix not in _SUFFIXES:
            return FormatName("illegal", text)
        return FormatName("machine", text, guid=guid, suffix=suffix)
    if key == "MULTICAST":
        return FormatName("multicast", text, host=value) if re.fullmatch(r"[0-9.]+:\d+", value) else FormatName("illegal", text)
    if key == "DL":
        return FormatName("dl", text, guid=_guid(value.partition("@")[0]))
    return FormatName("illegal", text)


def _parse_direct(text: str, value: str) -> FormatName:
    protocol, sep, address = value.partition(":")
    protocol = protocol.strip().upper()
    if not sep:
        return FormatName("illegal", text)
    if protocol in ("HTTP", "HTTPS"):
        rest = address.lstrip("/")
        host, _, path = rest.partition("/")
        path = path.partition("/")[2] if path.lower().startswith("msmq/") else path
        path, suffix = _split_suffix(path.replace("/", "\\"))
        if not host or not path:
            return FormatName("illegal", text)
        return FormatName("direct", text, protocol=protocol, host=host, path=path, suffix=suffix)
    if protocol not in ("OS", "TCP", "IPX"):           # MS-MQMQ 2.1.2's Protocol (SPX is not one)
        return FormatName("illegal", text)
    written_suffix = address.partition(";")[2]
    address, suffix = _split_suffix(address)
    host, _, path = address.partition("\\")
    if not host or not path or path.endswith("\\") or path.lower() == "private$":
        return FormatName("illegal", text)
    subqueue = ""
    if suffix and path.lower() != "system$":
        if not is_subqueue_name(suffix) and suffix != "journal":
            return FormatName("illegal", text)
        subqueue = written_suffix if suffix != "journal" else ""
    return FormatName("direct", text, protocol=protocol, host=host, path=path, suffix=suffix, subqueue=subqueue)


def pathname_key(pathname: str) -> tuple[str, str] | None:
    """(host, "private$\\name" | "name") of a queue pathname (MS-MQMQ 2.1.1), lower-cased; None if invalid."""
    if not isinstance(pathname, str) or not pathname or len(pathname) > 124 * 2 or "\x00" in pathname:
        return None
    parts = pathname.split("\\")
    if len(parts) == 2 and parts[0].lower() != "private$":
        host, name = parts
        local = name
    elif len(parts) == 3 and parts[1].lower() == "private$":
        host, name = parts[0], parts[2]
        local = "private$\\" + name
    elif len(parts) == 2:
        host, name = ".", parts[1]
        local = "private$\\" + name
    else:
        return None
    if not host or not name or len(name) > 124 or any(c in name for c in "\\/;,+\"\r\n\t") or name.strip() != name:
        return None
    return host.lower(), local.lower()
