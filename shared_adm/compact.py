"""Compact in-memory form of a queued Message (3.1.1.12): only non-default attributes, packed with marshal.

A MessagePosition (3.1.1.11) holds this form so a queued message costs a few dozen bytes beyond its body
instead of a ~60-slot Message object; ``unpack`` rebuilds an equal Message on demand. Values marshal
cannot hold (or UUID-typed fields holding something else) fall back to pickle, so every Message round-trips.
"""
from __future__ import annotations

import dataclasses
import enum
import itertools
import marshal
import operator
import pickle
import uuid

from shared_adm import message as _message_module
from shared_adm.message import DeliveryGuarantee, Message

_MARSHAL = b"M"
_PICKLE = b"P"


def _field_table():
    table = []
    for f in dataclasses.fields(Message):
        if f.default is not dataclasses.MISSING:
            default, factory = f.default, None
        else:
            default, factory = None, f.default_factory
        ann = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        if "tuple[uuid.UUID" in ann:
            kind = "objectid"
        elif "uuid.UUID" in ann:
            kind = "uuid"
        elif isinstance(getattr(_message_module, ann.replace(" | None", "").strip(), None), enum.EnumMeta):
            kind = getattr(_message_module, ann.replace(" | None", "").strip())
        else:
            kind = "plain"
        table.append((f.name, default, factory, kind))
    return tuple(table)


_FIELDS = _field_table()
_GET_ALL = operator.attrgetter(*(name for name, _, _, _ in _FIELDS))     # one C call reads every attribute
_NO_DEFAULT = object()      # fields with a default_factory: always looked at
_DEFAULTS = tuple(_NO_DEFAULT if factory is not None else default for _, default, factory, _ in _FIELDS)
_INDEXES = range(len(_FIELDS))


class _Unmarshalable(Exception):
    pass


def _encode(kind: str, value):
    if kind == "uuid":
        if value is None:
            return None
        if not isinstance(value, uuid.UUID):
            raise _Unmarshalable
        return value.bytes
    if kind == "objectid":
        if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], uuid.UUID)):
            raise _Unmarshalable
        return (value[0].bytes, value[1])
    if isinstance(kind, enum.EnumMeta):
        if value is None:
            return None
        if not isinstance(value, kind):
            raise _Unmarshalable
        return value.value
    return value


_UUIDS: dict[bytes, uuid.UUID] = {}     # a queue manager's messages carry a handful of distinct GUIDs
_UUIDS_MAX = 4096


def _uuid(raw: bytes) -> uuid.UUID:
    value = _UUIDS.get(raw)
    if value is None:
        if len(_UUIDS) >= _UUIDS_MAX:
            _UUIDS.clear()
        value = _UUIDS[raw] = uuid.UUID(bytes=raw)
    return value


def _decode(kind: str, value):
    if kind == "uuid":
        return None if value is None else _uuid(value)
    if kind == "objectid":
        return (_uuid(value[0]), value[1])
    if isinstance(kind, enum.EnumMeta):
        return None if value is None else kind(value)
    return value


_ALLOW_PEEK_WHEN_LOCKED = 0x01


_RECOVERABLE = 0x02


def _flags(message: Message) -> bytes:
    flags = _ALLOW_PEEK_WHEN_LOCKED if message.allow_peek_when_locked else 0
    if message.delivery_guarantee == DeliveryGuarantee.RECOVERABLE:
        flags |= _RECOVERABLE
    return bytes((flags,))


def recoverable(blob: bytes) -> bool:
    """Message.DeliveryGuarantee == Recoverable, read straight from the compact form."""
    return len(blob) > 1 and bool(blob[1] & _RECOVERABLE)


def allow_peek_when_locked(blob: bytes) -> bool:
    """Message.AllowPeekWhenLocked read straight from the compact form (no unpacking)."""
    return len(blob) > 1 and bool(blob[1] & _ALLOW_PEEK_WHEN_LOCKED)


def pack(message: Message) -> bytes:
    """The compact form of ``message`` (every attribute that differs from its default)."""
    flat = []
    try:
        values = _GET_ALL(message)
        # only the attributes that are not the default object itself are looked at in Python (most are)
        for index in itertools.compress(_INDEXES, map(operator.is_not, values, _DEFAULTS)):
            _, default, factory, kind = _FIELDS[index]
            value = values[index]
            if factory is None:
                if type(value) is type(default) and value == default:
                    continue
            elif value == factory():
                continue
            flat.append(index)
            flat.append(_encode(kind, value) if kind != "plain" else value)
        return _MARSHAL + _flags(message) + marshal.dumps(tuple(flat))
    except (_Unmarshalable, ValueError):
        return _PICKLE + _flags(message) + pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


_FIELD_INDEX = {name: index for index, (name, _, _, _) in enumerate(_FIELDS)}
_ALLOW_PEEK_DEFAULT = _FIELDS[_FIELD_INDEX["allow_peek_when_locked"]][1]
_DELIVERY_DEFAULT = _FIELDS[_FIELD_INDEX["delivery_guarantee"]][1]


def pack_fields(fields: dict) -> bytes:
    """pack(Message(**fields)) without building the Message (start-up reads millions of stored messages)."""
    flat = []
    try:
        for index in sorted(map(_FIELD_INDEX.__getitem__, fields)):
            name, default, factory, kind = _FIELDS[index]
            value = fields[name]
            if factory is None:
                if value is default or (type(value) is type(default) and value == default):
                    continue
            elif value == factory():
                continue
            flat.append(index)
            flat.append(_encode(kind, value) if kind != "plain" else value)
        flags = _ALLOW_PEEK_WHEN_LOCKED if fields.get("allow_peek_when_locked", _ALLOW_PEEK_DEFAULT) else 0
        if fields.get("delivery_guarantee", _DELIVERY_DEFAULT) == DeliveryGuarantee.RECOVERABLE:
            flags |= _RECOVERABLE
        return _MARSHAL + bytes((flags,)) + marshal.dumps(tuple(flat))
    except (_Unmarshalable, ValueError, KeyError):
        return pack(Message(**fields))


def unpack(blob: bytes) -> Message:
    """Rebuild the Message packed by ``pack``."""
    if blob[:1] == _PICKLE:
        return pickle.loads(blob[2:])
    flat = marshal.loads(blob[2:])
    kwargs = {}
    for i in range(0, len(flat), 2):
        name, _, _, kind = _FIELDS[flat[i]]
        kwargs[name] = _decode(kind, flat[i + 1])
    return Message(**kwargs)


def body_size(blob: bytes) -> int:
    """Storage the message consumes (3.1.7.2.1 'headers and body'): the size of its compact form."""
    return len(blob)
