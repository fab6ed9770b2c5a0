"""MS-MQDMPR 3.1.7.1.32 Serialize Message to Buffer straight from a queued Message's compact form
(shared_adm/compact.py), without rebuilding the Message, for the common packet: BaseHeader, UserHeader and
MessagePropertiesHeader only (MS-MQMQ 2.2.20), no ``Message.extra`` bits kept from a parsed packet.

``serialize_compact`` answers None for anything else — another header, an attribute outside its range or of
an unexpected type, a packet over the limit — and the caller then takes the general path
(``serialize_message_to_buffer``), which also produces every error. The bytes are those of the general path:
tests/packet/test_compact_packet.py proves it for drawn Messages. The UserHeader queue fields (the costly part:
format-name parsing and the DQ/AQ/RQ choice of 2.2.19.2) are taken from the general path itself, run once per
distinct set of queue attributes and memoized. Each shape of form (which attributes it holds) gets a serializer
of its own, made once (``_compile``), that reads the form's values in one step.
"""
from __future__ import annotations

import codecs
import marshal
import struct
import uuid
from collections.abc import Callable

from shared_adm import compact
from shared_adm.message import GUID_NULL, Message
from shared_adm.packet.codec import build_user_message_packet
from shared_adm.packet.errors import PacketError
from shared_adm.packet.layout import (
    BASE_HEADER, BASE_PR, MAX_LABEL_LENGTH, PROPERTIES_ACKS, PROPERTIES_HEADER, SIGNATURE, USER_AQ, USER_DM_SHIFT,
    USER_DQ, USER_HEADER, USER_JN, USER_JP, USER_MP, USER_RQ, VERSION_NUMBER, ZEROS,
)

# Message attributes Serialize Message to Buffer never reads (ADM bookkeeping); the test checks codec.py for them.
IGNORED = frozenset({"lookup_identifier", "arrival_time", "allow_peek_when_locked", "application_deadletter_queue",
                     "soap_envelope"})
# Attributes this path writes; any other attribute present in a compact form sends it to the general path.
HANDLED = ("identifier", "sent_time", "priority", "delivery_guarantee", "time_to_reach_queue", "time_to_be_received",
           "positive_journaling_requested", "negative_journaling_requested", "class_", "acknowledgements_requested",
           "label", "body", "body_type", "extension", "application_tag", "correlation_identifier",
           "destination_queue_format_name", "destination_queue_type", "administration_queue_format_name",
           "administration_queue_type", "response_queue_format_name", "response_queue_type",
           "destination_queue_manager_identifier", "source_machine_identifier", "privacy_level", "hash_algorithm",
           "encryption_algorithm")
_QUEUE_ATTRIBUTES = ("destination_queue_format_name", "destination_queue_type", "administration_queue_format_name",
                     "administration_queue_type", "response_queue_format_name", "response_queue_type")
_HANDLED_INDEXES = tuple(map(compact.field_index, HANDLED))
_KNOWN_INDEXES = frozenset(_HANDLED_INDEXES) | frozenset(map(compact.field_index, IGNORED))
_LOOKUP_INDEX, _ARRIVAL_INDEX = compact.field_index("lookup_identifier"), compact.field_index("arrival_time")
# what a form leaves out reads as its default; ArrivalTime and LookupIdentifier (the last two) as 0
_DEFAULTS = tuple(map(compact.packed_default, HANDLED)) + (0, 0)
_NULL_BYTES = GUID_NULL.bytes
_QUEUE_BITS = USER_DQ | USER_AQ | USER_RQ
_MARSHAL = b"M"

# (queue attributes, source, destination QM) -> (DQ/AQ/RQ flag bits, QueueManagerAddress bytes_le, the packed
# queue fields, whether there is an administration queue, the source's bytes_le)
_QUEUES: dict[tuple, tuple[int, bytes, bytes, bool, bytes]] = {}
_QUEUES_MAX = 4096


def _queue_part(key: tuple) -> tuple[int, bytes, bytes, bool, bytes] | None:
    """The UserHeader queue encoding of the general path for these queue attributes (None if it refuses them)."""
    try:
        found = _QUEUES.get(key)
    except TypeError:               # an unhashable attribute value: the general path names what is wrong
        return None
    if found is not None:
        return found
    *names, source, destination_qm = key
    template = Message(identifier=(uuid.UUID(bytes=source), 0), source_machine_identifier=uuid.UUID(bytes=source),
                       destination_queue_manager_identifier=uuid.UUID(bytes=destination_qm),
                       **dict(zip(_QUEUE_ATTRIBUTES, names)))
    try:
        user = build_user_message_packet(template).user
        packed = user.pack()
    except (PacketError, TypeError, ValueError, AttributeError):
        return None
    found = (user.flags & _QUEUE_BITS, user.queue_manager_address.bytes_le, packed[USER_HEADER.size:],
             user.aq != 0, template.source_machine_identifier.bytes_le)
    if len(_QUEUES) >= _QUEUES_MAX:
        _QUEUES.clear()
    _QUEUES[key] = found
    return found


def _serialize(identifier, sent_time, priority, delivery, ttrq, ttbr, positive, negative, class_, acks, label, body,
               body_type, extension, tag, correlation, dest, dest_type, admin, admin_type, response, response_type,
               destination_qm, source, privacy, hash_algorithm, encryption, arrival_time, lookup_identifier,
               max_packet_size):
    """Serialize Message to Buffer of these attribute values (as a compact form holds them), or None."""
    if type(destination_qm) is not bytes or type(source) is not bytes:    # as compact packs a UUID: 16 bytes
        return None
    # the uint32 / uint16 fields (ranges of codec._RANGES) are checked by struct.pack below
    if not (isinstance(priority, int) and 0 <= priority <= 7 and isinstance(acks, int) and 0 <= acks <= PROPERTIES_ACKS
            and type(label) is str
            and type(body) is bytes and type(extension) is bytes and type(correlation) is bytes
            and len(correlation) == 20 and "\x00" not in label):
        return None
    if delivery not in (0, 1) or type(identifier) is not tuple or len(identifier) != 2:
        return None
    lineage, ordinal = identifier
    if type(lineage) is not bytes:
        return None
    if source == _NULL_BYTES:
        source = lineage
    elif lineage != _NULL_BYTES and lineage != source:
        return None
    queues = _queue_part((dest, dest_type, admin, admin_type, response, response_type, source, destination_qm))
    if queues is None or (acks and not queues[3]):
        return None
    queue_bits, address, queue_fields, _, source_le = queues
    user_flags = int(delivery) << USER_DM_SHIFT | queue_bits | USER_MP
    if negative:
        user_flags |= USER_JN
    if positive:
        user_flags |= USER_JP
    if label:
        label_bytes = _utf16le(label, "surrogatepass")[0] + b"\x00\x00"     # str.encode's codec, without its lookup
        label_length = len(label_bytes) // 2
        if label_length > MAX_LABEL_LENGTH:
            return None
    else:
        label_bytes, label_length = b"", 0
    body_size = len(body)
    try:       # struct refuses a value that is not an int or out of its field's range: the general path's error
        user = _pack_user(source_le, address, ttbr, sent_time, ordinal, user_flags)
        properties = _pack_properties(acks, label_length, class_, correlation, body_type, tag, body_size, body_size,
                                      privacy, hash_algorithm, encryption, len(extension))
        tail = _PROPERTIES_SIZE + len(label_bytes) + len(extension) + body_size
        size = _HEADERS_SIZE + len(queue_fields) + tail + (-tail & 3)
        if size > max_packet_size:
            return None
        base = _pack_base(VERSION_NUMBER, 0, priority & BASE_PR, SIGNATURE, size, ttrq)
    except struct.error:
        return None
    return (b"".join((base, user, queue_fields, properties, label_bytes, extension, body, ZEROS[:-tail & 3])),
            arrival_time, lookup_identifier)


_utf16le = codecs.utf_16_le_encode
_pack_user, _pack_properties, _pack_base = USER_HEADER.pack, PROPERTIES_HEADER.pack, BASE_HEADER.pack
_HEADERS_SIZE, _PROPERTIES_SIZE = BASE_HEADER.size + USER_HEADER.size, PROPERTIES_HEADER.size
# _serialize's value parameters: HANDLED's values, then ArrivalTime and LookupIdentifier
_PARAMETERS = _serialize.__code__.co_varnames[:len(_DEFAULTS)]
_PARAMETER_INDEXES = _HANDLED_INDEXES + (_ARRIVAL_INDEX, _LOOKUP_INDEX)
if _serialize.__code__.co_argcount != len(_PARAMETER_INDEXES) + 1:
    raise RuntimeError("_serialize takes one parameter per attribute of HANDLED, then ArrivalTime, LookupIdentifier")


def _compile(shape: tuple) -> Callable | bool:
    """The serializer of the forms of one shape (False: a shape only the general path serializes).

    A form is (number, value, number, value, ...) with only the attributes off their defaults, so where a value
    sits depends on the shape. The serializer made here unpacks the form in one step (``_, label, _, body = flat``)
    and calls _serialize with each attribute the shape leaves out at its default: generated source, as
    collections.namedtuple makes, from _serialize's parameter names only (no value of any form is in it)."""
    if len(set(shape)) != len(shape) or not set(shape) <= _KNOWN_INDEXES:
        return False
    names = dict(zip(_PARAMETER_INDEXES, _PARAMETERS))
    targets = "".join(f"_, {names.get(index, '_')}, " for index in shape)      # an IGNORED attribute: to _
    arguments = ", ".join(name if index in shape else f"DEFAULT_{n}"
                          for n, (index, name) in enumerate(zip(_PARAMETER_INDEXES, _PARAMETERS)))
    source = ("def serialize(flat, max_packet_size):\n"
              + (f"    {targets}= flat\n" if shape else "")
              + f"    return _serialize({arguments}, max_packet_size)\n")
    namespace = {"_serialize": _serialize, **{f"DEFAULT_{n}": value for n, value in enumerate(_DEFAULTS)}}
    exec(source, namespace)
    return namespace["serialize"]


# the attribute numbers of a compact form (its shape) -> its serializer (False: only the general path); a queue
# manager's messages come in a handful of shapes, so the first _SERIALIZERS_MAX stay and later ones are left to the
# general path
_SERIALIZERS: dict[tuple, Callable | bool] = {}
_SERIALIZERS_MAX = 1024


def serialize_compact(blob: bytes, max_packet_size: int) -> tuple[bytes, int, int] | None:
    """(UserMessage packet, Message.ArrivalTime, Message.LookupIdentifier) of the Message packed in ``blob``, or
    None when only the general path can serialize it."""
    if blob[:1] != _MARSHAL:
        return None
    flat = marshal.loads(blob[2:])
    if type(flat) is not tuple or len(flat) & 1:      # not as compact.pack writes a form
        return None
    shape = flat[::2]
    try:
        serialize = _SERIALIZERS.get(shape)
    except TypeError:               # an unhashable attribute number: not a form compact.pack writes
        return None
    if serialize is None:
        if len(_SERIALIZERS) >= _SERIALIZERS_MAX:     # compiling (~70 µs) costs more than the general path
            return None
        serialize = _SERIALIZERS[shape] = _compile(shape)
    if not serialize:
        return None
    return serialize(flat, max_packet_size)
