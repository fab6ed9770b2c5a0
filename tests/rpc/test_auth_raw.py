"""Security-leg and verifier rules learnt from Samba's raw_protocol tests (written against Windows), checked with
a pyspnego-initiator client against the real server (MS-RPCE 2.2.2.10–13, 3.3.1.5.2; docs/authentication.md)."""
from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from qm2qm.rpc import faults as F
from qm2qm.rpc import pdu as P
from qm2qm.rpc.auth import AuthPolicy, SecurityProvider, UserStore
from qm2qm.rpc.events import BindRequest, ContextItem
from qm2qm.rpc.limits import Limits
from tests.mqqp.conftest import NDR
from tests.rpc.auth_helpers import raw_client
from tests.rpc.raw_auth_client import RawAuthClient
from tests.rpc.test_connection import IFACE, new_connection

NDR_SYNTAX = (uuid.UUID(NDR[0]), 2, 0)


@pytest.fixture
def env(auth_env):
    return auth_env


client = raw_client


def fault(pdu: bytes) -> tuple[int, int, int]:
    """(status, pfc_flags, p_cont_id) of a fault PDU."""
    assert pdu[2] == F.PTYPE_FAULT, pdu[2]
    return struct.unpack_from("<I", pdu, 24)[0], pdu[3], struct.unpack_from("<H", pdu, 20)[0]


def closed(c: RawAuthClient) -> bool:
    return c.sock.recv(1) == b""


async def established(env, **kwargs) -> RawAuthClient:
    c = await asyncio.to_thread(client, env, auth_type=10, **kwargs)
    await asyncio.to_thread(c.bind, third_leg="auth3")
    return c


async def test_alter_context_with_auth_type_none_on_a_context_is_access_denied(env):
    c = await established(env, level=5)
    alter = P.build_bind(9, c.items, alter_context=True)
    c.auth_type = 0
    await asyncio.to_thread(c.sock.sendall, c._with_auth(alter, b"x" * 16))
    status, flags, _ = fault(await asyncio.to_thread(c.read_pdu))
    assert status == F.RPC_S_ACCESS_DENIED and flags & F.PFC_DID_NOT_EXECUTE and await asyncio.to_thread(closed, c)


async def test_auth3_on_an_established_context_is_a_protocol_error(env):
    c = await established(env, level=5)
    auth3 = P.pack_header(F.PTYPE_AUTH3, 3, 20, 9) + b"    "
    await asyncio.to_thread(c.sock.sendall, c._with_auth(auth3, b"NTLMSSP\x00\x03" + bytes(60)))
    status, flags, _ = fault(await asyncio.to_thread(c.read_pdu))
    assert status == F.NCA_S_PROTO_ERROR and flags & F.PFC_DID_NOT_EXECUTE and await asyncio.to_thread(closed, c)


async def test_bind_auth_pad_beyond_the_pdu_gets_bind_nak_4(env):
    c = await asyncio.to_thread(client, env, auth_type=10, level=5)
    raw = bytearray(c._with_auth(P.build_bind(1, c.items), c.ctx.step()))
    auth_length = struct.unpack_from("<H", raw, 10)[0]
    raw[len(raw) - auth_length - 6] = 255                   # auth_pad_length
    await asyncio.to_thread(c.sock.sendall, bytes(raw))
    nak = await asyncio.to_thread(c.read_pdu)
    assert (nak[2], struct.unpack_from("<H", nak, 16)[0]) == (F.PTYPE_BIND_NAK,
                                                              F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)


async def test_auth3_with_a_pad_it_cannot_have_gets_remote_no_memory(env):
    c = await asyncio.to_thread(client, env, auth_type=10, level=5)
    await asyncio.to_thread(c.sock.sendall, c._with_auth(P.build_bind(1, c.items), c.ctx.step()))
    ack = await asyncio.to_thread(c.read_pdu)
    token = c.ctx.step(c.token_of(ack))
    raw = bytearray(c._with_auth(P.pack_header(F.PTYPE_AUTH3, 3, 20, 2) + b"    ", token))
    raw[len(raw) - len(token) - 6] = 1
    await asyncio.to_thread(c.sock.sendall, bytes(raw))
    status, flags, _ = fault(await asyncio.to_thread(c.read_pdu))
    assert status == F.NCA_S_FAULT_REMOTE_NO_MEMORY and flags & F.PFC_DID_NOT_EXECUTE


async def test_request_whose_trailer_level_differs_from_its_context_is_access_denied(env):
    c = await established(env, level=5)
    c.level = 6                                             # the trailer says privacy; the context is integrity
    status, _, context_id = fault(await asyncio.to_thread(c.request, 0, b""))
    assert (status, context_id) == (F.RPC_S_ACCESS_DENIED, 0)


async def test_packet_level_request_with_a_verifier_gets_a_signed_response(env):
    c = await established(env, level=4)
    response = await asyncio.to_thread(c.request, 0, b"")
    assert struct.unpack_from("<H", response, 10)[0] == 16
    assert c.response_stub(response).decode().startswith("4|1|")


async def test_unauthenticated_bind_then_alter_context_keeps_plain_requests_unauthenticated(env):
    c = await asyncio.to_thread(client, env, auth_type=10, level=5)
    await asyncio.to_thread(c.sock.sendall, P.build_bind(1, c.items))
    assert (await asyncio.to_thread(c.read_pdu))[2] == F.PTYPE_BIND_ACK
    c.call_id = 1
    alter = P.build_bind(2, c.items, alter_context=True)
    await asyncio.to_thread(c.sock.sendall, c._with_auth(alter, c.ctx.step()))
    resp = await asyncio.to_thread(c.read_pdu)
    token = c.ctx.step(c.token_of(resp))
    auth3 = P.pack_header(F.PTYPE_AUTH3, 3, 20, 3) + b"    "
    await asyncio.to_thread(c.sock.sendall, c._with_auth(auth3, token))
    c.call_id = 3
    await asyncio.to_thread(c.sock.sendall, P.build_request(4, 0, 0, b""))
    plain = await asyncio.to_thread(c.read_pdu)
    assert plain[2] == F.PTYPE_RESPONSE and plain[24:].decode().startswith("1|0|")
    c.call_id = 4
    signed = await asyncio.to_thread(c.request, 0, b"")
    assert c.response_stub(signed).decode().startswith("5|1|")


def test_security_contexts_per_connection_are_limited():
    users = UserStore.parse("D:u:p\n")
    try:
        conn = new_connection(security=SecurityProvider(AuthPolicy(users=users)),
                              limits=Limits(max_security_contexts=2))
        negotiate = bytes.fromhex("4e544c4d5353500001000000978208e2000000000000000000000000000000000a00614a0000000f")
        items = (ContextItem(0, IFACE, (NDR_SYNTAX,)),)
        [bind] = conn.receive_data(P.build_bind(1, items))
        conn.accept_bind(bind, 0x1234, "2105")
        conn.data_to_send()
        for context_id in (1, 2, 3):
            raw = P.build_bind(1 + context_id, items, alter_context=True)
            pad = -len(raw) % 4
            body = raw + bytes(pad) + P.SEC_TRAILER.pack(10, 5, pad, 0, context_id) + negotiate
            raw = body[:8] + struct.pack("<HH", len(body), len(negotiate)) + body[12:]
            for event in conn.receive_data(raw):
                if isinstance(event, BindRequest):
                    conn.accept_bind(event, 0x1234, "")
            out = conn.data_to_send()
        status, flags, _ = fault(out)
        assert status == F.NCA_S_PROTO_ERROR and flags & F.PFC_DID_NOT_EXECUTE and conn.closed
    finally:
        users.close()


NTLM_NEGOTIATE = bytes.fromhex("4e544c4d5353500001000000978208e2000000000000000000000000000000000a00614a0000000f")


def _with_negotiate(raw: bytes, context_id: int) -> bytes:
    """A bind / alter_context PDU with a sec_trailer (NTLM, integrity) naming ``context_id`` and an NTLM NEGOTIATE."""
    pad = -len(raw) % 4
    body = raw + bytes(pad) + P.SEC_TRAILER.pack(10, 5, pad, 0, context_id) + NTLM_NEGOTIATE
    return body[:8] + struct.pack("<HH", len(body), len(NTLM_NEGOTIATE)) + body[12:]


def _negotiate(conn, call_id: int, context_id: int, alter: bool) -> bytes:
    items = (ContextItem(0, IFACE, (NDR_SYNTAX,)),)
    for event in conn.receive_data(_with_negotiate(P.build_bind(call_id, items, alter_context=alter), context_id)):
        if isinstance(event, BindRequest):
            conn.accept_bind(event, 0x1234, "")
    return conn.data_to_send()


def test_security_contexts_over_every_connection_are_limited_and_given_back_when_one_closes():
    users = UserStore.parse("D:u:p\n")
    try:
        provider = SecurityProvider(AuthPolicy(users=users), max_contexts=3)
        first, second, third = (new_connection(security=provider) for _ in range(3))
        assert _negotiate(first, 1, 0, alter=False)[2] == F.PTYPE_BIND_ACK
        assert _negotiate(first, 2, 1, alter=True)[2] == F.PTYPE_ALTER_CONTEXT_RESP
        assert _negotiate(second, 1, 0, alter=False)[2] == F.PTYPE_BIND_ACK
        assert provider.live_contexts == 3
        nak = _negotiate(third, 1, 0, alter=False)                  # a fourth anywhere: temporary congestion
        assert (nak[2], struct.unpack_from("<H", nak, 16)[0]) == (F.PTYPE_BIND_NAK, F.BIND_NAK_TEMPORARY_CONGESTION)
        status, flags, _ = fault(_negotiate(second, 2, 1, alter=True))     # an alter_context: as past 2049
        assert status == F.NCA_S_PROTO_ERROR and flags & F.PFC_DID_NOT_EXECUTE and second.closed
        assert provider.live_contexts == 2                          # the closed connection gave its one back
        first.close()
        assert provider.live_contexts == 0
        again = new_connection(security=provider)
        assert _negotiate(again, 1, 0, alter=False)[2] == F.PTYPE_BIND_ACK
        again.close(), again.close()                                 # given back once
        assert provider.live_contexts == 0
    finally:
        users.close()


async def test_request_before_the_security_legs_are_done_is_a_protocol_error(env):
    c = await asyncio.to_thread(client, env, auth_type=10, level=5)
    await asyncio.to_thread(c.sock.sendall, c._with_auth(P.build_bind(1, c.items), c.ctx.step()))
    assert (await asyncio.to_thread(c.read_pdu))[2] == F.PTYPE_BIND_ACK
    c.call_id = 1
    raw = bytearray(P.build_request(2, 0, 0, bytes(16)))
    raw = c._with_auth(bytes(raw), b"\x01" + bytes(15))
    await asyncio.to_thread(c.sock.sendall, raw)
    status, flags, context_id = fault(await asyncio.to_thread(c.read_pdu))
    assert (status, context_id) == (F.NCA_S_PROTO_ERROR, 0) and flags & F.PFC_DID_NOT_EXECUTE
    assert await asyncio.to_thread(closed, c)


def _bind_with_token(call_id: int, auth_type: int, token: bytes, alter: bool = False, context_id: int = 0) -> bytes:
    raw = P.build_bind(call_id, (ContextItem(0, IFACE, (NDR_SYNTAX,)),), alter_context=alter)
    pad = -len(raw) % 4
    body = raw + bytes(pad) + P.SEC_TRAILER.pack(auth_type, 6, pad, 0, context_id) + token
    return body[:8] + struct.pack("<HH", len(body), len(token)) + body[12:]


SHORT_TOKENS = [b"garbage!", b"\x01", b"NTLMSSP\x00", b"NTLMSSP\x00\x01\x00\x00\x00\xff\xff\xff\xff"]


@pytest.mark.parametrize("auth_type", [10, 9], ids=["ntlm", "spnego"])
@pytest.mark.parametrize("token", SHORT_TOKENS)
def test_a_bind_whose_token_the_acceptor_cannot_parse_gets_bind_nak(auth_type, token):
    """MS-RPCE 3.3.3.5.3: a failed security leg is refused like a wrong password (bind_nak reason 0), not left to
    the runtime's internal-error handler (pyspnego raises struct.error on a token shorter than its header)."""
    users = UserStore.parse("D:u:p\n")
    try:
        conn = new_connection(security=SecurityProvider(AuthPolicy(users=users)))
        events = conn.receive_data(_bind_with_token(1, auth_type, token))
        nak = conn.data_to_send()
        assert (nak[2], struct.unpack_from("<H", nak, 16)[0]) == (F.PTYPE_BIND_NAK, F.BIND_NAK_REASON_NOT_SPECIFIED)
        assert conn.closed and events and "security leg failed" in events[-1].reason
    finally:
        users.close()


@pytest.mark.parametrize("token", SHORT_TOKENS[:2])
def test_an_alter_context_whose_token_the_acceptor_cannot_parse_gets_sec_pkg_error(token):
    users = UserStore.parse("D:u:p\n")
    try:
        conn = new_connection(security=SecurityProvider(AuthPolicy(users=users)))
        [bind] = conn.receive_data(P.build_bind(1, (ContextItem(0, IFACE, (NDR_SYNTAX,)),)))
        conn.accept_bind(bind, 0x1234, "2105")
        conn.data_to_send()
        conn.receive_data(_bind_with_token(2, 10, token, alter=True, context_id=1))
        status, flags, _ = fault(conn.data_to_send())
        assert status == F.NCA_S_FAULT_SEC_PKG_ERROR and flags & F.PFC_DID_NOT_EXECUTE and conn.closed
    finally:
        users.close()


def _spnego_tokens_without_a_mechanism() -> list[bytes]:
    from spnego._spnego import NegTokenInit, NegTokenResp
    return [NegTokenInit(mech_types=[], mech_token=b"\x6e\x00").pack(),
            NegTokenResp(neg_state=0, response_token=b"x").pack(), NegTokenResp().pack()]


@pytest.mark.parametrize("alter", [False, True], ids=["bind", "alter_context"])
@pytest.mark.parametrize("index", range(3), ids=["init-without-mech-types", "resp-first", "empty-resp"])
def test_a_spnego_first_token_naming_no_mechanism_is_a_refused_leg(alter, index):
    """MS-RPCE 3.3.3.5.3: pyspnego raises StopIteration on a NegTokenInit with no mechTypes or a NegTokenResp as
    the first token; the leg is refused (bind_nak 0 / fault 0x721) and counted, not an internal error."""
    token = _spnego_tokens_without_a_mechanism()[index]
    users = UserStore.parse("D:u:p\n")
    try:
        provider = SecurityProvider(AuthPolicy(users=users))
        conn = new_connection(security=provider)
        if alter:
            [bind] = conn.receive_data(P.build_bind(1, (ContextItem(0, IFACE, (NDR_SYNTAX,)),)))
            conn.accept_bind(bind, 0x1234, "2105")
            conn.data_to_send()
        events = conn.receive_data(_bind_with_token(2, 9, token, alter=alter, context_id=1))
        answer = conn.data_to_send()
        if alter:
            status, flags, _ = fault(answer)
            assert status == F.NCA_S_FAULT_SEC_PKG_ERROR and flags & F.PFC_DID_NOT_EXECUTE
        else:
            assert (answer[2], struct.unpack_from("<H", answer, 16)[0]) == (F.PTYPE_BIND_NAK,
                                                                          F.BIND_NAK_REASON_NOT_SPECIFIED)
        assert conn.closed and "security leg failed" in events[-1].reason
        assert provider.logon_refusals.count == 1
    finally:
        users.close()
