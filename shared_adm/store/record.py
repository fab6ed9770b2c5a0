"""Message (MS-MQDMPR 3.1.1.12) <-> store row encoding: attributes as tagged compact JSON, body as a BLOB.

The data directory is a trust boundary, so nothing here can execute code on decode (no pickle,
no marshal, no import by name). Encoding is generic over ``dataclasses.fields(Message)``: a field
another module adds to Message round-trips without a change here. Only non-default attributes are
written. JSON has no bytes/UUID/tuple/enum, so those values are written as a tagged list
``[tag, ...]``; a bare JSON list never occurs, which keeps decoding unambiguous:

    ["b", base64]        bytes / bytearray
    ["u", 32 hex]        uuid.UUID
    ["t", [items]]       tuple
    ["l", [items]]       list
    ["d", {str: value}]  dict with str keys       ["m", [[key, value], ...]]  dict with other keys
    ["e", name, int]     int-valued Enum (IntEnum, IntFlag); decoded back to the class when it is known
"""
from __future__ import annotations

import binascii
import dataclasses
import enum
import json
import itertools
import logging
import operator
import typing
import uuid

from shared_adm.message import Message

__all__ = ["encode_value", "decode_value", "encode_message", "decode_message", "RecordError"]

log = logging.getLogger(__name__)


class RecordError(ValueError):
    """A stored Message record (3.1.1.12) that cannot be decoded: corrupt or from an incompatible version."""


# Enum class name -> {int value: member}, for the "e" tag; Message field -> the same for its annotated
# int enum. A member lookup in a dict is several times cheaper than calling the enum class.
_ENUMS: dict[str, dict[int, enum.Enum]] = {}
_FIELD_ENUMS: dict[str, dict[int, enum.Enum]] = {}
_FIELD_ENUM_TYPES: dict[str, type] = {}
_UUIDS: dict[str, uuid.UUID] = {}       # hex -> UUID: queue manager GUIDs repeat across most messages
_UUID_CACHE_SIZE = 4096
_CONTAINERS = (list, dict)      # JSON values decode_value must see (dict only to reject it)


def _members(cls: type) -> dict[int, enum.Enum]:
    return {int(member.value): member for member in cls}


def _register_enum(cls: type) -> None:
    if isinstance(cls, type) and issubclass(cls, enum.Enum) and issubclass(cls, int) \
            and cls.__qualname__ not in _ENUMS:
        _ENUMS[cls.__qualname__] = _members(cls)


def _enum_in_hint(hint: object) -> type | None:
    if isinstance(hint, type):
        return hint if issubclass(hint, enum.Enum) and issubclass(hint, int) else None
    for arg in typing.get_args(hint):
        found = _enum_in_hint(arg)
        if found is not None:
            return found
    return None


def _scan_message_type() -> None:
    try:
        hints = typing.get_type_hints(Message)
    except Exception:       # an annotation that does not resolve must not make the store unusable
        log.warning("cannot resolve Message annotations; enum fields decode as int", exc_info=True)
        hints = {}
    for name, hint in hints.items():
        cls = _enum_in_hint(hint)
        if cls is not None:
            _FIELD_ENUMS[name] = _members(cls)
            _FIELD_ENUM_TYPES[name] = cls
            _register_enum(cls)
    try:
        from shared_adm import enums as _enums_module     # owned by another helper; optional
    except Exception:
        return
    for value in vars(_enums_module).values():
        _register_enum(value)


_scan_message_type()


def encode_value(value: object) -> object:
    """A Message/Queue attribute value (3.1.1.12, 3.1.1.2) as JSON-able data, tagged where JSON falls short."""
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int or kind is float:
        return value
    if isinstance(value, enum.Enum):
        if not isinstance(value, int):
            raise TypeError(f"cannot store enum {kind.__qualname__}: only int-valued enums are supported")
        _register_enum(kind)
        return ["e", kind.__qualname__, int(value)]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ["b", binascii.b2a_base64(value, newline=False).decode("ascii")]
    if kind is uuid.UUID:
        return ["u", value.hex]
    if isinstance(value, tuple):
        return ["t", [encode_value(item) for item in value]]
    if isinstance(value, list):
        return ["l", [encode_value(item) for item in value]]
    if isinstance(value, dict):
        if all(type(key) is str for key in value):
            return ["d", {key: encode_value(item) for key, item in value.items()}]
        return ["m", [[encode_value(key), encode_value(item)] for key, item in value.items()]]
    for native in (int, str, float):    # a subclass of a native (not an enum): store the plain value
        if isinstance(value, native):
            return native(value)
    raise TypeError(f"cannot store a value of type {kind.__qualname__}")


def decode_value(value: object) -> object:
    """Inverse of encode_value (3.1.1.12 attribute values); RecordError on anything it cannot have written."""
    if type(value) is not list:
        if type(value) is dict:
            raise RecordError("untagged JSON object in record")
        return value
    if not value or type(value[0]) is not str:
        raise RecordError(f"untagged JSON array in record: {value!r:.60}")
    tag = value[0]
    try:
        if tag == "u":
            hex_ = value[1]
            decoded = _UUIDS.get(hex_)
            if decoded is None:
                decoded = uuid.UUID(hex=hex_)
                if len(_UUIDS) >= _UUID_CACHE_SIZE:
                    _UUIDS.clear()
                _UUIDS[hex_] = decoded
            return decoded
        if tag == "t":
            return tuple([decode_value(item) if type(item) in _CONTAINERS else item for item in value[1]])
        if tag == "b":
            return binascii.a2b_base64(value[1], strict_mode=True)
        if tag == "l":
            return [decode_value(item) if type(item) in _CONTAINERS else item for item in value[1]]
        if tag == "d":
            return {key: decode_value(item) for key, item in value[1].items()}
        if tag == "m":
            return {decode_value(key): decode_value(item) for key, item in value[1]}
        if tag == "e":
            number = value[2]
            if type(number) is not int:
                raise RecordError(f"enum value is not an int: {number!r:.40}")
            members = _ENUMS.get(value[1])
            if members is None:
                return number
            return members.get(number, number)      # a value this version does not name: keep the number
    except RecordError:
        raise
    except (IndexError, TypeError, ValueError, AttributeError, binascii.Error) as exc:
        raise RecordError(f"malformed {tag!r} value in record: {exc}") from None
    raise RecordError(f"unknown tag {tag!r} in record")


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    default: object
    default_type: type
    has_default: bool


def _field_specs() -> tuple[_FieldSpec, ...]:
    specs = []
    for f in dataclasses.fields(Message):
        if not f.init or f.name == "body":
            continue
        if f.default is not dataclasses.MISSING:
            specs.append(_FieldSpec(f.name, f.default, type(f.default), True))
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
            specs.append(_FieldSpec(f.name, default, type(default), True))
        else:
            specs.append(_FieldSpec(f.name, None, type(None), False))
    return tuple(specs)


_SPECS = _field_specs()
_NO_DEFAULT = object()      # the default of a field without one: never equal to a value
_OTHER_SPECS = tuple(spec for spec in _SPECS if spec.name != "lookup_identifier")
_NAMES = tuple(spec.name for spec in _OTHER_SPECS)
_INDEXES = range(len(_NAMES))
_GET_ALL = operator.attrgetter(*_NAMES)     # one C call reads every attribute
_DEFAULTS = tuple(spec.default if spec.has_default else _NO_DEFAULT for spec in _OTHER_SPECS)
_DEFAULT_TYPES = tuple(spec.default_type for spec in _OTHER_SPECS)
_LOOKUP_DEFAULT = next((s.default for s in _SPECS if s.name == "lookup_identifier" and s.has_default), _NO_DEFAULT)
_LOOKUP_DEFAULT_TYPE = type(_LOOKUP_DEFAULT)
_ENCODER = json.JSONEncoder(separators=(",", ":"))
_STORED_NAMES = frozenset(f.name for f in dataclasses.fields(Message) if f.init and f.name != "body")
_DECODER = json.JSONDecoder()
_warned_unknown: set[str] = set()


def encode_message(message: Message, lookup_identifier: int | None = None) -> tuple[str, bytes]:
    """Encode a Message (3.1.1.12) as (attributes JSON text, body bytes); defaults are left out.

    ``lookup_identifier`` is the row key; the Message's own LookupIdentifier is written only when
    it differs from it.
    """
    attrs: dict[str, object] = {}
    name = ""
    try:
        values = _GET_ALL(message)
        # only the attributes that are not the default object itself are looked at in Python
        for index in itertools.compress(_INDEXES, map(operator.is_not, values, _DEFAULTS)):
            value = values[index]
            name = _NAMES[index]
            if type(value) is _DEFAULT_TYPES[index] and value == _DEFAULTS[index]:
                continue
            kind = type(value)
            if kind is int or kind is str or kind is bool:
                attrs[name] = value
            elif kind is _FIELD_ENUM_TYPES.get(name):
                attrs[name] = int(value)        # the annotation names the enum: decode_message restores it
            else:
                attrs[name] = encode_value(value)
        name = "lookup_identifier"
        value = message.lookup_identifier
        if lookup_identifier is None or type(value) is not int or value != lookup_identifier:
            if not (lookup_identifier is None and type(value) is _LOOKUP_DEFAULT_TYPE and value == _LOOKUP_DEFAULT):
                attrs[name] = encode_value(value)
    except TypeError as exc:
        raise TypeError(f"Message.{name}: {exc}") from None
    body = message.body
    if type(body) is not bytes:
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise TypeError(f"Message.body: expected bytes, got {type(body).__qualname__}")
        body = bytes(body)
    return _ENCODER.encode(attrs), body


def decode_message(attrs: str, body: bytes, lookup_identifier: int | None = None) -> Message:
    """Decode a Message (3.1.1.12) written by encode_message; RecordError for anything else."""
    return message_from_fields(decode_message_fields(attrs, body, lookup_identifier))


def message_from_fields(fields: dict) -> Message:
    """The Message of decode_message_fields' keyword arguments."""
    try:
        return Message(**fields)
    except TypeError as exc:
        raise RecordError(f"attributes do not fit Message: {exc}") from None


def decode_message_fields(attrs: str, body: bytes, lookup_identifier: int | None = None) -> dict:
    """decode_message up to the Message's keyword arguments (only the non-default ones, and body)."""
    try:
        return _decode_message_fields(attrs, body, lookup_identifier)
    except RecursionError:
        raise RecordError("attributes are nested too deeply") from None


def _decode_message_fields(attrs: str, body: bytes, lookup_identifier: int | None) -> dict:
    try:
        raw, end = _DECODER.raw_decode(attrs)
    except (ValueError, TypeError) as exc:
        raise RecordError(f"attributes are not valid JSON: {exc}") from None
    if type(raw) is not dict:
        raise RecordError("attributes are not a JSON object")
    if end != len(attrs):
        raise RecordError("trailing data after the attributes")
    unknown = raw.keys() - _STORED_NAMES
    if unknown:
        for name in unknown:
            del raw[name]
            if name not in _warned_unknown:
                _warned_unknown.add(name)
                log.warning("stored Message attribute %r is unknown to this version; dropped", name)
    for name, value in raw.items():
        kind = type(value)
        if kind is list:
            raw[name] = decode_value(value)
        elif kind is dict:
            raise RecordError(f"untagged JSON object in attribute {name!r}")
        elif kind is int and name in _FIELD_ENUMS:
            raw[name] = _FIELD_ENUMS[name].get(value, value)
    if lookup_identifier is not None and "lookup_identifier" not in raw:
        raw["lookup_identifier"] = lookup_identifier
    if body is None:
        raise RecordError("message body is NULL")
    raw["body"] = body if type(body) is bytes else bytes(body)
    return raw
