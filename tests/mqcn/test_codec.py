"""MS-MQCN 2.2 codec: vectors computed from 2.2.4/2.2.6 by hand, every PROPVALUE format, strict rejection."""
import uuid

import pytest
from hypothesis import given, settings, strategies as hs

from qm2qm.mqcn import codec as c

GUID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
MASTER = uuid.UUID("f0e0d0c0-b0a0-9080-7060-504030201000")
QMID = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")

# The whole Message.Body (CNM + the unused byte of 3.3.5.3), laid out field by field from 2.2.4 and 2.2.6.
V1_DELETE = bytes.fromhex(
    "01 01"                                       # Version 1, NumberOfUpdateNotifications 1
    "02 01"                                       # Command deletion, UseGuid 1
    "33221100 5544 7766 8899aabbccddeeff"          # GuidIdentifier (bytes_le)
    "c0d0e0f0 a0b0 8090 7060504030201000"          # GuidMasterId
    + "00" * 24 +                                 # Reserved
    "02 7b050000 7c050000"                        # 2 properties: 1403, 1404
    "01 01"                                       # D_SCOPE = ENTERPRISE, D_OBJTYPE = MQDS_QUEUE
    "00")                                         # the unused byte
V1_QUEUE_UPDATE = bytes.fromhex(
    "01 01 01 01 33221100 5544 7766 8899aabbccddeeff c0d0e0f0 a0b0 8090 7060504030201000" + "00" * 24 +
    "03 73000000 69000000 6a000000"               # Q_QMID, Q_QUOTA, Q_BASEPRIORITY
    "04030201 0605 0807 090a0b0c0d0e0f10"          # Q_QMID value
    "00100000 feff"                               # 0x1000, -2
    "00")


def test_v1_delete_vector():
    update = c.NotificationUpdate(c.COMMAND_DELETE, MASTER, ((c.PROPID_D_SCOPE, 1), (c.PROPID_D_OBJTYPE, 1)),
                                  guid_identifier=GUID)
    cnm = c.ChangeNotificationMessage(1, (update,))
    assert c.message_body(cnm) == V1_DELETE and len(V1_DELETE) == 72
    parsed = c.decode_message(V1_DELETE)
    assert parsed == cnm and parsed.trailing == b"\x00"
    assert c.object_type(parsed.updates[0]) == c.MQDS_QUEUE


def test_v1_queue_update_vector():
    props = ((c.PROPID_Q_QMID, QMID), (c.PROPID_Q_QUOTA, 0x1000), (c.PROPID_Q_BASEPRIORITY, -2))
    cnm = c.ChangeNotificationMessage(1, (c.NotificationUpdate(c.COMMAND_CHANGE, MASTER, props, guid_identifier=GUID),))
    assert c.message_body(cnm) == V1_QUEUE_UPDATE
    assert c.decode_message(V1_QUEUE_UPDATE) == cnm
    assert c.object_type(cnm.updates[0]) == 1


def test_v1_create_uses_pathname_and_sizes_add_up():
    update = c.NotificationUpdate(c.COMMAND_CREATE, MASTER, ((c.PROPID_Q_LABEL, "l"),), path_name="HOST\\q")
    raw = c.encode_update(update)
    # 2 + 2*(len+1) + 16 + 24 + 1 + 4N + values (2.2.6)
    assert len(raw) == 2 + 2 * 7 + 16 + 24 + 1 + 4 + 4
    assert raw[2:16] == "HOST\\q\x00".encode("utf-16-le") and c.decode_update(raw) == update


def test_v2_body_is_the_template_in_utf16_plus_one_byte():
    body = c.NotificationBody(3, GUID, "DC01")
    raw = c.message_body(c.ChangeNotificationMessage(2, body=body))
    text = ("<Notification><Event>3</Event><ObjectGuid>00112233-4455-6677-8899-AABBCCDDEEFF</ObjectGuid>"
            "<DomainController>DC01</DomainController></Notification>")
    assert raw == b"\x02\x01" + text.encode("utf-16-le") + b"\x00" and len(raw) == 297
    assert c.decode_message(raw).body == body


@pytest.mark.parametrize("variant", [
    "<Notification><Event>1</Event><ObjectGuid>00112233-4455-6677-8899-aabbccddeeff</ObjectGuid >"
    "<DomainController>dc.example</DomainController></Notification>",                 # ABNF's space, lower hex
    "<Notification>\r\n<Event>1</Event>\r\n<ObjectGuid>00112233-4455-6677-8899-AABBCCDDEEFF</ObjectGuid>\r\n"
    "<DomainController>dc.example</DomainController>\r\n</Notification>\x00",          # template layout + NUL
])
def test_v2_body_variants_accepted(variant):
    body = c.decode_body(variant.encode("utf-16-le"))
    assert body == c.NotificationBody(1, GUID, "dc.example")


def _body(event="2", guid="00112233-4455-6677-8899-AABBCCDDEEFF", dc="DC01", tail=""):
    return (b"\x02\x01" + (f"<Notification><Event>{event}</Event><ObjectGuid>{guid}</ObjectGuid>"
                           f"<DomainController>{dc}</DomainController></Notification>{tail}").encode("utf-16-le"))


def _update(command=1, use_guid=1, rest=None):
    if rest is None:
        rest = GUID.bytes_le + MASTER.bytes_le + bytes(24) + b"\x01" + (105).to_bytes(4, "little") + b"\x00\x10\x00\x00"
    return bytes((1, 1, command, use_guid)) + rest


MALFORMED = [
    (b"", "Version: needs 1 bytes"),
    (b"\x01", "NumberOfUpdateNotifications: needs 1 bytes"),
    (b"\x03\x01abc", "Version 0x03"),
    (b"\x00\x01", "Version 0x00"),
    (b"\x01\x00", "NumberOfUpdateNotifications is 0"),
    (b"\x02\x02" + _body()[2:], "MUST be 1 when Version is 0x02"),
    (_body(event="5"), "Event '5' must be 1, 2, 3 or 4"),
    (_body(event="0"), "Event '0'"),
    (_body(guid="{00112233-4455-6677-8899-AABBCCDDEEFF}"), "ObjectGuid"),
    (_body(guid="00112233-4455-6677-8899-AABBCCDDEEF"), "ObjectGuid"),
    (_body(dc="DC 01"), "DomainController"),
    (_body(dc="D" * 257), "DomainController"),
    (_body(dc=""), "DomainController"),
    (_body(tail="x"), "does not follow the 2.2.5 ABNF"),
    (b"\x02\x01" + "<Notification></Notification>".encode("utf-16-le"), "does not follow the 2.2.5 ABNF"),
    (b"\x02\x01\x00\xd8\x41\x00", "not valid UTF-16LE"),
    (_update(command=3), "Command 0x03 must be 0x00, 0x01 or 0x02"),
    (_update(use_guid=2), "UseGuid 0x02 must be 0x00 or 0x01"),
    (_update(use_guid=0, rest="HOST\\q".encode("utf-16-le")), "no UTF-16 NullTerminator"),
    (_update(rest=GUID.bytes_le + MASTER.bytes_le + bytes(10)), "Reserved: needs 24 bytes"),
    (_update(rest=GUID.bytes_le + MASTER.bytes_le + bytes(24)), "NumberOfProperties: needs 1 bytes"),
    (_update(rest=GUID.bytes_le + MASTER.bytes_le + bytes(24) + b"\x02" + bytes(4)), "PropertyId[2]: needs 8"),
    (_update(rest=GUID.bytes_le + MASTER.bytes_le + bytes(24) + b"\x01" + (999).to_bytes(4, "little") + b"\x00"),
     "PropertyId 999 is not a MS-MQMQ 2.3"),
    (_update(rest=GUID.bytes_le + MASTER.bytes_le + bytes(24) + b"\x01" + (1101).to_bytes(4, "little")
             + b"\xff\xff\xff\x7f" + b"ab"), "VT_BLOB of 2147483647 bytes"),
    (_update(rest=GUID.bytes_le + MASTER.bytes_le + bytes(24) + b"\x01" + (207).to_bytes(4, "little")
             + b"\x02\x00\x00\x00" + bytes(20)), "VT_CLSID|VT_VECTOR of 2"),
    (_update(rest=GUID.bytes_le + MASTER.bytes_le + bytes(24) + b"\x01" + (223).to_bytes(4, "little")
             + b"\x00\x00\x01\x00" + bytes(6)), "VT_LPWSTR|VT_VECTOR Size 65536 cannot fit"),
    (_update() + b"\x00\x00", "2 bytes follow the 1 Notification Updates"),
    (b"\x01\x02" + _update()[2:], "Notification Update 1 Command: needs 1 bytes"),
]


@pytest.mark.parametrize("data,reason", MALFORMED, ids=[r for _, r in MALFORMED])
def test_malformed_input_gets_its_specific_rejection(data, reason):
    with pytest.raises(c.MqcnError) as info:
        c.decode_message(data)
    assert reason in str(info.value)


@pytest.mark.parametrize("vector", [V1_DELETE, V1_QUEUE_UPDATE, _body()])
def test_every_truncation_is_rejected(vector):
    whole = c.decode_message(vector)
    cnm_length = len(c.encode_message(whole))
    for cut in range(cnm_length):
        with pytest.raises(c.MqcnError):
            c.decode_message(vector[:cut])


VALUES = [
    (c.VT_I1, -5, b"\xfb"), (c.VT_UI1, 200, b"\xc8"), (c.VT_I2, -2, b"\xfe\xff"), (c.VT_UI2, 0xABCD, b"\xcd\xab"),
    (c.VT_BOOL, True, b"\xff\xff"), (c.VT_BOOL, False, b"\x00\x00"), (c.VT_I4, -1, b"\xff" * 4),
    (c.VT_UI4, 0x01020304, b"\x04\x03\x02\x01"), (c.VT_I8, -2, b"\xfe" + b"\xff" * 7),
    (c.VT_UI8, 1, b"\x01" + bytes(7)), (c.VT_CLSID, GUID, GUID.bytes_le),
    (c.VT_LPWSTR, "ab", b"a\x00b\x00\x00\x00"), (c.VT_BLOB, b"xyz", b"\x03\x00\x00\x00xyz"),
    (c.VT_UI4_VECTOR, (1, 2), b"\x02\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00"),
    (c.VT_CLSID_VECTOR, (GUID,), b"\x01\x00\x00\x00" + GUID.bytes_le),
    (c.VT_LPWSTR_VECTOR, ("a", ""), b"\x02\x00\x00\x00a\x00\x00\x00\x00\x00"),
    (c.VT_UI1_VECTOR, b"\x01", b"\x01\x00\x00\x00\x01"),
]


@pytest.mark.parametrize("vartype,value,raw", VALUES, ids=[f"{v[0]}-{i}" for i, v in enumerate(VALUES)])
def test_every_propvalue_format(vartype, value, raw):
    assert c.encode_value(vartype, value) == raw
    assert c.decode_value(vartype, raw) == value


@pytest.mark.parametrize("vartype,value", [(c.VT_UI1, 256), (c.VT_I2, 40000), (c.VT_UI4, -1), (c.VT_BOOL, 1),
                                           (c.VT_CLSID, "not-a-guid"), (c.VT_LPWSTR, "a\x00b"), (c.VT_BLOB, "s"),
                                           (c.VT_UI4, True)])
def test_encode_rejects_values_that_do_not_fit(vartype, value):
    with pytest.raises(c.MqcnError):
        c.encode_value(vartype, value)


def test_vt_bool_other_than_ffff_or_0000_is_rejected():
    with pytest.raises(c.MqcnError, match="VT_BOOL 0x0001"):
        c.decode_value(c.VT_BOOL, b"\x01\x00")


def test_object_type_rule_of_3_2_5_1():
    def first(pid, command=c.COMMAND_CHANGE):
        value = c.decode_value(c.PROPID_TYPES[pid], c.encode_value(c.PROPID_TYPES[pid], _sample(pid)))
        return c.object_type(c.NotificationUpdate(command, MASTER, ((pid, value),), guid_identifier=GUID))
    assert [first(p) for p in (101, 126, 1101, 202, 220, 1201, 1403)] == [1, 1, 1, 2, 2, 2, 4]


def _sample(pid):
    return {c.VT_CLSID: GUID, c.VT_LPWSTR: "x", c.VT_BLOB: b"", c.VT_UI1: 1, c.VT_UI4: 1, c.VT_I4: 1, c.VT_I2: 1,
            c.VT_CLSID_VECTOR: (GUID,), c.VT_LPWSTR_VECTOR: ("x",), c.VT_UI1_VECTOR: b"\x01"}[c.PROPID_TYPES[pid]]


_PROPS = hs.lists(hs.sampled_from(sorted(c.PROPID_TYPES)).map(lambda p: (p, _sample(p))), max_size=6)


@settings(max_examples=60, deadline=None)
@given(command=hs.sampled_from([0, 1, 2]), props=_PROPS, by_guid=hs.booleans(),
       path=hs.text(hs.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=20),
       reserved=hs.binary(min_size=24, max_size=24))
def test_updates_round_trip(command, props, by_guid, path, reserved):
    update = c.NotificationUpdate(command, MASTER, tuple(props), None if by_guid else path,
                                  GUID if by_guid else None, reserved)
    cnm = c.ChangeNotificationMessage(1, (update, update))
    assert c.decode_message(c.message_body(cnm)) == cnm


@settings(max_examples=300, deadline=None)
@given(hs.binary(max_size=120))
def test_arbitrary_bytes_only_ever_raise_mqcn_error(data):
    for candidate in (data, b"\x01\x01" + data, b"\x02\x01" + data):
        try:
            c.decode_message(candidate)
        except c.MqcnError:
            pass
