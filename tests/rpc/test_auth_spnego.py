"""SPNEGO (auth_type 9) negotiating NTLM, with the alter_context leg Windows uses for its final token (MS-RPCE
3.3.1.5.2; MS-SPNG 3.2.5), and the answers for types the server cannot negotiate (bind_nak reason 8)."""
from __future__ import annotations

import asyncio
import struct

import pytest

from qm2qm.rpc import faults as F
from qm2qm.rpc import pdu as P
from tests.rpc.auth_helpers import ALICE_SID, DOMAIN, USER, raw_client


@pytest.fixture
def env(auth_env):
    return auth_env


client = raw_client


@pytest.mark.parametrize("level", [5, 6])
async def test_spnego_ntlm_completes_with_an_alter_context_leg_and_protects_calls(env, level):
    c = await asyncio.to_thread(client, env, auth_type=9, level=level)
    await asyncio.to_thread(c.bind)
    assert c.legs == [F.PTYPE_BIND_ACK, F.PTYPE_ALTER_CONTEXT_RESP] and c.ctx.complete
    response = await asyncio.to_thread(c.request, 0, b"")
    assert response[2] == F.PTYPE_RESPONSE
    assert c.response_stub(response).decode() == f"{level}|1|{DOMAIN}\\{USER}|{ALICE_SID}"
    c.close()


async def test_ntlm_with_the_raw_client_and_rpc_auth3(env):
    c = await asyncio.to_thread(client, env, auth_type=10, level=6)
    await asyncio.to_thread(c.bind, third_leg="auth3")
    response = await asyncio.to_thread(c.request, 0, b"")
    assert c.response_stub(response).decode().startswith("6|1|")
    c.close()


async def test_spnego_wrong_password_fails_the_alter_context_leg(env):
    c = await asyncio.to_thread(client, env, auth_type=9, level=6, password="wrong")
    answer = await asyncio.to_thread(c.bind)
    assert answer[2] == F.PTYPE_FAULT
    assert struct.unpack_from("<I", answer, 24)[0] == F.NCA_S_FAULT_SEC_PKG_ERROR
    c.close()


@pytest.mark.parametrize("auth_type", [16, 0x44, 0xFF], ids=["kerberos-without-keytab", "netlogon", "unknown"])
async def test_types_the_server_cannot_negotiate_get_bind_nak_reason_8(env, auth_type):
    c = await asyncio.to_thread(client, env, auth_type=10, level=6)
    c.auth_type = auth_type
    bind = P.build_bind(1, c.items)
    await asyncio.to_thread(c.sock.sendall, c._with_auth(bind, b"\x60\x00"))
    nak = await asyncio.to_thread(c.read_pdu)
    assert (nak[2], struct.unpack_from("<H", nak, 16)[0]) == (F.PTYPE_BIND_NAK,
                                                              F.BIND_NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED)
    c.close()


async def test_garbage_first_token_gets_bind_nak_not_specified(env):
    c = await asyncio.to_thread(client, env, auth_type=10, level=6)
    bind = P.build_bind(1, c.items)
    await asyncio.to_thread(c.sock.sendall, c._with_auth(bind, b"NTLMSSP\x00\x09garbage"))
    nak = await asyncio.to_thread(c.read_pdu)
    assert (nak[2], struct.unpack_from("<H", nak, 16)[0]) == (F.PTYPE_BIND_NAK, F.BIND_NAK_REASON_NOT_SPECIFIED)
    c.close()
