"""Header signing is agreed per connection and, once agreed, protects every security context's PDUs, those
established before included (MS-RPCE 3.3.1.5.2.2; Samba raw_protocol test_spnego_multiple_auth_hdr_signing, whose
Kerberos contexts show it: NTLM with extended session security signs the header either way, MS-NLMP 3.4.6.1).

The mechanism here is a stand-in for Kerberos (auth_type 16, which signs only what it is told to): a keyed digest
whose input is exactly the bytes the runtime asks it to sign, so the tests see what is covered."""
from __future__ import annotations

import hashlib
import hmac
import struct
from types import SimpleNamespace

import pytest
from spnego import ContextReq

from qm2qm.rpc import faults as F
from qm2qm.rpc import pdu as P
from qm2qm.rpc.auth import AuthPolicy, SecurityProvider, UserStore
from qm2qm.rpc.auth import security as security_module
from qm2qm.rpc.events import BindRequest, CallRequest, ContextItem
from tests.rpc.test_connection import IFACE, NDR, new_connection

KERBEROS = 16
INTEGRITY = 5
SIG = 16
ITEMS = (ContextItem(0, IFACE, (NDR,)),)
KEY = b"stand-in session key"


def digest(data: bytes) -> bytes:
    return hmac.new(KEY, data, hashlib.sha256).digest()[:SIG]


class StandInMechanism:
    """Completes on its first token; signs / verifies exactly the bytes it is given."""

    complete = False
    context_attr = ContextReq.integrity | ContextReq.confidentiality | ContextReq.replay_detect | \
        ContextReq.sequence_detect
    client_principal = "user@REALM"

    def step(self, token: bytes) -> bytes:
        self.complete = True
        return b""

    def query_message_sizes(self):
        return SimpleNamespace(header=SIG)

    def sign(self, data: bytes) -> bytes:
        return digest(data)

    def verify(self, data: bytes, signature: bytes) -> None:
        if not hmac.compare_digest(digest(data), signature):
            raise ValueError("signature mismatch")


@pytest.fixture
def conn(monkeypatch):
    monkeypatch.setattr(security_module.spnego, "server", lambda **kwargs: StandInMechanism())
    users = UserStore.parse("D:u:p\n")
    provider = SecurityProvider(AuthPolicy(users=users))
    provider._types.add(KERBEROS)            # as with a keytab and python-gssapi installed
    connection = new_connection(security=provider)
    trailer = P.SEC_TRAILER.pack(KERBEROS, INTEGRITY, 0, 0, 1)
    bind = P.build_bind(1, ITEMS)
    bind = bind + trailer + b"krb-ap-req"
    bind = bind[:8] + struct.pack("<HH", len(bind), len(b"krb-ap-req")) + bind[12:]
    [event] = connection.receive_data(bind)
    assert isinstance(event, BindRequest)
    connection.accept_bind(event, 0x1234, "2105")
    assert connection.data_to_send()[2] == F.PTYPE_BIND_ACK
    yield connection
    users.close()


def request(call_id: int, stub: bytes, *, sign_header: bool) -> bytes:
    pad = -len(stub) % 16
    body = stub + bytes(pad)
    length = P.REQUEST_HEADER_SIZE + len(body) + P.SEC_TRAILER_SIZE + SIG
    header = P.pack_header(F.PTYPE_REQUEST, 3, length, call_id, SIG) + P.REQUEST_FIELDS.pack(len(stub), 0, 0)
    trailer = P.SEC_TRAILER.pack(KERBEROS, INTEGRITY, pad, 0, 1)
    return header + body + trailer + digest(header + body + trailer if sign_header else body)


def switch_header_signing_on(conn) -> None:
    """An alter_context without a verifier asking for header signing (as the Samba test's call 7)."""
    [event] = conn.receive_data(P.build_bind(3, ITEMS, alter_context=True,
                                             flags=3 | F.PFC_SUPPORT_HEADER_SIGN))
    conn.accept_bind(event, 0x1234, "2105")
    resp = conn.data_to_send()
    assert resp[2] == F.PTYPE_ALTER_CONTEXT_RESP and resp[3] & F.PFC_SUPPORT_HEADER_SIGN


def response_signs_header(conn, call_id: int) -> bool:
    conn.send_response(call_id, b"\x01\x02\x03\x04")
    pdu = conn.data_to_send()
    assert pdu[2] == F.PTYPE_RESPONSE
    trailer_at = len(pdu) - SIG - P.SEC_TRAILER_SIZE
    header, body, trailer, signature = pdu[:24], pdu[24:trailer_at], pdu[trailer_at:-SIG], pdu[-SIG:]
    if signature == digest(header + body + trailer):
        return True
    assert signature == digest(body)
    return False


def test_without_header_signing_only_the_body_is_signed(conn):
    [call] = conn.receive_data(request(2, b"abcd", sign_header=False))
    assert isinstance(call, CallRequest)
    assert not response_signs_header(conn, 2)


def test_header_signing_agreed_later_covers_a_context_established_before(conn):
    switch_header_signing_on(conn)
    [call] = conn.receive_data(request(4, b"abcd", sign_header=True))
    assert isinstance(call, CallRequest)
    assert response_signs_header(conn, 4)


def test_after_header_signing_is_agreed_a_body_only_verifier_is_a_sec_pkg_error(conn):
    switch_header_signing_on(conn)
    events = conn.receive_data(request(4, b"abcd", sign_header=False))
    assert not any(isinstance(event, CallRequest) for event in events)
    fault = conn.data_to_send()
    assert fault[2] == F.PTYPE_FAULT
    assert struct.unpack_from("<I", fault, 24)[0] == F.NCA_S_FAULT_SEC_PKG_ERROR
    assert conn.closed
