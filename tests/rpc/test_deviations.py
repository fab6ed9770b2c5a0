"""The runtime's Windows-validated behaviours of issue 10 item 6, one test each (MS-RPCE 2.2.2.3, 3.3.1.5.2,
3.3.1.5.3; C706 12.6.3.1, 12.6.4.8), as Samba's raw_protocol tests (written against Windows) state them."""
from __future__ import annotations

import struct

import pytest

from qm2qm.rpc import faults as F
from qm2qm.rpc import pdu as P
from qm2qm.rpc.auth import AuthPolicy, SecurityProvider, UserStore
from qm2qm.rpc.events import BindRequest, ContextItem
from tests.rpc.test_connection import BTFN3, IFACE, NDR, bind, fault_of, new_connection, split_pdus
from tests.rpc.test_malformed import with_auth

ITEMS = (ContextItem(0, IFACE, (NDR,)),)


@pytest.fixture(scope="module")
def provider():
    users = UserStore.parse("D:u:p\n")
    yield SecurityProvider(AuthPolicy(users=users))
    users.close()


@pytest.mark.parametrize("alter", [False, True], ids=["bind_ack", "alter_context_resp"])
@pytest.mark.parametrize("asked", [False, True], ids=["not-asked", "asked"])
def test_header_sign_is_echoed_when_the_client_sets_it(alter, asked):
    conn = new_connection()
    sign = F.PFC_SUPPORT_HEADER_SIGN if asked else 0
    if alter:
        bind(conn)
        [event] = conn.receive_data(P.build_bind(2, (ContextItem(1, IFACE, (NDR,)),), alter_context=True,
                                                 flags=3 | sign))
    else:
        [event] = conn.receive_data(P.build_bind(1, ITEMS, flags=3 | sign))
    conn.accept_bind(event, 0x1234, "2105")
    ack = conn.data_to_send()
    assert ack[2] == (F.PTYPE_ALTER_CONTEXT_RESP if alter else F.PTYPE_BIND_ACK)
    assert ack[3] & F.PFC_SUPPORT_HEADER_SIGN == sign


def test_conc_mpx_is_echoed_by_default_when_offered():
    conn = new_connection()
    ack = bind(conn, flags=3 | F.PFC_CONC_MPX)
    assert ack["flags"] & F.PFC_CONC_MPX


def test_empty_context_list_in_samba_short_form_gets_nak_0_version_5_0():
    conn = new_connection()
    body = struct.pack("<HHIB", 5840, 5840, 0, 0)                      # no reserved bytes after the count
    conn.receive_data(P.pack_header(F.PTYPE_BIND, 3, 16 + len(body), 4) + body)
    nak = conn.data_to_send()
    assert (nak[2], struct.unpack_from("<HBBB", nak, 16)) == (F.PTYPE_BIND_NAK, (0, 1, 5, 0)) and conn.closed


def test_btfn_answers_multiplexing_and_keep_on_orphan():
    conn = new_connection()
    ack = bind(conn, ITEMS + (ContextItem(1, IFACE, (BTFN3,)),))
    assert ack.getCtxItems()[1]["Reason"] == F.BTFN_SECURITY_CONTEXT_MULTIPLEXING | F.BTFN_KEEP_CONNECTION_ON_ORPHAN


def test_request_with_auth_type_none_trailer_faults_with_its_context_id_and_closes():
    conn = new_connection()
    bind(conn, (ContextItem(1, IFACE, (NDR,)),))
    request = P.build_request(5, 1, 0, bytes(8))
    conn.receive_data(with_auth(request, 0, 1))
    call_id, status, _, context_id = fault_of(conn.data_to_send())
    assert (call_id, status, context_id) == (5, F.RPC_S_ACCESS_DENIED, 1) and conn.closed


def test_new_call_while_a_non_multiplexed_call_is_unfinished_faults_the_unfinished_one():
    conn = new_connection()
    bind(conn)
    first = P.fragment_request(8, 0, 1, bytes(9000), 2048)[0]
    conn.receive_data(first)
    conn.receive_data(P.build_request(9, 0, 1, b"x"))
    call_id, status, _, _ = fault_of(conn.data_to_send())
    assert (call_id, status) == (8, F.NCA_S_PROTO_ERROR) and conn.closed


def test_new_call_while_a_multiplexed_call_is_unfinished_faults_the_new_one():
    conn = new_connection()
    bind(conn, flags=3 | F.PFC_CONC_MPX)
    conn.receive_data(P.fragment_request(8, 0, 1, bytes(9000), 2048)[0])
    conn.receive_data(P.build_request(9, 0, 1, b"x"))
    call_id, status, _, context_id = fault_of(conn.data_to_send())
    assert (call_id, status, context_id) == (9, F.NCA_S_PROTO_ERROR, 0) and conn.closed


def test_level_call_gets_bind_nak_invalid_checksum(provider):
    conn = new_connection(security=provider)
    conn.receive_data(with_auth(P.build_bind(1, ITEMS), 10, F.RPC_C_AUTHN_LEVEL_CALL))
    nak = conn.data_to_send()
    assert (nak[2], struct.unpack_from("<H", nak, 16)[0]) == (F.PTYPE_BIND_NAK, F.BIND_NAK_INVALID_CHECKSUM)


def test_auth3_for_an_unknown_context_is_not_answered_and_later_requests_are_refused(provider):
    conn = new_connection(security=provider)
    negotiate = bytes.fromhex("4e544c4d5353500001000000978208e2000000000000000000000000000000000a00614a0000000f")
    [event] = conn.receive_data(with_auth(P.build_bind(1, ITEMS), 10, 5, negotiate))
    assert isinstance(event, BindRequest) and event.auth_type == 10
    conn.accept_bind(event, 0x1234, "2105")
    assert conn.data_to_send()[2] == F.PTYPE_BIND_ACK
    auth3 = P.pack_header(F.PTYPE_AUTH3, 3, 20, 2) + b"    "
    raw = bytearray(with_auth(auth3, 10, 5, b"NTLMSSP\x00\x03" + bytes(60)))
    raw[len(raw) - 68 - 4:len(raw) - 68] = struct.pack("<I", 99)        # auth_context_id 99: no such context
    assert conn.receive_data(bytes(raw)) == [] and conn.data_to_send() == b"" and not conn.closed
    conn.receive_data(P.build_request(3, 0, 0, b""))
    [fault] = split_pdus(conn.data_to_send())
    assert fault_of(fault)[:2] == (3, F.RPC_S_ACCESS_DENIED) and conn.closed
