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


def field_index(name: str) -> int:
    """The number a compact form gives Message attribute ``name`` (its place in Message's field order)."""
    return _FIELD_INDEX[name]


def packed_default(name: str):
    """The default of Message attribute ``name`` as a compact form holds a value (a GUID as its 16 bytes, an enum
    as its value); a form leaves out an attribute at its default."""
    _, default, _, kind = _FIELDS[_FIELD_INDEX[name]]
    return default if kind == "plain" else _encode(kind, default)


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


# ---- the stored form: SqliteStore (schema 2) keeps a queued message's compact form as it is --------------------
# A data directory is a trust boundary: a stored form is never the pickle variant, and ``check_stored`` proves at
# load that unpack of it succeeds and yields only plain data (marshal itself builds objects, it runs no code).

class CompactError(ValueError):
    """A stored compact form (3.1.1.12) this version cannot have written: corrupt, hostile, or of another layout."""


def _kind_tag(kind) -> str:
    if isinstance(kind, enum.EnumMeta):
        return f"enum:{kind.__qualname__}:{','.join(str(int(member)) for member in kind)}"
    return kind


def layout() -> list:
    """The field table the compact form's numbering follows, JSON-able: [[name, kind, default], ...]. A store keeps
    the one its rows were packed under and re-packs them (``relayout``) when this version's differs."""
    return [[name, _kind_tag(kind), repr(factory() if factory is not None else default)]
            for name, default, factory, kind in _FIELDS]


_SCALARS = frozenset((int, str, bytes, bool, float, type(None)))
_CONTAINER_TYPES = frozenset((tuple, list, dict))
_UUID_BYTES = 16
_LOOKUP_INDEX = _FIELD_INDEX["lookup_identifier"]
_TTBR_INDEX = _FIELD_INDEX["time_to_be_received"]
_ALLOW_PEEK_INDEX = _FIELD_INDEX["allow_peek_when_locked"]
_DELIVERY_INDEX = _FIELD_INDEX["delivery_guarantee"]
_SHAPES: dict[tuple, "_Shape"] = {}      # (indexes, value types) -> what is left to check per message
_SHAPES_MAX = 4096
# indexes -> the last shape with those indexes that accepted a form: a form of the same types is checked by its
# ``accepts`` (which tests the types) without building its (indexes, types) key (a third of a restart's checks)
_LAST_SHAPE: dict[tuple, "_Shape"] = {}


def _plain_data(value, depth: int = 0) -> bool:
    kind = type(value)
    if kind in _SCALARS:
        return True
    if depth > 32 or kind not in _CONTAINER_TYPES:
        return False
    if kind is dict:
        return all(_plain_data(key, depth + 1) and _plain_data(item, depth + 1) for key, item in value.items())
    return all(_plain_data(item, depth + 1) for item in value)


class _Shape:
    """The checks one layout of present fields and value types needs (most stored messages share a few):
    ``accepts`` is them compiled to one expression, the value types included; ``explain`` names the first that
    fails."""
    __slots__ = ("uuids", "objectids", "enums", "containers", "lookup", "allow_peek", "delivery", "expires",
                 "accepts")

    def __init__(self, indexes: tuple, types: tuple) -> None:
        if any(type(index) is not int for index in indexes) or list(indexes) != sorted(set(indexes)) \
                or (indexes and not 0 <= indexes[0] <= indexes[-1] < len(_FIELDS)):
            raise CompactError("field numbers out of range, repeated or unordered")
        self.uuids, self.objectids, self.enums, self.containers = [], [], [], []
        self.lookup = self.allow_peek = self.delivery = None
        for position, (index, kind) in enumerate(zip(indexes, types)):
            value_position = 2 * position + 1
            field_kind = _FIELDS[index][3]
            if field_kind == "uuid":
                if kind is not bytes and kind is not type(None):
                    raise CompactError(f"{_FIELDS[index][0]}: {kind.__name__} where GUID bytes belong")
                if kind is bytes:
                    self.uuids.append(value_position)
            elif field_kind == "objectid":
                if kind is not tuple:
                    raise CompactError(f"{_FIELDS[index][0]}: {kind.__name__} where an OBJECTID belongs")
                self.objectids.append(value_position)
            elif isinstance(field_kind, enum.EnumMeta):
                if kind is not int and kind is not type(None):
                    raise CompactError(f"{_FIELDS[index][0]}: {kind.__name__} where an enum value belongs")
                if kind is int:
                    self.enums.append((value_position, field_kind._value2member_map_, _FIELDS[index][0]))
            elif kind not in _SCALARS:
                if kind not in _CONTAINER_TYPES:
                    raise CompactError(f"{_FIELDS[index][0]}: a {kind.__name__} is not message data")
                self.containers.append(value_position)
            if index == _LOOKUP_INDEX:
                self.lookup = value_position
            elif index == _ALLOW_PEEK_INDEX:
                self.allow_peek = value_position
            elif index == _DELIVERY_INDEX:
                self.delivery = value_position
        self.expires = _TTBR_INDEX in indexes
        self.accepts = self._compile(types)

    def _compile(self, types: tuple):
        # Only positions (ints) and names of this module go into the source: nothing read from a store (the types
        # are objects in the namespace, named by position).
        terms = [f"type(flat[{2 * n + 1}]) is T{n}" for n in range(len(types))]
        terms.append(f"flat[{self.lookup}] == lookup" if self.lookup is not None else "lookup == 0")
        terms += [f"len(flat[{p}]) == 16" for p in self.uuids]
        terms += [f"len(flat[{p}]) == 2 and type(flat[{p}][0]) is bytes and len(flat[{p}][0]) == 16"
                  f" and type(flat[{p}][1]) is int" for p in self.objectids]
        terms += [f"flat[{p}] in members_{p}" for p, _, _ in self.enums]
        terms += [f"plain_data(flat[{p}])" for p in self.containers]
        allow = f"flat[{self.allow_peek}]" if self.allow_peek is not None else "ALLOW_PEEK_DEFAULT"
        recoverable = f"flat[{self.delivery}] == RECOVERABLE" if self.delivery is not None else "False"
        terms.append(f"flags == ((ALLOW if {allow} else 0) | (REC if {recoverable} else 0))")
        namespace = {f"members_{p}": members for p, members, _ in self.enums}
        namespace.update((f"T{n}", kind) for n, kind in enumerate(types))
        namespace.update(plain_data=_plain_data, ALLOW_PEEK_DEFAULT=_ALLOW_PEEK_DEFAULT, ALLOW=_ALLOW_PEEK_WHEN_LOCKED,
                         REC=_RECOVERABLE, RECOVERABLE=DeliveryGuarantee.RECOVERABLE, len=len, type=type,
                         bytes=bytes, int=int)
        namespace["__builtins__"] = {}
        return eval("lambda flat, lookup, flags: " + " and ".join(terms), namespace)

    def explain(self, flat: tuple, lookup_identifier: int, flags: int) -> None:
        """Raise CompactError naming the first check ``accepts`` failed."""
        for position in self.uuids:
            if len(flat[position]) != _UUID_BYTES:
                raise CompactError(f"{_FIELDS[flat[position - 1]][0]}: a GUID is not 16 bytes")
        for position in self.objectids:
            value = flat[position]
            if len(value) != 2 or type(value[0]) is not bytes or len(value[0]) != _UUID_BYTES \
                    or type(value[1]) is not int:
                raise CompactError(f"{_FIELDS[flat[position - 1]][0]}: not an OBJECTID (GUID, uniquifier)")
        for position, members, name in self.enums:
            if flat[position] not in members:
                raise CompactError(f"{name}: {flat[position]} is not a value of its enumeration")
        for position in self.containers:
            if not _plain_data(flat[position]):
                raise CompactError(f"{_FIELDS[flat[position - 1]][0]}: holds something other than message data")
        if (flat[self.lookup] if self.lookup is not None else 0) != lookup_identifier:
            raise CompactError("its LookupIdentifier is not the row's")
        raise CompactError("its flags byte does not match its attributes")


def check_stored_header(blob: bytes, lookup_identifier: int) -> bool:
    """check_stored's first check alone (its place while a worker runs the rest, store/parallel_check.py): CompactError
    unless ``blob`` is bytes in the marshal variant, so len() and keeping it are safe; False (no TTBR known yet)."""
    if type(blob) is not bytes or len(blob) < 3 or blob[0] != _MARSHAL[0]:
        raise CompactError("not a stored compact form")
    return False


def check_stored(blob: bytes, lookup_identifier: int) -> bool:
    """Prove a compact form read from a store unpacks (to plain data, LookupIdentifier = the row's) without
    unpacking it; returns whether it sets a TimeToBeReceived (3.1.7.1.9: a timer to start). CompactError if not."""
    check_stored_header(blob, lookup_identifier)
    try:
        flat = marshal.loads(blob[2:])
    except (ValueError, EOFError, TypeError) as exc:
        raise CompactError(f"not a compact form: {exc}") from None
    if type(flat) is not tuple or len(flat) % 2:
        raise CompactError("not a compact form: not a tuple of (field, value) pairs")
    indexes = flat[::2]
    try:
        last = _LAST_SHAPE.get(indexes)
    except TypeError:               # an unhashable field number: the checks below name what is wrong
        last = None
    if last is not None and last.accepts(flat, lookup_identifier, blob[1]):
        return last.expires
    key = (indexes, tuple(map(type, flat[1::2])))
    shape = _SHAPES.get(key)
    if shape is None:
        shape = _Shape(*key)
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.clear()
        _SHAPES[key] = shape
    if not shape.accepts(flat, lookup_identifier, blob[1]):
        shape.explain(flat, lookup_identifier, blob[1])
    if len(_LAST_SHAPE) >= _SHAPES_MAX:
        _LAST_SHAPE.clear()
    _LAST_SHAPE[indexes] = shape
    return shape.expires


def relayout(blob: bytes, old_layout: list) -> bytes:
    """``blob``, packed under ``old_layout`` (a store's, from ``layout()`` of the version that wrote it), packed
    under this version's: fields matched by name, a field this version lacks dropped (CompactError if unreadable)."""
    if type(blob) is not bytes or blob[:1] != _MARSHAL:
        raise CompactError("not a stored compact form")
    try:
        flat = marshal.loads(blob[2:])
        fields = {}
        for i in range(0, len(flat), 2):
            name, tag = old_layout[flat[i]][:2]
            if name not in _FIELD_INDEX:
                continue
            value = flat[i + 1]
            kind = _FIELDS[_FIELD_INDEX[name]][3]
            if value is None:
                fields[name] = None
            elif tag == "uuid":
                fields[name] = uuid.UUID(bytes=value)
            elif tag == "objectid":
                fields[name] = (uuid.UUID(bytes=value[0]), value[1])
            elif isinstance(kind, enum.EnumMeta) and type(value) is int:
                fields[name] = kind._value2member_map_.get(value, value)
            else:
                fields[name] = value
    except (ValueError, EOFError, TypeError, IndexError, KeyError) as exc:
        raise CompactError(f"not a compact form of the stored layout: {exc}") from None
    return pack_fields(fields)


def is_pickled(blob: bytes) -> bool:
    """The compact form fell back to pickle (a value marshal cannot hold): it must never be written to a store."""
    return blob[:1] == _PICKLE
