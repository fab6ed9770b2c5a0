"""MS-MQSD 2.2 packets against the section 4 vectors, byte for byte, and strict rejection of malformed ones."""
import uuid

import pytest
from hypothesis import given, settings, strategies as hs

from qm2qm.mqsd import codec as c

# Section 4, verbatim.
REQUEST = bytes.fromhex(
    "00 01 00 00 61 BA EA E6 C6 D1 DB 11 BA AC 00 03"
    "FF 4E 2D 22 03 A1 91 F2 3C E3 4F AB A9 30 BE 3A"
    "33 E4 32 DD F6 1B C5 DC AD D4 43 45 87 39 71 56"
    "8E 8F 91 28")
REPLY_SAME_SITE = bytes.fromhex(
    "00 02 00 00 03 A1 91 F2 3C E3 4F AB A9 30 BE 3A"
    "33 E4 32 DD 01 00 00 00 00 00 00 00 00 00 00 00"
    "62 BA EA E6 C6 D1 DB 11 BA AC 00 03 FF 4E 2D 22")
REPLY_OTHER_SITE = bytes.fromhex(
    "00 02 00 00 03 A1 91 F2 3C E3 4F AB A9 30 BE 3A"
    "33 E4 32 DD 01 00 00 00 00 00 00 00 12 00 00 00"
    "62 BA EA E6 C6 D1 DB 11 BA AC 00 03 FF 4E 2D 22"
    "60 BA EA E6 C6 D1 DB 11 BA AC 00 03 FF 4E 2D 22"
    "31 00 30 00 6E 00 74 00 34 00 70 00 65 00 63 00"
    "00 00")

ENTERPRISE = uuid.UUID("e6eaba61-d1c6-11db-baac-0003ff4e2d22")
REQUEST_ID = uuid.UUID("f291a103-e33c-ab4f-a930-be3a33e432dd")
CLIENT_SITE = uuid.UUID("dcc51bf6-d4ad-4543-8739-71568e8f9128")
CN = uuid.UUID("e6eaba62-d1c6-11db-baac-0003ff4e2d22")
OTHER_SITE = uuid.UUID("e6eaba60-d1c6-11db-baac-0003ff4e2d22")


def test_request_vector():
    request = c.TopologyClientRequest(ENTERPRISE, REQUEST_ID, CLIENT_SITE)
    assert c.encode_request(request) == REQUEST and len(REQUEST) == c.IP_REQUEST_SIZE
    assert c.decode_request(REQUEST) == request


def test_same_site_reply_vector():
    reply = c.TopologyServerReply(REQUEST_ID, (CN,))
    assert c.encode_reply(reply) == REPLY_SAME_SITE and len(REPLY_SAME_SITE) == 48
    assert c.decode_reply(REPLY_SAME_SITE) == reply and reply.directory_service_server_size == 0


def test_other_site_reply_vector():
    reply = c.TopologyServerReply(REQUEST_ID, (CN,), 0, OTHER_SITE, (c.ServerEntry("nt4pec", ip=True, ipx=False),))
    assert c.encode_reply(reply) == REPLY_OTHER_SITE and len(REPLY_OTHER_SITE) == 82
    decoded = c.decode_reply(REPLY_OTHER_SITE)
    assert decoded == reply and decoded.directory_service_server_size == 0x12    # Size counts the terminator


def test_ipx_request_round_trip_and_short_ipx_tail_is_ignored():
    request = c.TopologyClientRequest(ENTERPRISE, REQUEST_ID, CLIENT_SITE, (0x0A0B0C0D, 7))
    raw = c.encode_request(request)
    assert len(raw) == 52 + 4 + 8 and c.decode_request(raw) == request
    # 3.2.5.1: shorter than request + IPXNetworkCount + one entry -> the IPX fields are not present
    assert c.decode_request(REQUEST + b"\x01\x00\x00").ipx_networks is None


def test_server_ignores_version_and_reserved():
    odd = b"\x07\x01\xaa\xbb" + REQUEST[4:]
    assert c.decode_request(odd).request_id == REQUEST_ID


def test_several_servers_with_flags():
    servers = (c.ServerEntry("A1", True, True), c.ServerEntry("b", False, False))
    raw = c.encode_server_array(servers)
    assert raw == "11A1,00b\x00".encode("utf-16-le") and c.decode_server_array(raw) == servers


MALFORMED_REQUESTS = [
    (b"", "shorter than the 4-byte TopologyPacketHeader"),
    (b"\x00\x02\x00\x00" + REQUEST[4:], "Type 0x02, expected 0x01"),
    (REQUEST[:51], "needs 52"),
    (REQUEST + b"\x00\x00\x00\x00" + bytes(4), "IPXNetworkCount 0 outside 1..32"),
    (REQUEST + b"\x21\x00\x00\x00" + bytes(4), "IPXNetworkCount 33"),
    (REQUEST + b"\x03\x00\x00\x00" + bytes(8), "IPXNetworkCount 3 needs 68 bytes"),
]
MALFORMED_REPLIES = [
    (REPLY_SAME_SITE[:31], "shorter than its 32-byte fixed part"),
    (REQUEST, "Type 0x01, expected 0x02"),
    (REPLY_SAME_SITE[:20] + b"\x00" * 4 + REPLY_SAME_SITE[24:], "ConnectedNetworkCount 0"),
    (REPLY_SAME_SITE[:20] + b"\x02\x00\x00\x00" + REPLY_SAME_SITE[24:], "ConnectedNetworkArray of 2 GUIDs"),
    (REPLY_SAME_SITE[:24] + b"\x03\x00\x00\x00" + REPLY_SAME_SITE[28:], "has not 1 bits set"),
    (REPLY_SAME_SITE + b"\x00", "after a same-site reply"),
    (REPLY_OTHER_SITE[:-2], "disagrees with packet length"),
    (REPLY_OTHER_SITE[:28] + b"\x11\x00\x00\x00" + REPLY_OTHER_SITE[32:-1], "odd length"),
    (REPLY_OTHER_SITE[:-2] + b"x\x00", "does not end with EndList"),
    (REPLY_OTHER_SITE[:28] + b"\x14\x00\x00\x00" + REPLY_OTHER_SITE[32:] + b"\x00\x00", "NUL before its end"),
    (REPLY_OTHER_SITE[:64] + "2".encode("utf-16-le") + REPLY_OTHER_SITE[66:], "flags must be '0' or '1'"),
    (REPLY_OTHER_SITE[:28] + b"\x06\x00\x00\x00" + REPLY_OTHER_SITE[32:68] + b"\x00\x00", "shorter than IP IPX"),
]


@pytest.mark.parametrize("data,reason", MALFORMED_REQUESTS, ids=[r for _, r in MALFORMED_REQUESTS])
def test_malformed_requests(data, reason):
    with pytest.raises(c.MqsdError, match=reason.replace("(", r"\(").replace(".", r"\.")):
        c.decode_request(data)


@pytest.mark.parametrize("data,reason", MALFORMED_REPLIES, ids=[r for _, r in MALFORMED_REPLIES])
def test_malformed_replies(data, reason):
    with pytest.raises(c.MqsdError) as info:
        c.decode_reply(data)
    assert reason in str(info.value)


@pytest.mark.parametrize("build", [
    lambda: c.encode_reply(c.TopologyServerReply(REQUEST_ID, ())),
    lambda: c.encode_reply(c.TopologyServerReply(REQUEST_ID, (CN,) * 33)),
    lambda: c.encode_reply(c.TopologyServerReply(REQUEST_ID, (CN,), servers=(c.ServerEntry("x"),))),
    lambda: c.encode_server_array([]),
    lambda: c.encode_server_array([c.ServerEntry("a,b")]),
    lambda: c.encode_server_array([c.ServerEntry("")]),
    lambda: c.encode_request(c.TopologyClientRequest(ENTERPRISE, REQUEST_ID, CLIENT_SITE, ())),
])
def test_encoders_refuse_what_the_abnf_forbids(build):
    with pytest.raises(c.MqsdError):
        build()


@settings(max_examples=300, deadline=None)
@given(hs.binary(max_size=140))
def test_arbitrary_bytes_only_ever_raise_mqsd_error(data):
    for decode in (c.decode_request, c.decode_reply):
        try:
            decode(data)
        except c.MqsdError:
            pass
