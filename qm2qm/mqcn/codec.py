"""MS-MQCN 2.2 codec: PROPVALUE (2.2.3.x), Change Notification Message (2.2.4), Notification Body (2.2.5),
Notification Update (2.2.6). Strict: anything malformed or truncated raises ``MqcnError`` with the reason; a
decode either returns a whole message or nothing. All numbers little-endian, no padding anywhere (2.2.3)."""
from __future__ import annotations

import re
import struct
import uuid
from dataclasses import dataclass, field

VERSION_DIRECTORY_SERVICE = 0x01          # 2.2.4: sent by an MSMQ Directory Service
VERSION_QUEUE_MANAGER = 0x02              # 2.2.4: sent by an MSMQ queue manager
COMMAND_CREATE, COMMAND_CHANGE, COMMAND_DELETE = 0x00, 0x01, 0x02
EVENT_CREATE_QUEUE, EVENT_CHANGE_QUEUE, EVENT_DELETE_QUEUE, EVENT_CHANGE_MACHINE = 1, 2, 3, 4
RESERVED_SIZE = 24
MQDS_QUEUE, MQDS_MACHINE = 1, 2           # PROPID_D_OBJTYPE values (MS-MQMQ 2.3.13.4)
MQDS_SITESCOPE, MQDS_ENTERPRISESCOPE = 0, 1

# PROPID constants of 2.2.2.1 (and the rest of MS-MQMQ 2.3.1, 2.3.2, 2.3.13) with their VARTYPE.
PROPID_Q_INSTANCE, PROPID_Q_TYPE, PROPID_Q_PATHNAME, PROPID_Q_JOURNAL, PROPID_Q_QUOTA = 101, 102, 103, 104, 105
PROPID_Q_BASEPRIORITY, PROPID_Q_JOURNAL_QUOTA, PROPID_Q_LABEL, PROPID_Q_CREATE_TIME = 106, 107, 108, 109
PROPID_Q_MODIFY_TIME, PROPID_Q_AUTHENTICATE, PROPID_Q_PRIV_LEVEL, PROPID_Q_TRANSACTION = 110, 111, 112, 113
PROPID_Q_SCOPE, PROPID_Q_QMID, PROPID_Q_MULTICAST_ADDRESS, PROPID_Q_ADS_PATH = 114, 115, 125, 126
PROPID_Q_SECURITY = 1101
PROPID_QM_SITE_ID, PROPID_QM_MACHINE_ID, PROPID_QM_ADDRESS, PROPID_QM_CNS = 201, 202, 206, 207
PROPID_QM_QUOTA, PROPID_QM_JOURNAL_QUOTA, PROPID_QM_MACHINE_TYPE, PROPID_QM_MODIFY_TIME = 214, 215, 216, 218
PROPID_QM_FOREIGN, PROPID_QM_OS, PROPID_QM_SECURITY = 219, 220, 1201
PROPID_D_SCOPE, PROPID_D_OBJTYPE = 1403, 1404

VT_I1, VT_UI1, VT_I2, VT_UI2, VT_BOOL = "VT_I1", "VT_UI1", "VT_I2", "VT_UI2", "VT_BOOL"
VT_I4, VT_UI4, VT_I8, VT_UI8, VT_CLSID = "VT_I4", "VT_UI4", "VT_I8", "VT_UI8", "VT_CLSID"
VT_LPWSTR, VT_BLOB = "VT_LPWSTR", "VT_BLOB"
VT_UI4_VECTOR, VT_CLSID_VECTOR, VT_LPWSTR_VECTOR = "VT_UI4|VT_VECTOR", "VT_CLSID|VT_VECTOR", "VT_LPWSTR|VT_VECTOR"
VT_UI1_VECTOR = "VT_UI1|VT_VECTOR"        # not in 2.2.3; coded like VT_BLOB (Size + bytes), see DECISIONS.md

PROPID_TYPES: dict[int, str] = {
    101: VT_CLSID, 102: VT_CLSID, 103: VT_LPWSTR, 104: VT_UI1, 105: VT_UI4, 106: VT_I2, 107: VT_UI4,
    108: VT_LPWSTR, 109: VT_I4, 110: VT_I4, 111: VT_UI1, 112: VT_UI4, 113: VT_UI1, 114: VT_UI1, 115: VT_CLSID,
    116: VT_CLSID, 117: VT_BLOB, 118: VT_UI4, 119: VT_UI4, 121: VT_LPWSTR, 123: VT_LPWSTR, 124: VT_LPWSTR,
    125: VT_LPWSTR, 126: VT_LPWSTR, 1101: VT_BLOB, 1102: VT_BLOB, 1103: VT_UI4,
    201: VT_CLSID, 202: VT_CLSID, 203: VT_LPWSTR, 205: VT_UI1_VECTOR, 206: VT_BLOB, 207: VT_CLSID_VECTOR,
    208: VT_CLSID_VECTOR, 209: VT_CLSID_VECTOR, 210: VT_UI4, 211: VT_CLSID, 212: VT_UI4, 213: VT_BLOB,
    214: VT_UI4, 215: VT_UI4, 216: VT_LPWSTR, 217: VT_I4, 218: VT_I4, 219: VT_UI1, 220: VT_UI4, 221: VT_LPWSTR,
    222: VT_CLSID_VECTOR, 223: VT_LPWSTR_VECTOR, 224: VT_LPWSTR_VECTOR, 227: VT_UI1, 228: VT_UI1, 229: VT_UI1,
    231: VT_UI1_VECTOR, 232: VT_UI1_VECTOR, 233: VT_LPWSTR, 234: VT_BLOB, 237: VT_UI4, 238: VT_BLOB,
    239: VT_BLOB, 241: VT_BLOB, 242: VT_UI1, 1201: VT_BLOB, 1202: VT_BLOB, 1203: VT_BLOB, 1205: VT_BLOB,
    1401: VT_BLOB, 1402: VT_CLSID, 1403: VT_UI1, 1404: VT_UI1, 1405: VT_CLSID,
}

_FIXED = {VT_I1: "<b", VT_UI1: "<B", VT_I2: "<h", VT_UI2: "<H", VT_I4: "<i", VT_UI4: "<I", VT_I8: "<q",
          VT_UI8: "<Q"}
_U32 = struct.Struct("<I")


class MqcnError(ValueError):
    """Input that does not follow MS-MQCN 2.2; the message names the field and the rule."""


# ---------------------------------------------------------------------------------------------- 2.2.3 PROPVALUE
class _Reader:
    """A bounds-checked cursor over a buffer; every read past the end is an MqcnError naming the field."""
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, size: int, what: str) -> bytes:
        """The next ``size`` bytes, or MqcnError naming ``what``."""
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise MqcnError(f"{what}: needs {size} bytes at offset {self.pos}, "
                            f"only {len(self.data) - self.pos} left (truncated)")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u32(self, what: str) -> int:
        return _U32.unpack(self.take(4, what))[0]

    def guid(self, what: str) -> uuid.UUID:
        return uuid.UUID(bytes_le=self.take(16, what))

    def wstr(self, what: str) -> str:
        """A null-terminated UTF-16LE string (2.2.3.10), code units kept as they are (surrogatepass)."""
        data, start = self.data, self.pos
        i = start
        while True:
            if i + 2 > len(data):
                raise MqcnError(f"{what}: no UTF-16 NullTerminator before the end of the buffer (offset {start})")
            if data[i] == 0 and data[i + 1] == 0:
                break
            i += 2
        self.pos = i + 2
        return data[start:i].decode("utf-16-le", errors="surrogatepass")

    @property
    def left(self) -> int:
        return len(self.data) - self.pos


def _wstr_bytes(text: str, what: str) -> bytes:
    if not isinstance(text, str):
        raise MqcnError(f"{what}: expected a string, got {type(text).__name__}")
    if "\x00" in text:
        raise MqcnError(f"{what}: a VT_LPWSTR cannot hold U+0000 (it is the NullTerminator)")
    return text.encode("utf-16-le", errors="surrogatepass") + b"\x00\x00"


def encode_value(vartype: str, value, what: str = "PropertyValue") -> bytes:
    """One PROPVALUE in the format of its VARTYPE (2.2.3.1–2.2.3.15)."""
    try:
        if vartype in _FIXED:
            if isinstance(value, bool) or not isinstance(value, int):
                raise MqcnError(f"{what}: {vartype} needs an int, got {value!r}")
            return struct.pack(_FIXED[vartype], value)
        if vartype == VT_BOOL:
            if not isinstance(value, bool):
                raise MqcnError(f"{what}: VT_BOOL needs a bool, got {value!r}")
            return b"\xff\xff" if value else b"\x00\x00"
        if vartype == VT_CLSID:
            return _guid(value, what)
        if vartype == VT_LPWSTR:
            return _wstr_bytes(value, what)
        if vartype in (VT_BLOB, VT_UI1_VECTOR):
            if not isinstance(value, (bytes, bytearray)):
                raise MqcnError(f"{what}: {vartype} needs bytes, got {type(value).__name__}")
            return _U32.pack(len(value)) + bytes(value)
        if vartype == VT_UI4_VECTOR:
            return _U32.pack(len(value)) + b"".join(struct.pack("<I", v) for v in value)
        if vartype == VT_CLSID_VECTOR:
            return _U32.pack(len(value)) + b"".join(_guid(v, what) for v in value)
        if vartype == VT_LPWSTR_VECTOR:
            return _U32.pack(len(value)) + b"".join(_wstr_bytes(v, what) for v in value)
    except struct.error as exc:
        raise MqcnError(f"{what}: {value!r} out of range for {vartype} ({exc})") from None
    raise MqcnError(f"{what}: unknown VARTYPE {vartype!r}")


def _guid(value, what: str) -> bytes:
    if not isinstance(value, uuid.UUID):
        raise MqcnError(f"{what}: VT_CLSID needs a uuid.UUID, got {value!r}")
    return value.bytes_le


def _decode_value(reader: _Reader, vartype: str, what: str):
    if vartype in _FIXED:
        fmt = _FIXED[vartype]
        return struct.unpack(fmt, reader.take(struct.calcsize(fmt), what))[0]
    if vartype == VT_BOOL:
        raw = struct.unpack("<H", reader.take(2, what))[0]
        if raw not in (0x0000, 0xFFFF):
            raise MqcnError(f"{what}: VT_BOOL {raw:#06x} is neither VARIANT_TRUE 0xFFFF nor VARIANT_FALSE 0x0000")
        return raw == 0xFFFF
    if vartype == VT_CLSID:
        return reader.guid(what)
    if vartype == VT_LPWSTR:
        return reader.wstr(what)
    size = reader.u32(f"{what} Size")
    if vartype in (VT_BLOB, VT_UI1_VECTOR):
        return reader.take(size, f"{what} ({vartype} of {size} bytes)")
    if vartype == VT_UI4_VECTOR:
        raw = reader.take(4 * size, f"{what} (VT_UI4|VT_VECTOR of {size})")
        return tuple(struct.unpack(f"<{size}I", raw))
    if vartype == VT_CLSID_VECTOR:
        raw = reader.take(16 * size, f"{what} (VT_CLSID|VT_VECTOR of {size})")
        return tuple(uuid.UUID(bytes_le=raw[i:i + 16]) for i in range(0, len(raw), 16))
    if vartype == VT_LPWSTR_VECTOR:
        if size > reader.left // 2:
            raise MqcnError(f"{what}: VT_LPWSTR|VT_VECTOR Size {size} cannot fit in {reader.left} bytes (truncated)")
        return tuple(reader.wstr(f"{what}[{i}]") for i in range(size))
    raise MqcnError(f"{what}: unknown VARTYPE {vartype!r}")


def decode_value(vartype: str, data: bytes):
    """Decode exactly one PROPVALUE filling ``data``."""
    reader = _Reader(data)
    value = _decode_value(reader, vartype, "PropertyValue")
    if reader.left:
        raise MqcnError(f"PropertyValue: {reader.left} bytes after a {vartype}")
    return value


# ---------------------------------------------------------------------------------------------- 2.2.6
@dataclass(frozen=True)
class NotificationUpdate:
    """Notification Update (2.2.6); properties are (PropertyId, value) pairs in wire order."""
    command: int
    guid_master_id: uuid.UUID
    properties: tuple[tuple[int, object], ...] = ()
    path_name: str | None = None
    guid_identifier: uuid.UUID | None = None
    reserved: bytes = bytes(RESERVED_SIZE)

    @property
    def use_guid(self) -> int:
        """UseGuid: 0x01 when GuidIdentifier is used, 0x00 for PathName."""
        return 0x00 if self.guid_identifier is None else 0x01

    def property_ids(self) -> list[int]:
        """PropertyId[] in wire order."""
        return [pid for pid, _ in self.properties]

    def value(self, propid: int, default=None):
        """PropertyValue[IndexOf(propid)] (the first occurrence), or ``default``."""
        for pid, val in self.properties:
            if pid == propid:
                return val
        return default


def encode_update(update: NotificationUpdate) -> bytes:
    """Serialize a Notification Update (2.2.6)."""
    if update.command not in (COMMAND_CREATE, COMMAND_CHANGE, COMMAND_DELETE):
        raise MqcnError(f"Command {update.command!r} must be 0x00, 0x01 or 0x02 (2.2.6)")
    if (update.path_name is None) == (update.guid_identifier is None):
        raise MqcnError("exactly one of PathName and GuidIdentifier must be given (2.2.6 UseGuid)")
    if len(update.reserved) != RESERVED_SIZE:
        raise MqcnError(f"Reserved must be {RESERVED_SIZE} bytes, got {len(update.reserved)}")
    if len(update.properties) > 0xFF:
        raise MqcnError(f"NumberOfProperties {len(update.properties)} does not fit a UCHAR")
    out = [bytes((update.command, update.use_guid))]
    out.append(_wstr_bytes(update.path_name, "PathName") if update.guid_identifier is None
               else _guid(update.guid_identifier, "GuidIdentifier"))
    out += [_guid(update.guid_master_id, "GuidMasterId"), bytes(update.reserved), bytes((len(update.properties),))]
    values = []
    for pid, val in update.properties:
        vartype = _vartype(pid)
        out.append(_U32.pack(pid))
        values.append(encode_value(vartype, val, f"PropertyValue of PROPID {pid}"))
    return b"".join(out + values)


def _vartype(pid: int) -> str:
    vartype = PROPID_TYPES.get(pid)
    if vartype is None:
        raise MqcnError(f"PropertyId {pid} is not a MS-MQMQ 2.3 queue/machine/deletion PROPID: "
                        "its value format is unknown, so the rest of the update cannot be parsed")
    return vartype


def _decode_update(reader: _Reader, index: int) -> NotificationUpdate:
    where = f"Notification Update {index}"
    command = reader.u8(f"{where} Command")
    if command not in (COMMAND_CREATE, COMMAND_CHANGE, COMMAND_DELETE):
        raise MqcnError(f"{where}: Command {command:#04x} must be 0x00, 0x01 or 0x02 (2.2.6)")
    use_guid = reader.u8(f"{where} UseGuid")
    path_name = guid_identifier = None
    if use_guid == 0x00:
        path_name = reader.wstr(f"{where} PathName")
    elif use_guid == 0x01:
        guid_identifier = reader.guid(f"{where} GuidIdentifier")
    else:
        raise MqcnError(f"{where}: UseGuid {use_guid:#04x} must be 0x00 or 0x01 (2.2.6)")
    master = reader.guid(f"{where} GuidMasterId")
    reserved = reader.take(RESERVED_SIZE, f"{where} Reserved")
    count = reader.u8(f"{where} NumberOfProperties")
    raw_ids = reader.take(4 * count, f"{where} PropertyId[{count}]")
    ids = struct.unpack(f"<{count}I", raw_ids)
    props = []
    for i, pid in enumerate(ids):
        vartype = _vartype(pid)
        props.append((pid, _decode_value(reader, vartype, f"{where} PropertyValue[{i}] (PROPID {pid}, {vartype})")))
    return NotificationUpdate(command, master, tuple(props), path_name, guid_identifier, reserved)


def decode_update(data: bytes) -> NotificationUpdate:
    """Decode exactly one Notification Update filling ``data``."""
    reader = _Reader(data)
    update = _decode_update(reader, 0)
    if reader.left:
        raise MqcnError(f"{reader.left} bytes after the Notification Update")
    return update


def object_type(update: NotificationUpdate) -> int | None:
    """The object type of 3.2.5.1: from PropertyId[0] for Command 0x00/0x01, PropertyValue[1] for 0x02."""
    if update.command == COMMAND_DELETE:
        if len(update.properties) < 2:
            return None
        value = update.properties[1][1]
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if not update.properties:
        return None
    first = update.properties[0][0]
    return (first - 1000) // 100 if first > 1000 else first // 100


# ---------------------------------------------------------------------------------------------- 2.2.5
_GUID_RE = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
_BODY_RE = re.compile(
    r"\s*<Notification>\s*<Event>(?P<event>[^<]*)</Event>\s*"
    r"<ObjectGuid>(?P<guid>[^<]*)</ObjectGuid ?>\s*"
    r"<DomainController>(?P<dc>[^<]*)</DomainController>\s*</Notification>", re.ASCII)
_VCHARS = re.compile(r"[\x21-\x7e]{1,256}", re.ASCII)


@dataclass(frozen=True)
class NotificationBody:
    """Notification Body (2.2.5): Event 1–4, ObjectGuid, DomainController (the directory server name)."""
    event: int
    object_guid: uuid.UUID
    domain_controller: str

    def text(self) -> str:
        """The Unicode string of the 2.2.5 template (ObjectGuid upper-case, no braces)."""
        if self.event not in (1, 2, 3, 4):
            raise MqcnError(f"Event {self.event!r} must be 1, 2, 3 or 4 (2.2.5)")
        if not isinstance(self.domain_controller, str) or not _VCHARS.fullmatch(self.domain_controller):
            raise MqcnError(f"DomainController {self.domain_controller!r} must be 1..256 VCHAR %x21-7E (2.2.5)")
        return (f"<Notification><Event>{self.event}</Event><ObjectGuid>{str(self.object_guid).upper()}"
                f"</ObjectGuid><DomainController>{self.domain_controller}</DomainController></Notification>")


def encode_body(body: NotificationBody) -> bytes:
    """UTF-16LE of the Notification Body string, no BOM, no terminator."""
    return body.text().encode("utf-16-le")


def decode_body(data: bytes) -> NotificationBody:
    """Parse a Notification Body; one odd trailing byte (the +1 of 3.3.5.3) and trailing NULs are ignored."""
    if len(data) % 2:
        data = data[:-1]
    try:
        text = data.decode("utf-16-le")
    except UnicodeDecodeError as exc:
        raise MqcnError(f"Notification Body is not valid UTF-16LE ({exc.reason} at byte {exc.start})") from None
    text = text.rstrip("\x00")
    match = _BODY_RE.fullmatch(text)
    if match is None:
        raise MqcnError(f"Notification Body does not follow the 2.2.5 ABNF: {text[:120]!r}")
    event, guid, dc = match.group("event"), match.group("guid"), match.group("dc")
    if event not in ("1", "2", "3", "4"):
        raise MqcnError(f"Event {event!r} must be 1, 2, 3 or 4 (2.2.5; <10>: such a message is ignored)")
    if not re.fullmatch(_GUID_RE, guid, re.ASCII):
        raise MqcnError(f"ObjectGuid {guid!r} is not XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX (2.2.5)")
    if not _VCHARS.fullmatch(dc):
        raise MqcnError(f"DomainController {dc!r} must be 1..256 VCHAR %x21-7E (2.2.5)")
    return NotificationBody(int(event), uuid.UUID(guid), dc)


# ---------------------------------------------------------------------------------------------- 2.2.4
@dataclass(frozen=True)
class ChangeNotificationMessage:
    """Change Notification Message (2.2.4): v1 carries Notification Updates, v2 one Notification Body."""
    version: int
    updates: tuple[NotificationUpdate, ...] = ()
    body: NotificationBody | None = None
    number_of_update_notifications: int | None = field(default=None, compare=False)  # None: derived
    trailing: bytes = field(default=b"", compare=False)     # bytes after Data (the unused +1 byte, 3.3.5.3)


def encode_message(cnm: ChangeNotificationMessage) -> bytes:
    """Serialize a Change Notification Message (2.2.4), without the +1 byte of 3.3.5.3."""
    if cnm.version == VERSION_DIRECTORY_SERVICE:
        count = len(cnm.updates) if cnm.number_of_update_notifications is None else cnm.number_of_update_notifications
        if count != len(cnm.updates) or not 0 <= count <= 0xFF:
            raise MqcnError(f"NumberOfUpdateNotifications {count} must equal the {len(cnm.updates)} updates")
        return bytes((cnm.version, count)) + b"".join(encode_update(u) for u in cnm.updates)
    if cnm.version == VERSION_QUEUE_MANAGER:
        if cnm.body is None or cnm.updates:
            raise MqcnError("a version 0x02 message carries exactly one Notification Body (2.2.4)")
        if cnm.number_of_update_notifications not in (None, 1):
            raise MqcnError("NumberOfUpdateNotifications MUST be 1 when Version is 0x02 (2.2.4)")
        return bytes((cnm.version, 1)) + encode_body(cnm.body)
    raise MqcnError(f"Version {cnm.version!r} must be 0x01 or 0x02 (2.2.4)")


def message_body(cnm: ChangeNotificationMessage) -> bytes:
    """Message.Body of 3.3.5.3: the Change Notification Message followed by one unused byte (0x00)."""
    return encode_message(cnm) + b"\x00"


def decode_message(data: bytes) -> ChangeNotificationMessage:
    """Parse Message.Body as a Change Notification Message (3.2.5); the trailing unused byte is kept apart."""
    if not isinstance(data, (bytes, bytearray)):
        raise MqcnError(f"Message.Body must be bytes, got {type(data).__name__}")
    data = bytes(data)
    reader = _Reader(data)
    version = reader.u8("Version")
    count = reader.u8("NumberOfUpdateNotifications")
    if version == VERSION_DIRECTORY_SERVICE:
        if count == 0:
            raise MqcnError("NumberOfUpdateNotifications is 0: a version 0x01 message carries at least one update")
        updates = tuple(_decode_update(reader, i) for i in range(count))
        if reader.left > 1:
            raise MqcnError(f"{reader.left} bytes follow the {count} Notification Updates; only the one unused "
                            "byte of 3.3.5.3 may (NumberOfUpdateNotifications too small?)")
        return ChangeNotificationMessage(version, updates, None, count, data[reader.pos:])
    if version == VERSION_QUEUE_MANAGER:
        if count != 1:
            raise MqcnError(f"NumberOfUpdateNotifications {count}: MUST be 1 when Version is 0x02 (2.2.4)")
        return ChangeNotificationMessage(version, (), decode_body(data[2:]), 1, b"")
    raise MqcnError(f"Version {version:#04x} is neither 0x01 (directory service) nor 0x02 (queue manager); "
                    "<4>: other messages are ignored")
