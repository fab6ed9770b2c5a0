"""NTLM-authenticated DCE/RPC against the real server with impacket's client (MS-RPCE 2.2.1.1.8, 2.2.2.11–13,
3.3.1.5.2; MS-NLMP 3.4): every level end to end, caller identity, and Windows' answer to each bad verifier."""
from __future__ import annotations

import asyncio
import struct

import pytest
from impacket.dcerpc.v5 import mgmt
from impacket.dcerpc.v5.rpcrt import DCERPCException

from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE, RR_ACK
from qm2qm.rpc import faults as F
from tests.mqqp.conftest import NDR, NDR64
from tests.rpc.auth_helpers import (ALICE_SID, DOMAIN, OP_ECHO, PASSWORD, USER, WHOAMI, WHOAMI_UUID, connect,
                                    start_env, stop_env)

MQ_ERROR_ACCESS_DENIED = 0xC00E0025


@pytest.fixture(params=[NDR, NDR64], ids=["ndr", "ndr64"])
def syntax(request):
    return request.param


@pytest.fixture
async def make_env(syntax):
    envs = []

    async def make(**policy):
        env = await start_env(syntax, **policy)
        envs.append(env)
        return env
    yield make
    for env in envs:
        await stop_env(env)


async def remote_read(env, client) -> bytes:
    """RemoteQMOpenQueue, RemoteQMStartReceive2, RemoteQMEndReceive(ACK), RemoteQMCloseQueue (MS-MQQP 3.1.4)."""
    env.enqueue(b"authenticated body")
    descriptor = env.open_descriptor()
    status, session = await client.call(client.open_queue, descriptor.handle)
    assert status == 0, hex(status)
    read = await client.call(client.start_receive2, descriptor.handle, MQ_ACTION_RECEIVE, request_id=1)
    assert read.status == 0, hex(read.status)
    status, _ = await client.call(client.end_receive, read.context, RR_ACK)
    assert status == 0
    status, _ = await client.call(client.close_queue, session)
    assert status == 0
    return read.buffer


@pytest.mark.parametrize("level", [2, 4, 5, 6], ids=["connect", "packet", "integrity", "privacy"])
async def test_ntlm_whole_remote_read_at_every_level(make_env, level):
    env = await make_env()
    client = await connect(env, level=level)
    assert b"authenticated body" in await remote_read(env, client)
    assert env.bodies() == []


@pytest.mark.parametrize("level", [2, 5, 6])
async def test_principal_and_level_reach_the_handler(make_env, level):
    env = await make_env()
    client = await connect(env, level=level, interface=WHOAMI)
    assert await client.call(client.whoami) == f"{level}|1|{DOMAIN}\\{USER}|{ALICE_SID}"


async def test_unauthenticated_caller_is_anonymous_logon(make_env):
    env = await make_env()
    client = await connect(env, level=None, interface=WHOAMI)
    assert await client.call(client.whoami) == "1|0|NT AUTHORITY\\ANONYMOUS LOGON|S-1-5-7"


async def test_user_without_sid_column_has_no_sid(make_env):
    env = await make_env()
    client = await connect(env, level=6, user="bob", password="Bob-pass-2", domain="", interface=WHOAMI)
    assert await client.call(client.whoami) == "6|1|bob|None"


@pytest.mark.parametrize("level", [2, 5, 6])
async def test_wrong_password_first_call_access_denied_and_server_keeps_serving(make_env, level):
    env = await make_env()
    bad = await connect(env, level=level, password="not-the-password", interface=WHOAMI)
    await asyncio.to_thread(bad.dce.call, 0, b"")
    assert await asyncio.to_thread(bad.expect_fault_and_close) == F.RPC_S_ACCESS_DENIED
    good = await connect(env, level=level, interface=WHOAMI)
    assert (await good.call(good.whoami)).startswith(f"{level}|1|")


async def _tampered_call(env, level: int, tamper, *, calls_before: int = 0) -> int:
    client = await connect(env, level=level, interface=WHOAMI)
    for _ in range(calls_before):
        await client.call(client.whoami)
    client.tap.rewrite = tamper
    await asyncio.to_thread(client.dce.call, OP_ECHO, b"0123456789abcdef" * 4)
    return await asyncio.to_thread(client.expect_fault_and_close)


def flip(offset: int, bit: int = 0x01):
    def rewrite(pdu: bytes) -> bytes:
        position = offset if offset >= 0 else len(pdu) + offset
        return pdu[:position] + bytes([pdu[position] ^ bit]) + pdu[position + 1:]
    return rewrite


@pytest.mark.parametrize("level", [5, 6])
async def test_tampered_signature_gets_sec_pkg_error_and_the_connection_closes(make_env, level):
    env = await make_env()
    assert await _tampered_call(env, level, flip(-3)) == F.NCA_S_FAULT_SEC_PKG_ERROR
    good = await connect(env, level=level, interface=WHOAMI)
    assert (await good.call(good.whoami)).startswith(f"{level}|1|")


@pytest.mark.parametrize("level", [5, 6])
async def test_tampered_header_is_caught_by_the_whole_pdu_signature(make_env, level):
    env = await make_env()
    assert await _tampered_call(env, level, _alloc_hint_plus_one) == F.NCA_S_FAULT_SEC_PKG_ERROR


def _alloc_hint_plus_one(pdu: bytes) -> bytes:
    hint = struct.unpack_from("<I", pdu, 16)[0]
    return pdu[:16] + struct.pack("<I", hint + 1) + pdu[20:]


async def test_sealed_stub_with_one_flipped_bit_gets_sec_pkg_error(make_env):
    env = await make_env()
    assert await _tampered_call(env, 6, flip(24 + 5, 0x10)) == F.NCA_S_FAULT_SEC_PKG_ERROR


@pytest.mark.parametrize("level", [5, 6])
async def test_replayed_sequence_number_gets_sec_pkg_error(make_env, level):
    env = await make_env()
    client = await connect(env, level=level, interface=WHOAMI)
    await client.call(client.whoami)
    replay = client.tap.sent[-1]
    assert replay[2] == 0 and struct.unpack_from("<H", replay, 10)[0] == 16
    sock = client.rpc.get_socket()
    await asyncio.to_thread(sock.sendall, replay)
    assert await asyncio.to_thread(client.expect_fault_and_close) == F.NCA_S_FAULT_SEC_PKG_ERROR


async def test_request_without_verifier_at_integrity_is_access_denied(make_env):
    env = await make_env()
    client = await connect(env, level=5, interface=WHOAMI)

    def strip(pdu: bytes) -> bytes:                     # drop pad, sec_trailer and signature; auth_length 0
        auth_length = struct.unpack_from("<H", pdu, 10)[0]
        pad = pdu[len(pdu) - auth_length - 8 + 2]
        body = pdu[:len(pdu) - auth_length - 8 - pad]
        return body[:8] + struct.pack("<HH", len(body), 0) + body[12:]
    client.tap.rewrite = strip
    await asyncio.to_thread(client.dce.call, 0, b"")
    assert await asyncio.to_thread(client.expect_fault_and_close) == F.RPC_S_ACCESS_DENIED


async def test_auth3_for_an_unknown_context_makes_later_calls_access_denied(make_env):
    env = await make_env()

    def other_context(pdu: bytes) -> bytes:
        if pdu[2] == F.PTYPE_AUTH3:
            auth_length = struct.unpack_from("<H", pdu, 10)[0]
            at = len(pdu) - auth_length - 4
            return pdu[:at] + struct.pack("<I", 4242) + pdu[at + 4:]
        return pdu
    client = await connect(env, level=5, interface=WHOAMI, bind=False)
    client.tap.rewrite = other_context
    await asyncio.to_thread(client.dce.bind, WHOAMI, transfer_syntax=env.syntax)
    client.tap.rewrite = None
    await asyncio.to_thread(client.dce.call, 0, b"")
    assert await asyncio.to_thread(client.expect_fault_and_close) == F.RPC_S_ACCESS_DENIED
    good = await connect(env, level=5, interface=WHOAMI)
    assert (await good.call(good.whoami)).startswith("5|1|")


async def test_alter_context_changing_auth_type_gets_sec_pkg_error_and_close(make_env):
    env = await make_env()
    client = await connect(env, level=5, interface=WHOAMI)
    bind = next(p for p in client.tap.sent if p[2] == F.PTYPE_BIND)
    auth_length = struct.unpack_from("<H", bind, 10)[0]
    trailer_at = len(bind) - auth_length - 8
    alter = bytearray(bind)
    alter[2] = F.PTYPE_ALTER_CONTEXT
    alter[12:16] = struct.pack("<I", 99)                 # call_id
    alter[trailer_at] = 9                                # auth_type NTLMSSP → SPNEGO, same auth_context_id
    await asyncio.to_thread(client.rpc.get_socket().sendall, bytes(alter))
    assert await asyncio.to_thread(client.expect_fault_and_close) == F.NCA_S_FAULT_SEC_PKG_ERROR


@pytest.mark.parametrize("header_sign", [False, True], ids=["no-header-sign", "header-sign"])
@pytest.mark.parametrize("level", [5, 6])
async def test_header_signing_is_echoed_only_when_asked_and_calls_work_either_way(make_env, level, header_sign):
    env = await make_env()
    client = await connect(env, level=level, interface=WHOAMI, header_sign=header_sign)
    assert bool(client.acks[0][3] & F.PFC_SUPPORT_HEADER_SIGN) == header_sign
    assert (await client.call(client.whoami)).startswith(f"{level}|1|")
    stub = bytes(range(256)) * 3
    assert await client.call(client.raw_call, OP_ECHO, stub) == stub[::-1]


@pytest.mark.parametrize("level", [2, 5, 6])
async def test_fragmented_authenticated_call_each_fragment_verified(make_env, level):
    env = await make_env()
    client = await connect(env, level=level, interface=WHOAMI)
    client.dce.set_max_fragment_size(512)
    stub = bytes(i % 251 for i in range(20000))
    assert await client.call(client.raw_call, OP_ECHO, stub) == stub[::-1]
    requests = [p for p in client.tap.sent if p[2] == F.PTYPE_REQUEST]
    assert len(requests) > 10
    assert (await client.call(client.whoami)).startswith(f"{level}|1|")


async def test_tampered_middle_fragment_fails_the_call_before_any_handler(make_env):
    env = await make_env()
    seen = []
    echo = env.server.registry[next(k for k in env.server.registry if k[0] == WHOAMI_UUID)].operations[OP_ECHO]
    original = echo.handler
    object.__setattr__(echo, "handler", lambda ctx, stub: seen.append(stub) or original(ctx, stub))
    client = await connect(env, level=6, interface=WHOAMI)
    client.dce.set_max_fragment_size(512)
    client.tap.hold = True
    await asyncio.to_thread(client.dce.call, OP_ECHO, bytes(20000))
    fragments = [p for p in client.tap.sent if p[2] == F.PTYPE_REQUEST]
    assert len(fragments) > 5
    sock = client.rpc.get_socket()
    await asyncio.to_thread(sock.sendall, b"".join(fragments[:3]) + flip(30)(fragments[3]))
    assert await asyncio.to_thread(client.expect_fault_and_close) == F.NCA_S_FAULT_SEC_PKG_ERROR
    assert seen == []


async def test_auth_required_denies_unauthenticated_start_receive2_but_answers_get_port(make_env):
    env = await make_env(mode="required")
    anonymous = await connect(env, level=None)
    descriptor = env.open_descriptor()
    status = await anonymous.call(anonymous.fault, anonymous.start_receive2, descriptor.handle, MQ_ACTION_RECEIVE,
                                  request_id=1)
    assert status == MQ_ERROR_ACCESS_DENIED
    assert await anonymous.call(anonymous.get_qmqm_server_port, 1) != 0
    client = await connect(env, level=6)
    assert b"authenticated body" in await remote_read(env, client)


async def test_auth_required_keeps_mgmt_open(make_env):
    env = await make_env(mode="required")
    client = await connect(env, level=None, interface=mgmt.MSRPC_UUID_MGMT)
    resp = await asyncio.to_thread(mgmt.hinq_if_ids, client.dce)
    assert resp["status"] == 0 and resp["if_id_vector"]["count"] >= 2


async def test_min_auth_level_refuses_lower_levels(make_env):
    env = await make_env(min_level=5)
    low = await connect(env, level=2)
    descriptor = env.open_descriptor()
    status = await low.call(low.fault, low.start_receive2, descriptor.handle, MQ_ACTION_RECEIVE, request_id=1)
    assert status == MQ_ERROR_ACCESS_DENIED
    high = await connect(env, level=5)
    assert b"authenticated body" in await remote_read(env, high)


async def test_mgmt_inq_princ_name_answers_the_server_principal(make_env):
    env = await make_env()
    client = await connect(env, level=6, interface=mgmt.MSRPC_UUID_MGMT)
    resp = await asyncio.to_thread(mgmt.hinq_princ_name, client.dce, 10, 256)
    assert b"".join(resp["princ_name"]) == b"QM2QM-TEST$\x00"


async def test_auth_mode_none_refuses_authenticated_binds_with_reason_8(make_env):
    env = await make_env(mode="none")
    with pytest.raises(DCERPCException):
        await connect(env, level=6, interface=WHOAMI)
    anonymous = await connect(env, level=None, interface=WHOAMI)
    assert (await anonymous.call(anonymous.whoami)).startswith("1|0|")


async def test_secrets_never_reach_the_log(make_env, caplog):
    caplog.set_level("DEBUG")
    env = await make_env()
    bad = await connect(env, level=5, password="Hunter2-wrong", interface=WHOAMI)
    await asyncio.to_thread(bad.dce.call, 0, b"")
    await asyncio.to_thread(bad.expect_fault_and_close)
    good = await connect(env, level=6, interface=WHOAMI)
    await good.call(good.whoami)
    assert "Hunter2-wrong" not in caplog.text and PASSWORD not in caplog.text
    assert "TlRMTVNT" not in caplog.text                   # no NTLM token (base64 of "NTLMSS") either


async def test_anonymous_ntlm_is_anonymous_logon_when_allowed(make_env):
    env = await make_env(allow_anonymous_ntlm=True)
    client = await connect(env, level=2, user="", password="", domain="", interface=WHOAMI)
    assert await client.call(client.whoami) == "2|0|NT AUTHORITY\\ANONYMOUS LOGON|S-1-5-7"


@pytest.mark.parametrize("allowed, level", [(False, 2), (True, 5)], ids=["not-allowed", "needs-a-session-key"])
async def test_anonymous_ntlm_refused_gets_access_denied(make_env, allowed, level):
    env = await make_env(allow_anonymous_ntlm=allowed)
    client = await connect(env, level=level, user="", password="", domain="", interface=WHOAMI)
    await asyncio.to_thread(client.dce.call, 0, b"")
    assert await asyncio.to_thread(client.expect_fault_and_close) == F.RPC_S_ACCESS_DENIED


async def test_anonymous_ntlm_does_not_pass_auth_required(make_env):
    env = await make_env(mode="required", allow_anonymous_ntlm=True)
    client = await connect(env, level=2, user="", password="", domain="")
    descriptor = env.open_descriptor()
    status = await client.call(client.fault, client.start_receive2, descriptor.handle, MQ_ACTION_RECEIVE,
                               request_id=1)
    assert status == MQ_ERROR_ACCESS_DENIED


SMBPASSWD_CAROL = "QM2QM\\carol:1000:" + "X" * 32 + ":8846F7EAEE8FB117AD06BDD830B7586C:[U]:LCT-0\n"


def _ntlm_client_at(monkeypatch, compat_level: str, env, **kwargs):
    """A pyspnego NTLM initiator built under LM_COMPAT_LEVEL=compat_level (it reads it once, when made)."""
    from tests.rpc.auth_helpers import raw_client
    monkeypatch.setenv("LM_COMPAT_LEVEL", compat_level)
    try:
        return raw_client(env, auth_type=10, level=6, **kwargs)
    finally:
        monkeypatch.delenv("LM_COMPAT_LEVEL")


@pytest.mark.parametrize("compat_level", ["0", "1", "2"], ids=["LM+NTLMv1 no ESS", "LM+NTLMv1", "NTLMv1"])
async def test_lm_and_ntlmv1_responses_are_refused_even_with_the_right_password(monkeypatch, compat_level):
    """MS-NLMP 3.3.1 / 5: the acceptor takes NTLMv2 only (LmCompatibilityLevel 5); pyspnego's default took LM and
    NTLMv1 responses, and an LM response matches the password in any case and cut at 14 characters."""
    from tests.rpc.auth_helpers import OP_WHOAMI, start_env, stop_env
    env = await start_env(NDR)
    try:
        c = _ntlm_client_at(monkeypatch, compat_level, env)
        await asyncio.to_thread(c.bind, third_leg="auth3")
        answer = await asyncio.to_thread(c.request, OP_WHOAMI, b"")
        assert answer[2] == F.PTYPE_FAULT and struct.unpack_from("<I", answer, 24)[0] == F.RPC_S_ACCESS_DENIED
    finally:
        await stop_env(env)


async def test_an_smbpasswd_account_without_an_lm_hash_is_not_opened_by_an_lm_response_of_zeros(monkeypatch):
    """Found by a hostile probe: the all-zero LM hash put for "XXX…" let an LM-only AUTHENTICATE (DESL of a zero
    key) log in as the account without its password, at privacy."""
    import spnego
    from spnego._credential import NTLMHash
    from spnego._ntlm_raw.messages import Authenticate

    from tests.rpc.auth_helpers import OP_WHOAMI, USERS_TEXT, raw_client, start_env, stop_env
    env = await start_env(NDR, USERS_TEXT + SMBPASSWD_CAROL)
    try:
        monkeypatch.setenv("LM_COMPAT_LEVEL", "0")          # the initiator: LM and NTLMv1, LM_KEY
        c = raw_client(env, auth_type=10, level=6)
        c.ctx = spnego.client(NTLMHash(username="QM2QM\\carol", lm_hash="00" * 16, nt_hash="11" * 16),
                              hostname="qm2qm", service="host", protocol="ntlm",
                              options=spnego.NegotiateOptions.use_ntlm)
        monkeypatch.delenv("LM_COMPAT_LEVEL")
        step = c.ctx.step

        def lm_only(token=None):                            # the AUTHENTICATE without its NtChallengeResponse
            if token is None:
                return step()
            a = Authenticate.unpack(step(token))
            return Authenticate(flags=a.flags, lm_challenge_response=a.lm_challenge_response,
                                nt_challenge_response=None, domain_name=a.domain_name, username=a.user_name,
                                workstation=a.workstation, encrypted_session_key=a.encrypted_random_session_key,
                                version=a.version).pack()
        c.ctx.step = lm_only
        await asyncio.to_thread(c.bind, third_leg="auth3")
        answer = await asyncio.to_thread(c.request, OP_WHOAMI, b"")
        assert answer[2] == F.PTYPE_FAULT and struct.unpack_from("<I", answer, 24)[0] == F.RPC_S_ACCESS_DENIED
    finally:
        await stop_env(env)


async def test_a_refused_logon_is_a_warning_naming_the_account_at_most_once_a_second(make_env, caplog):
    """An operator's failed-logon record (it was an INFO line without the account): the account the AUTHENTICATE
    names, never the password; a password-guessing loop is counted, and logged once a second."""
    env = await make_env()
    caplog.set_level("WARNING", logger="qm2qm.rpc.auth")
    for _ in range(3):
        bad = await connect(env, level=5, password="Hunter2-wrong", interface=WHOAMI)
        await asyncio.to_thread(bad.dce.call, 0, b"")
        await asyncio.to_thread(bad.expect_fault_and_close)
    lines = [r.getMessage() for r in caplog.records if r.name == "qm2qm.rpc.auth"]
    assert env.server.security.logon_refusals.count == 3 and len(lines) == 1
    assert f"ntlm logon of {DOMAIN + chr(92) + USER!r} refused" in lines[0] and "Hunter2-wrong" not in lines[0]
