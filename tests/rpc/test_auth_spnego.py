"""SPNEGO (auth_type 9) negotiating NTLM, with the alter_context leg Windows uses for its final token (MS-RPCE
3.3.1.5.2; MS-SPNG 3.2.5), and the answers for types the server cannot negotiate (bind_nak reason 8)."""
from __future__ import annotations

import asyncio
import logging
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


def _spnego_ntlm_only_bind(env, level: int):
    """A bind whose NegTokenInit offers NTLM alone (as Samba's and Windows' clients do without Kerberos)."""
    from impacket import ntlm
    from spnego._spnego import GSSMech, NegTokenInit
    c = client(env, auth_type=9, level=level)
    negotiate = ntlm.getNTLMSSPType1("", "", signingRequired=True)
    c.sock.sendall(c._with_auth(P.build_bind(1, c.items),
                                NegTokenInit(mech_types=[GSSMech.ntlm.value], mech_token=negotiate.getData()).pack()))
    return c, negotiate, c.read_pdu()


async def test_spnego_initiator_first_choice_ntlm_gets_accept_incomplete_not_request_mic(env):
    # RFC 4178 5: request-mic only when the acceptor selects a mechanism other than the initiator's first choice
    from spnego._spnego import GSSMech, NegState, NegTokenResp, unpack_token
    c, _, ack = await asyncio.to_thread(_spnego_ntlm_only_bind, env, 5)
    assert ack[2] == F.PTYPE_BIND_ACK
    answer = unpack_token(c.token_of(ack))
    assert isinstance(answer, NegTokenResp)
    assert (answer.neg_state, answer.supported_mech) == (NegState.accept_incomplete, GSSMech.ntlm.value)
    c.close()


async def test_spnego_anonymous_ntlm_at_packet_level_finishes_without_mech_list_mic(auth_env_anonymous):
    # Samba raw_protocol test_spnego_packet_downgrade_connect: the final token must be acceptable to an initiator
    # that holds no key to check a mechListMIC with
    from impacket import ntlm
    from impacket.spnego import SPNEGO_NegTokenResp
    from spnego._spnego import NegState, NegTokenResp, unpack_token
    c, negotiate, ack = await asyncio.to_thread(_spnego_ntlm_only_bind, auth_env_anonymous, 4)
    first = unpack_token(c.token_of(ack))
    assert first.neg_state == NegState.accept_incomplete        # request-mic would oblige a keyless initiator
    challenge = first.response_token
    authenticate, _ = ntlm.getNTLMSSPType3(negotiate, challenge, "", "", "")
    leg = SPNEGO_NegTokenResp()
    leg["ResponseToken"] = authenticate.getData()
    await asyncio.to_thread(c.sock.sendall, c._with_auth(P.build_bind(2, c.items, alter_context=True),
                                                         leg.getData()))
    resp = await asyncio.to_thread(c.read_pdu)
    assert resp[2] == F.PTYPE_ALTER_CONTEXT_RESP
    final = unpack_token(c.token_of(resp))
    assert isinstance(final, NegTokenResp)
    assert (final.neg_state, final.mech_list_mic) == (NegState.accept_complete, None)
    c.close()


@pytest.fixture
async def auth_env_anonymous():
    from tests.mqqp.conftest import NDR
    from tests.rpc.auth_helpers import start_env, stop_env
    env = await start_env(NDR, allow_anonymous_ntlm=True)
    yield env
    await stop_env(env)


def _bad_user_name(auth: bytes) -> bytes:
    """A lone high surrogate as the AUTHENTICATE's user name (UserNameFields, MS-NLMP 2.2.1.3): not UTF-16."""
    auth = bytearray(auth)
    _, _, offset = struct.unpack_from("<HHI", auth, 36)
    auth[offset:offset + 2] = b"\x00\xd8"
    return bytes(auth)


def _bad_timestamp(auth: bytes) -> bytes:
    """NTLMv2_CLIENT_CHALLENGE.TimeStamp (after NTProofStr and 8 bytes, MS-NLMP 2.2.2.7) past any FILETIME."""
    auth = bytearray(auth)
    _, _, offset = struct.unpack_from("<HHI", auth, 20)
    auth[offset + 24:offset + 32] = b"\xff" * 8
    return bytes(auth)


@pytest.mark.parametrize("patch", [_bad_user_name, _bad_timestamp], ids=["user-name-not-utf16", "timestamp-overflow"])
@pytest.mark.parametrize("auth_type", [9, 10], ids=["spnego-alter-context", "ntlm-auth3"])
async def test_an_authenticate_the_parser_chokes_on_is_a_refused_logon(env, caplog, auth_type, patch):
    """docs/authentication.md bad-input table: a rejected alter_context leg is fault 0x721, a rejected rpc_auth3
    leaves the context failed and the first request gets fault 5; counted, never an internal-error traceback."""
    from spnego._spnego import unpack_token
    c = await asyncio.to_thread(client, env, auth_type=auth_type, level=6)
    step = c.ctx.step

    def patched_step(token=None):
        out = step(token)
        if token is None:
            return out
        if auth_type == 10:
            return patch(out)
        message = unpack_token(out)
        message.response_token = patch(message.response_token)
        return message.pack()
    c.ctx.step = patched_step
    refused = env.server.security.logon_refusals.count
    if auth_type == 9:
        answer = await asyncio.to_thread(c.bind)
        assert c.legs == [F.PTYPE_BIND_ACK, F.PTYPE_FAULT]
        assert struct.unpack_from("<I", answer, 24)[0] == F.NCA_S_FAULT_SEC_PKG_ERROR
    else:
        await asyncio.to_thread(c.bind, third_leg="auth3")
        answer = await asyncio.to_thread(c.request, 0, b"")
        assert answer[2] == F.PTYPE_FAULT and struct.unpack_from("<I", answer, 24)[0] == F.RPC_S_ACCESS_DENIED
    assert env.server.security.logon_refusals.count == refused + 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    c.close()
