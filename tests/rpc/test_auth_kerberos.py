"""Kerberos (auth_type 16) and SPNEGO→Kerberos (9) against a real MIT KDC on loopback (MS-RPCE 2.2.1.1.7,
3.3.1.5.2; MS-KILE 3.4.5 DCE style): three-leg bind, calls at integrity and privacy, the caller's identity."""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import uuid

import pytest

from qm2qm.rpc import faults as F
from tests.mqqp.conftest import NDR
from tests.rpc import auth_helpers as H
from tests.rpc.krb5_realm import PASSWORD, REALM, USER, missing_prerequisites, start_realm

_MISSING = missing_prerequisites()
pytestmark = pytest.mark.skipif(bool(_MISSING), reason="Kerberos tests need " + "; ".join(_MISSING))

KRB_SID = "S-1-5-21-1004336348-1177238915-682003330-1105"


@pytest.fixture(scope="module")
def realm(tmp_path_factory):
    """The loopback realm; this process's KRB5_CONFIG / KRB5CCNAME point at it while the module runs."""
    realm = start_realm(tmp_path_factory.mktemp("krb5"))
    saved = {key: os.environ.get(key) for key in ("KRB5_CONFIG", "KRB5CCNAME", "KRB5_KDC_PROFILE")}
    try:
        os.environ.update({key: realm.env[key] for key in saved})
        realm.kinit()
        yield realm
    finally:
        realm.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
async def env(realm):
    env = await H.start_env(NDR, keytab=realm.keytab)
    yield env
    await H.stop_env(env)


def kerberos_client(env, auth_type: int, level: int):
    """pyspnego's GSSAPI initiator with the realm's ccache, for host/localhost, DCE style."""
    from tests.rpc.raw_auth_client import RawAuthClient
    return RawAuthClient(env.server.port, (H.WHOAMI_UUID, 1, 0), (uuid.UUID(NDR[0]), 2, 0), user=None,
                         password=None, auth_type=auth_type, level=level, hostname="localhost", kerberos=True)


async def _bound(env, auth_type: int, level: int):
    c = await asyncio.to_thread(kerberos_client, env, auth_type, level)
    await asyncio.to_thread(c.bind)
    return c


@pytest.mark.parametrize("level", [5, 6], ids=["integrity", "privacy"])
@pytest.mark.parametrize("auth_type", [16, 9], ids=["kerberos", "spnego-kerberos"])
async def test_kerberos_binds_in_three_legs_and_protects_calls(env, auth_type, level):
    c = await _bound(env, auth_type, level)
    assert c.legs == [F.PTYPE_BIND_ACK, F.PTYPE_ALTER_CONTEXT_RESP] and c.ctx.complete
    assert c.ctx.negotiated_protocol == "kerberos"
    assert c.header_signed, "PFC_SUPPORT_HEADER_SIGN not echoed"
    response = await asyncio.to_thread(c.request, H.OP_WHOAMI, b"")
    assert response[2] == F.PTYPE_RESPONSE
    assert c.response_stub(response).decode() == f"{level}|1|{REALM}\\{USER}|None"
    echo = await asyncio.to_thread(c.request, H.OP_ECHO, b"kerberos" * 100)
    assert c.response_stub(echo) == (b"kerberos" * 100)[::-1]
    c.close()


async def test_kerberos_principal_takes_its_sid_from_the_user_file(realm):
    env = await H.start_env(NDR, users_text=f"{REALM}:{USER}:{PASSWORD}:{KRB_SID}\n", keytab=realm.keytab)
    try:
        c = await _bound(env, 16, 6)
        response = await asyncio.to_thread(c.request, H.OP_WHOAMI, b"")
        assert c.response_stub(response).decode() == f"6|1|{REALM}\\{USER}|{KRB_SID}"
        c.close()
    finally:
        await H.stop_env(env)


async def test_kerberos_sealed_stub_with_a_flipped_bit_gets_sec_pkg_error_and_close(env):
    c = await _bound(env, 16, 6)
    c.sock = _FlipFirstStubByte(c.sock)
    fault = await asyncio.to_thread(c.request, H.OP_ECHO, b"x" * 16)
    assert fault[2] == F.PTYPE_FAULT and struct.unpack_from("<I", fault, 24)[0] == F.NCA_S_FAULT_SEC_PKG_ERROR
    assert await asyncio.to_thread(H.peer_closed, c.sock._sock)
    c.close()


@pytest.mark.parametrize("auth_type", [16, 9], ids=["kerberos", "spnego-kerberos"])
async def test_a_keytab_without_a_user_file_accepts_kerberos_and_spnego_kerberos(realm, auth_type):
    env = await H.start_env(NDR, users_text=None, keytab=realm.keytab)
    try:
        c = await _bound(env, auth_type, 5)
        response = await asyncio.to_thread(c.request, H.OP_WHOAMI, b"")
        assert c.response_stub(response).decode() == f"5|1|{REALM}\\{USER}|None"
        c.close()
    finally:
        await H.stop_env(env)


class _FlipFirstStubByte:
    """The client's socket, but the next PDU sent has the first byte of its (sealed) stub flipped."""

    def __init__(self, sock) -> None:
        self._sock = sock

    def sendall(self, data: bytes) -> None:
        data = bytearray(data)
        data[24] ^= 0x01
        self._sock.sendall(bytes(data))

    def __getattr__(self, name):
        return getattr(self._sock, name)


async def test_kerberos_without_a_keytab_gets_bind_nak_8(realm):
    env = await H.start_env(NDR)
    try:
        c = await asyncio.to_thread(kerberos_client, env, 16, 6)
        nak = await asyncio.to_thread(c.bind)
        assert (nak[2], struct.unpack_from("<H", nak, 16)[0]) == (F.PTYPE_BIND_NAK,
                                                                  F.BIND_NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED)
        c.close()
    finally:
        await H.stop_env(env)


def impacket_kerberos_client(env, level: int):
    """impacket's DCERPC client, SPNEGO→Kerberos (its only Kerberos path), tickets from the realm's ccache."""
    from impacket.dcerpc.v5 import transport
    from impacket.dcerpc.v5.rpcrt import RPC_C_AUTHN_GSS_NEGOTIATE
    rpc = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:localhost[{env.server.port}]")
    rpc.setRemoteHost("127.0.0.1")
    rpc.set_credentials(USER, "", REALM)
    rpc.set_kerberos(True, kdcHost="127.0.0.1")
    dce = rpc.get_dce_rpc()
    dce.set_auth_type(RPC_C_AUTHN_GSS_NEGOTIATE)
    dce.set_auth_level(level)
    saved = os.environ["KRB5CCNAME"]
    os.environ["KRB5CCNAME"] = saved.removeprefix("FILE:")       # impacket opens the path itself
    try:
        dce.connect()
        dce.bind(H.WHOAMI, transfer_syntax=NDR)
    finally:
        os.environ["KRB5CCNAME"] = saved
    return dce


@pytest.mark.parametrize("level", [5, 6], ids=["integrity", "privacy"])
async def test_impacket_spnego_kerberos_with_its_framed_dce_style_ap_req(env, level):
    """impacket frames its DCE-style AP-REQ (MIT takes it only raw); the server unframes it, as Windows accepts
    it; calls, multi-fragment ones included, are then protected both ways (impacket checks our tokens)."""
    def calls() -> tuple[bytes, bytes]:
        dce = impacket_kerberos_client(env, level)
        try:
            dce.call(H.OP_WHOAMI, b"")
            whoami = dce.recv()
            dce.call(H.OP_ECHO, b"0123456789abcdef" * 700)
            return whoami, dce.recv()
        finally:
            dce.disconnect()
    whoami, echo = await asyncio.to_thread(calls)
    assert whoami.decode() == f"{level}|1|{REALM}\\{USER}|None"
    assert echo == (b"0123456789abcdef" * 700)[::-1]


async def test_kerberos_framed_dce_style_ap_req_is_accepted_for_auth_type_16(env):
    from qm2qm.rpc.auth.kerberos_compat import raw_ap_req
    c = await asyncio.to_thread(kerberos_client, env, 16, 6)
    step = c.ctx.step

    def framed_first(token=None):
        out = step(token)
        if token is None:                           # MIT's raw DCE-style AP-REQ, framed as impacket does
            assert raw_ap_req(_frame(out)) == out
            return _frame(out)
        return out
    c.ctx.step = framed_first
    await asyncio.to_thread(c.bind)
    response = await asyncio.to_thread(c.request, H.OP_WHOAMI, b"")
    assert c.response_stub(response).decode() == f"6|1|{REALM}\\{USER}|None"
    c.close()


def _frame(ap_req: bytes) -> bytes:
    """RFC 2743 3.1 InitialContextToken around a krb5 AP-REQ (RFC 4121 4.1: TOK_ID 01 00)."""
    inner = bytes.fromhex("06092a864886f712010202") + b"\x01\x00" + ap_req
    length = len(inner)
    encoded = bytes([length]) if length < 0x80 else bytes([0x82]) + length.to_bytes(2, "big")
    return b"\x60" + encoded + inner


def test_serve_keytab_that_is_not_a_readable_file_is_a_startup_error(tmp_path):
    from qm2qm.app import App, StartupError
    with pytest.raises(StartupError, match="--keytab .*missing.keytab: not a readable file"):
        App._check_keytab(str(tmp_path / "missing.keytab"))


@pytest.mark.parametrize("level", [5, 6], ids=["integrity", "privacy"])
@pytest.mark.parametrize("size", [0, 3, 200])
async def test_kerberos_verifier_of_another_size_gets_sec_pkg_error_and_close(env, level, size):
    """Kerberos verifiers have no fixed auth_length here (the token says its size): a truncated or padded one
    is judged by the mechanism and refused like a bad signature."""
    c = await _bound(env, 16, level)
    c.signature_size = lambda: size
    sign, wrap = c.ctx.sign, c.ctx.wrap_iov
    c.ctx.sign = lambda data: (sign(data) + bytes(200))[:size]

    def wrap_resized(iov):
        res = wrap(iov)
        resized = res.buffers[-1]._replace(data=(res.buffers[-1].data + bytes(200))[:size])
        return res._replace(buffers=(*res.buffers[:-1], resized))
    c.ctx.wrap_iov = wrap_resized
    fault = await asyncio.to_thread(c.request, H.OP_ECHO, b"y" * 16)
    # auth_length 0 is a request without a verifier at level 5/6: access denied (docs/authentication.md table)
    expected = F.RPC_S_ACCESS_DENIED if size == 0 else F.NCA_S_FAULT_SEC_PKG_ERROR
    assert fault[2] == F.PTYPE_FAULT and struct.unpack_from("<I", fault, 24)[0] == expected
    assert await asyncio.to_thread(H.peer_closed, c.sock)
    c.close()


@pytest.mark.parametrize("offer", [["ntlm", "kerberos"], ["ntlm"]], ids=["ntlm-then-kerberos", "ntlm-only"])
async def test_with_a_keytab_spnego_offering_ntlm_first_gets_accept_incomplete_not_request_mic(env, offer):
    """RFC 4178 5: request-mic only when the selected mechanism is not the initiator's first choice; pyspnego
    would ask for it whenever Kerberos, its own first preference, is accepted (Samba raw_protocol
    test_spnego_packet_downgrade_connect fails so with a keytab)."""
    from impacket import ntlm
    from spnego._spnego import GSSMech, NegState, NegTokenResp, NegTokenInit, unpack_token
    from qm2qm.rpc import pdu as P
    from tests.rpc.raw_auth_client import RawAuthClient

    def bind():
        c = RawAuthClient(env.server.port, (H.WHOAMI_UUID, 1, 0), (uuid.UUID(NDR[0]), 2, 0), user=f"{H.DOMAIN}\\{H.USER}",
                          password=H.PASSWORD, auth_type=9, level=5)
        mechs = [GSSMech[name].value for name in offer]
        init = NegTokenInit(mech_types=mechs, mech_token=ntlm.getNTLMSSPType1("", "", signingRequired=True).getData())
        c.sock.sendall(c._with_auth(P.build_bind(1, c.items), init.pack()))
        return c, c.read_pdu()
    c, ack = await asyncio.to_thread(bind)
    assert ack[2] == F.PTYPE_BIND_ACK
    answer = unpack_token(c.token_of(ack))
    assert isinstance(answer, NegTokenResp)
    assert (answer.neg_state, answer.supported_mech) == (NegState.accept_incomplete, GSSMech.ntlm.value)
    c.close()


@pytest.mark.parametrize("level", [4, 5, 6], ids=["packet", "integrity", "privacy"])
@pytest.mark.parametrize("auth_type", [16, 9], ids=["kerberos", "spnego-kerberos"])
async def test_kerberos_context_without_replay_or_sequence_detect_fails_its_last_leg(env, auth_type, level):
    """MS-RPCE 3.3.1.5.2.2: packet needs Replay Detect, integrity and privacy Sequence Detect, and the lack of one
    is a security provider error; accepted, a resent request PDU passed verification and ran twice."""
    import spnego
    from spnego import ContextReq
    c = await asyncio.to_thread(kerberos_client, env, auth_type, level)
    c.ctx = spnego.client(None, None, hostname="localhost", service="host",
                          protocol={16: "kerberos", 9: "negotiate"}[auth_type],
                          options=spnego.NegotiateOptions.use_gssapi if auth_type == 16 else
                          spnego.NegotiateOptions.use_negotiate,
                          context_req=ContextReq.mutual_auth | ContextReq.dce_style | ContextReq.integrity |
                          ContextReq.confidentiality)
    fault = await asyncio.to_thread(c.bind)
    assert c.legs == [F.PTYPE_BIND_ACK, F.PTYPE_FAULT]
    assert struct.unpack_from("<I", fault, 24)[0] == F.NCA_S_FAULT_SEC_PKG_ERROR
    assert await asyncio.to_thread(H.peer_closed, c.sock)
    assert env.server.security.logon_refusals.count == 1
    c.close()


def test_serve_keytab_gssapi_cannot_accept_with_is_a_startup_error(tmp_path):
    """docs/authentication.md: an unusable keytab is a startup error (exit 2); an empty file is readable, so the
    acceptor credential is acquired once to tell."""
    from qm2qm.app import App, StartupError
    empty = tmp_path / "empty.keytab"
    empty.write_bytes(b"")
    with pytest.raises(StartupError, match=r"--keytab .*empty.keytab: GSSAPI cannot accept with it: .*empty") as err:
        App._check_keytab(str(empty))
    assert "\n" not in str(err.value)


async def test_kerberos_bind_after_the_keytab_was_emptied_gets_bind_nak_not_a_crash(realm, tmp_path, caplog):
    """At run time an acceptor that cannot start is a failed leg (MS-RPCE 3.3.3.5.3): bind_nak 0, counted."""
    import shutil
    keytab = tmp_path / "service.keytab"
    shutil.copy(realm.keytab, keytab)
    env = await H.start_env(NDR, users_text=None, keytab=str(keytab))
    try:
        keytab.write_bytes(b"")
        c = await asyncio.to_thread(kerberos_client, env, 16, 6)
        nak = await asyncio.to_thread(c.bind)
        assert (nak[2], struct.unpack_from("<H", nak, 16)[0]) == (F.PTYPE_BIND_NAK, F.BIND_NAK_REASON_NOT_SPECIFIED)
        assert env.server.security.logon_refusals.count == 1
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        c.close()
    finally:
        await H.stop_env(env)


@pytest.mark.parametrize("auth_type", [16, 9], ids=["kerberos", "spnego-kerberos"])
async def test_kerberos_privacy_request_wrapped_without_sealing_gets_sec_pkg_error(env, auth_type):
    """MS-RPCE 3.3.1.5.2.2: at privacy the body MUST be encrypted; a GSS Wrap token without the Sealed flag
    (conf_req_flag FALSE, RFC 4121 4.2.6.2) carries it in clear, checksummed only: refused, no handler runs."""
    from qm2qm.rpc import pdu as P
    from spnego.iov import BufferType
    c = await asyncio.to_thread(kerberos_client, env, auth_type, 6)
    c.kerberos = False                      # no PFC_SUPPORT_HEADER_SIGN: only the body is wrapped
    await asyncio.to_thread(c.bind)
    c.kerberos = True
    stub = b"in clear".ljust(16, b"!")
    res = c.ctx.wrap_iov([(BufferType.data, stub), BufferType.header], encrypt=False)
    body, sig = res.buffers[0].data, res.buffers[-1].data
    assert body == stub and not res.encrypted
    c.call_id += 1
    header = P.pack_header(F.PTYPE_REQUEST, 3, P.REQUEST_HEADER_SIZE + len(body) + 8 + len(sig), c.call_id,
                           len(sig)) + P.REQUEST_FIELDS.pack(len(stub), 0, H.OP_ECHO)
    await asyncio.to_thread(c.sock.sendall, header + body + P.SEC_TRAILER.pack(auth_type, 6, 0, 0, c.context_id) + sig)
    fault = await asyncio.to_thread(c.read_pdu)
    assert fault[2] == F.PTYPE_FAULT and struct.unpack_from("<I", fault, 24)[0] == F.NCA_S_FAULT_SEC_PKG_ERROR
    assert await asyncio.to_thread(H.peer_closed, c.sock)
    c.close()


@pytest.mark.parametrize("with_users", [False, True], ids=["keytab-only", "keytab-and-users"])
async def test_mgmt_inq_princ_name_answers_for_every_negotiated_authn_service(realm, with_users):
    """C706 Appendix Q rpc_mgmt_inq_princ_name: the server principal for each authn service a bind negotiates;
    a keytab-only server answered RPC_S_UNKNOWN_AUTHN_SERVICE for 9 and, with a user file too, for 16."""
    from tests.rpc.raw_auth_client import RawAuthClient
    env = await H.start_env(NDR, users_text=H.USERS_TEXT if with_users else None, keytab=realm.keytab)
    mgmt = (uuid.UUID("afa8bd80-7d8a-11c9-bef4-08002b102989"), 1, 0)
    try:
        def inq(authn: int) -> tuple[int, bytes]:
            c = RawAuthClient(env.server.port, mgmt, (uuid.UUID(NDR[0]), 2, 0), user=None, password=None,
                              auth_type=16, level=6, hostname="localhost", kerberos=True)
            try:
                c.bind()
                stub = c.response_stub(c.request(4, struct.pack("<II", authn, 256)))
                return struct.unpack_from("<I", stub, len(stub) - 4)[0], stub[12:-4].split(b"\0")[0]
            finally:
                c.close()
        expected = {9: (0, b"QM2QM-TEST$"), 16: (0, b"QM2QM-TEST$"),
                    10: (0, b"QM2QM-TEST$") if with_users else (F.RPC_S_UNKNOWN_AUTHN_SERVICE, b"")}
        for authn, answer in expected.items():
            assert await asyncio.to_thread(inq, authn) == answer, authn
    finally:
        await H.stop_env(env)


@pytest.mark.parametrize("auth_type", [16, 9], ids=["kerberos", "spnego-kerberos"])
async def test_kerberos_refusal_logs_the_mit_error_and_the_ticket_service(env, caplog, auth_type):
    """A replayed AP-REQ (RFC 4120 3.2.3, KRB_AP_ERR_REPEAT) is refused (bind_nak 0) and the refused-logon line
    says so, with the service the ticket names (clear text in the ticket, RFC 4120 5.3); pyspnego hid MIT's
    error behind an AttributeError."""
    import socket
    from qm2qm.rpc import pdu as P
    c = await asyncio.to_thread(kerberos_client, env, auth_type, 6)
    ap_req = c.ctx.step()
    c.close()

    def bind_with(token: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", env.server.port), timeout=30) as s:
            s.sendall(c._with_auth(P.build_bind(1, c.items, flags=7), token))
            c.sock = s
            return c.read_pdu()
    caplog.set_level(logging.WARNING, logger="qm2qm.rpc.auth")
    assert (await asyncio.to_thread(bind_with, ap_req))[2] == F.PTYPE_BIND_ACK
    nak = await asyncio.to_thread(bind_with, ap_req)
    assert (nak[2], struct.unpack_from("<H", nak, 16)[0]) == (F.PTYPE_BIND_NAK, F.BIND_NAK_REASON_NOT_SPECIFIED)
    [line] = [r.getMessage() for r in caplog.records if "logon" in r.getMessage()]
    assert "AttributeError" not in line and "replay" in line.lower(), line
    assert f"'host/localhost@{REALM}'" in line, line
