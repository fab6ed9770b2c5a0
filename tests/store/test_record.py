"""Message <-> row encoding (shared_adm/store/record.py) for MS-MQDMPR 3.1.1.12 Message attributes."""
import dataclasses
import enum
import json
import types
import typing
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared_adm.message import DeliveryGuarantee, Message
from shared_adm.store.record import RecordError, decode_message, decode_value, encode_message, encode_value

_scalars = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text(max_size=12) | \
    st.binary(max_size=24) | st.uuids() | st.sampled_from(list(DeliveryGuarantee))
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple)
    | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    | st.dictionaries(st.integers(0, 9) | st.uuids(), inner, max_size=3),
    max_leaves=12)


def _strategy(hint):
    """A strategy for one Message field, derived from its annotation so new fields are covered too."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([_strategy(arg) for arg in typing.get_args(hint)])
    if hint is type(None):
        return st.none()
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from(list(hint))
    if hint is bool:
        return st.booleans()
    if hint is int:
        return st.integers(0, 2**64 - 1) | st.integers(-2**31, 2**31)
    if hint is str:
        return st.text(max_size=20)     # includes lone surrogates, which the encoding must carry
    if hint is bytes:
        return st.binary(max_size=64)
    if hint is uuid.UUID:
        return st.uuids()
    if origin is tuple:
        return st.tuples(*[_strategy(arg) for arg in typing.get_args(hint)])
    if origin is list:
        return st.lists(_strategy(typing.get_args(hint)[0]), max_size=4)
    if hint is dict or origin is dict:
        return st.dictionaries(st.text(max_size=6), _values, max_size=4)
    return _values


_HINTS = typing.get_type_hints(Message)
_messages = st.builds(Message, **{f.name: _strategy(_HINTS[f.name]) for f in dataclasses.fields(Message)})


@settings(max_examples=300, deadline=None)
@given(message=_messages, key=st.integers(0, 2**64 - 1))
def test_round_trip_any_message(message, key):
    attributes, body = encode_message(message, key)
    decoded = decode_message(attributes, body, key)
    assert decoded == message
    for f in dataclasses.fields(Message):
        assert type(getattr(decoded, f.name)) is type(getattr(message, f.name)), f.name


@settings(max_examples=200, deadline=None)
@given(value=_values)
def test_round_trip_any_value(value):
    decoded = decode_value(json.loads(json.dumps(encode_value(value))))
    assert decoded == value
    assert repr(decoded) == repr(value)     # same types all the way down (an enum is not just an int)


def test_defaults_are_not_written():
    attributes, body = encode_message(Message(lookup_identifier=5, body=b"abc"), 5)
    assert (attributes, body) == ("{}", b"abc")
    assert decode_message(attributes, body, 5) == Message(lookup_identifier=5, body=b"abc")


def test_lookup_identifier_written_only_when_it_differs_from_the_key():
    attributes, _ = encode_message(Message(lookup_identifier=0), 9)
    assert decode_message(attributes, b"", 9).lookup_identifier == 0


def test_bool_is_not_taken_for_an_equal_int_default():
    attributes, _ = encode_message(Message(priority=False), 0)
    assert decode_message(attributes, b"", 0).priority is False


def test_enum_fields_come_back_as_their_enum():
    attributes, _ = encode_message(Message(delivery_guarantee=DeliveryGuarantee.RECOVERABLE), 0)
    assert decode_message(attributes, b"", 0).delivery_guarantee is DeliveryGuarantee.RECOVERABLE


def test_unstorable_value_is_rejected_naming_the_field():
    with pytest.raises(TypeError, match=r"Message\.extra: cannot store a value of type object"):
        encode_message(Message(extra={"x": object()}), 0)
    with pytest.raises(TypeError, match=r"Message\.body: expected bytes, got str"):
        encode_message(Message(body="text"), 0)


def test_unknown_stored_attribute_is_dropped():
    assert decode_message('{"no_such_attribute":1,"priority":6}', b"", 1) == Message(lookup_identifier=1, priority=6)


@pytest.mark.parametrize("attributes", [
    "not json", "[1]", '{"label":{"a":1}}', '{"label":[]}', '{"label":["zz",1]}', '{"sender_id":["b","***"]}',
    '{"tracing_queue_identifier":["u","nothex"]}', '{"priority":["e","DeliveryGuarantee","1"]}',
    '{"label":["t",5]}', '{"label":["m",[[1]]]}', '["l"]',
    '{"extra":' + '["l",[' * 50_000 + ']]' * 50_000 + '}',
])
def test_malformed_records_raise_record_error(attributes):
    with pytest.raises(RecordError):
        decode_message(attributes, b"", 1)


def test_null_body_is_a_record_error():
    with pytest.raises(RecordError, match="NULL"):
        decode_message("{}", None, 1)


@settings(max_examples=300, deadline=None)
@given(message=_messages, key=st.integers(0, 2**64 - 1))
def test_compact_form_from_the_decoded_fields_equals_packing_the_message(message, key):
    """load_stream hands QueueManager the compact form made from the record's fields without a Message
    (compact.pack_fields): it must be byte for byte what pack() makes of the decoded Message."""
    from shared_adm.compact import pack, pack_fields
    from shared_adm.store.record import decode_message_fields
    attributes, body = encode_message(message, key)
    fields = decode_message_fields(attributes, body, key)
    assert pack_fields(dict(fields)) == pack(decode_message(attributes, body, key))
