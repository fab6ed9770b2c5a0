"""Security contexts of a connection on pyspnego: token legs, PDU signing and sealing (MS-RPCE 2.2.2.11–13,
3.3.1.5.2; MS-NLMP 3.4.6–3.4.7 GSS_WrapEx / GSS_UnwrapEx; MS-SPNG).

The runtime never does NTLM or Kerberos arithmetic itself: pyspnego's acceptor checks the AUTHENTICATE message
against the user file, and its sign / verify / wrap_iov / unwrap_iov protect each PDU.
"""
from __future__ import annotations

import contextlib
import logging
import os
import struct
from typing import Iterator

import spnego
from spnego import ContextReq
from spnego.exceptions import SpnegoError
from spnego.iov import BufferType

from qm2qm.logfmt import Refusals, printable
from qm2qm.rpc.auth import kerberos_compat, ntlm_compat
from qm2qm.rpc.auth.policy import AuthPolicy
from qm2qm.rpc.interface import (ANONYMOUS, RPC_C_AUTHN_LEVEL_CALL, RPC_C_AUTHN_LEVEL_PKT,
                                 RPC_C_AUTHN_LEVEL_PKT_INTEGRITY,
                                 RPC_C_AUTHN_LEVEL_PKT_PRIVACY, Principal)
from qm2qm.rpc.limits import MAX_LIVE_SECURITY_CONTEXTS

# auth_type values (MS-RPCE 2.2.1.1.7)
RPC_C_AUTHN_GSS_NEGOTIATE = 0x09
RPC_C_AUTHN_WINNT = 0x0A
RPC_C_AUTHN_GSS_KERBEROS = 0x10
_PROTOCOLS = {RPC_C_AUTHN_GSS_NEGOTIATE: "negotiate", RPC_C_AUTHN_WINNT: "ntlm",
              RPC_C_AUTHN_GSS_KERBEROS: "kerberos"}
_OPTIONS = {"negotiate": spnego.NegotiateOptions.use_negotiate, "ntlm": spnego.NegotiateOptions.use_ntlm,
            "kerberos": spnego.NegotiateOptions.use_gssapi}
NTLMSSP_SIGNATURE_SIZE = 16                     # MS-NLMP 2.2.2.9.1 NTLMSSP_MESSAGE_SIGNATURE
_NTLMSSP_EXTENDED_SESSION_SECURITY = 0x00080000  # MS-NLMP 2.2.2.5 flag P

log = logging.getLogger("qm2qm.rpc.auth")


class AuthError(Exception):
    """A security context step or a PDU verifier failed; the message never carries a secret."""


def kerberos_available() -> bool:
    """True when pyspnego can use GSSAPI Kerberos: it needs both python-gssapi and python-krb5 (its [kerberos]
    extra); with gssapi alone its acceptor raises ImportError at the first Kerberos bind."""
    try:
        from spnego._gss import HAS_GSSAPI
    except ImportError:
        return False
    return bool(HAS_GSSAPI)


def keytab_problem(path: str) -> str | None:
    """Why GSSAPI cannot accept with the keytab at ``path`` (an empty file, no key), as one line; None when it can.
    Acquires the acceptor credential once, as every Kerberos bind does."""
    saved = os.environ.get("KRB5_KTNAME")
    os.environ["KRB5_KTNAME"] = path
    try:
        spnego.server(protocol="kerberos", options=spnego.NegotiateOptions.use_gssapi)
    except SpnegoError as exc:
        return " ".join(str(exc).split())
    finally:
        if saved is None:
            os.environ.pop("KRB5_KTNAME", None)
        else:
            os.environ["KRB5_KTNAME"] = saved
    return None


NTLM_ACCEPTOR_COMPAT_LEVEL = "5"         # pyspnego (and gss-ntlmssp) LM_COMPAT_LEVEL: accept NTLMv2 responses only


class SecurityProvider:
    """Creates the acceptor side of security contexts for one server (MS-RPCE 3.3.1.5.2)."""

    def __init__(self, policy: AuthPolicy, max_contexts: int = MAX_LIVE_SECURITY_CONTEXTS) -> None:
        self.policy = policy
        self.max_contexts = max_contexts    # contexts alive at once over every connection (limits.py)
        self.live_contexts = 0
        self.logon_refusals = Refusals()    # security legs the acceptor refused (wrong password, bad token)
        ntlm_compat.install()
        # pyspnego logs every token in base64 at DEBUG; an NTLMv2 response can be attacked offline, so never
        spnego_log = logging.getLogger("spnego")
        spnego_log.setLevel(max(spnego_log.getEffectiveLevel(), logging.INFO))
        self._types = {RPC_C_AUTHN_WINNT, RPC_C_AUTHN_GSS_NEGOTIATE} if policy.users is not None else set()
        if policy.keytab and kerberos_available():
            self._types |= {RPC_C_AUTHN_GSS_KERBEROS, RPC_C_AUTHN_GSS_NEGOTIATE}   # SPNEGO→Kerberos, no user file

    def note_refused_logon(self, auth_type: int, token: bytes, why: str) -> None:
        """Count a refused security leg; log it at WARNING (an operator's failed-logon record) with the account an
        NTLM AUTHENTICATE names, at most once a second so a password-guessing peer cannot flood the log."""
        if not self.logon_refusals.note():
            return
        who = _ntlm_account(token if token.startswith(b"NTLMSSP\x00") else _spnego_inner(token))
        service = None if who else _kerberos_ticket_service(token)
        whose = f" of {who!r}" if who else f" with a ticket for {service!r}" if service else ""
        log.warning("%s logon%s refused: %s (%d refused since the server started)", _PROTOCOLS[auth_type],
                    whose, why, self.logon_refusals.count)     # quoted: the names are the peer's

    @property
    def auth_types(self) -> frozenset[int]:
        """The auth_type values binds negotiate (NTLM and SPNEGO with a user file; Kerberos and SPNEGO with a keytab)."""
        return frozenset(self._types)

    def supports(self, auth_type: int) -> bool:
        """Whether binds of this auth_type are negotiated (else bind_nak reason 8)."""
        return auth_type in self._types

    @contextlib.contextmanager
    def credentials(self) -> Iterator[None]:
        """pyspnego reads NTLM_USER_FILE (and KRB5_KTNAME) from the environment when a context starts and when it
        checks an AUTHENTICATE message; set them for this server around each step (one thread: the event loop)."""
        wanted = {}
        if self.policy.users is not None:
            wanted["NTLM_USER_FILE"] = self.policy.users.path
            # NTLMv2 only, as a Windows server at LmCompatibilityLevel 5 (MS-NLMP 3.3.1 LM and NTLMv1 responses,
            # 5 Security Considerations): pyspnego's acceptor default, 3, takes LM and NTLMv1 responses. An LM
            # response ignores the password's case and all past its 14th character, and an smbpasswd line without
            # an LM hash (32 X's) would be checked against an all-zero one, which anyone can answer without the
            # password.
            wanted["LM_COMPAT_LEVEL"] = NTLM_ACCEPTOR_COMPAT_LEVEL
        if self.policy.keytab:
            wanted["KRB5_KTNAME"] = self.policy.keytab
        saved = {key: os.environ.get(key) for key in wanted}
        os.environ.update(wanted)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def has_room(self) -> bool:
        """Whether one more security context may start (MAX_LIVE_SECURITY_CONTEXTS)."""
        return self.live_contexts < self.max_contexts

    def release(self, count: int) -> None:
        """A connection that held ``count`` contexts is closed."""
        self.live_contexts -= count

    def new_context(self, auth_type: int, auth_level: int, context_id: int, header_sign: bool) -> "SecurityContext":
        """AuthError when the acceptor cannot start (a keytab GSSAPI cannot use: deleted or emptied while running);
        the bind is refused as a failed leg (MS-RPCE 3.3.3.5.3), not left to the runtime's internal-error handler."""
        protocol = _PROTOCOLS[auth_type]
        try:
            with self.credentials():
                mech = spnego.server(protocol=protocol, options=_OPTIONS[protocol])
        except SpnegoError as exc:
            why = f"cannot start the {protocol} acceptor ({type(exc).__name__})"
            self.note_refused_logon(auth_type, b"", why)
            raise AuthError(why) from None
        context = SecurityContext(self, mech, auth_type, auth_level, context_id, header_sign)
        self.live_contexts += 1             # the connection holding it gives it back when it closes
        if protocol == "negotiate":
            self._prefer_accepted_mechs(mech, context.initiator_mechs)
        return context

    def _prefer_accepted_mechs(self, mech, initiator_mechs: list[str]) -> None:
        """SPNEGO acceptor preference = the mechanisms this server accepts, the initiator's first accepted choice
        first. pyspnego answers request-mic when the initiator's first mechanism is not the acceptor's first
        preference (it ranks Kerberos first whenever GSSAPI is importable); RFC 4178 5 asks for it only when the
        *selected* mechanism is not the initiator's first choice. So an initiator offering NTLM first gets
        accept-incomplete as from Windows, with or without a keytab, and an anonymous one (no key, no
        mechListMIC) can finish (Samba raw_protocol test_spnego_packet_downgrade_connect)."""
        from spnego._spnego import GSSMech
        accepted = [GSSMech.kerberos] if RPC_C_AUTHN_GSS_KERBEROS in self._types else []
        if self.policy.users is not None:
            accepted.append(GSSMech.ntlm)

        def initiator_rank(candidate) -> int:
            return next((i for i, oid in enumerate(initiator_mechs) if mech._is_same_mech(candidate, oid)),
                        len(initiator_mechs))
        mech._preferred_mech_list = lambda: sorted(accepted, key=initiator_rank)


class SecurityContext:
    """One security context (auth_context_id) of a connection: its legs, caller identity and PDU protection."""

    def __init__(self, provider: SecurityProvider, mech, auth_type: int, auth_level: int, context_id: int,
                 header_sign: bool) -> None:
        self.provider = provider
        self.auth_type = auth_type
        self.auth_level = auth_level
        self.context_id = context_id
        self.header_sign = header_sign      # the connection's Supports Header Signing Flag (MS-RPCE 3.3.1.5.2.2)
        self.complete = False
        self.failed = False
        self.principal: Principal = ANONYMOUS
        self._mech = mech
        self._anonymous = False
        self._signs_every_buffer: bool | None = None     # fixed once the context is established
        self._can_sign = False
        self._mic_size: int | None = None               # Kerberos GetMIC token size, learnt from a request
        self._stepped = False
        self.initiator_mechs: list[str] = []            # SPNEGO: the mechTypes of the initiator's NegTokenInit

    @property
    def protects_pdus(self) -> bool:
        """Levels integrity and privacy carry a verifier on every request and response (MS-RPCE 3.3.1.5.2.2)."""
        return self.auth_level >= RPC_C_AUTHN_LEVEL_PKT_INTEGRITY

    @property
    def verifies_requests(self) -> bool:
        """A request carrying a verifier is checked from level call/packet on: Windows signs at packet level
        (Samba raw_protocol *_signing_packet) although MS-RPCE 3.3.1.5.2.2's table lists no protection there."""
        return self.auth_level >= RPC_C_AUTHN_LEVEL_CALL

    @property
    def kerberos(self) -> bool:
        """Kerberos, as auth_type 16 or negotiated by SPNEGO (9)."""
        return self.auth_type == RPC_C_AUTHN_GSS_KERBEROS or \
            (self.complete and getattr(self._mech, "negotiated_protocol", None) == "kerberos")

    @property
    def request_signature_size(self) -> int | None:
        """The auth_length a request verifier must have: NTLM 16 (MS-NLMP 2.2.2.9.1); Kerberos None, its
        token says its own size (a GSS_WrapEx header's EC/RRC vary by initiator: impacket sends EC 0 / 60 bytes,
        MIT EC 16 / 76 bytes, RFC 4121 4.2.4), so the mechanism judges it."""
        return None if self.kerberos else NTLMSSP_SIGNATURE_SIZE

    @property
    def signature_size(self) -> int | None:
        """auth_length of the server's verifiers: NTLM 16; Kerberos at privacy the GSS_WrapEx token header MIT
        makes, else the GetMIC token (RFC 4121 4.2.6.1: 16 bytes + the enctype's checksum), whose size the first
        verified request tells."""
        if not self.kerberos:
            return NTLMSSP_SIGNATURE_SIZE
        if self.auth_level == RPC_C_AUTHN_LEVEL_PKT_PRIVACY:
            return self._mech.query_message_sizes().header
        return self._mic_size

    def step(self, token: bytes) -> bytes:
        """Feed one auth_value from bind / alter_context / rpc_auth3; returns the token to send back (b"" if none).
        AuthError when the mechanism rejects it (wrong password, malformed token, anonymous when not allowed)."""
        if self.complete or self.failed:
            raise AuthError("security context already established" if self.complete else "security context failed")
        if self.auth_type == RPC_C_AUTHN_WINNT and _is_anonymous_authenticate(token):
            return self._anonymous_logon()
        if self.auth_type == RPC_C_AUTHN_GSS_NEGOTIATE and _is_anonymous_authenticate(_spnego_inner(token)):
            self._anonymous_logon()
            # MS-SPNG 3.2.5.2: the acceptor's last NegTokenResp; no mechListMIC without a session key
            from spnego._spnego import NegState, NegTokenResp
            return NegTokenResp(neg_state=NegState.accept_complete).pack()
        if not self._stepped and self.auth_type == RPC_C_AUTHN_GSS_NEGOTIATE:
            self.initiator_mechs[:] = _spnego_init_mechs(token)
        if not self._stepped and self.provider.supports(RPC_C_AUTHN_GSS_KERBEROS):
            token = kerberos_compat.raw_ap_req(token) if self.auth_type == RPC_C_AUTHN_GSS_KERBEROS else \
                kerberos_compat.spnego_init_with_raw_ap_req(token)
        self._stepped = True
        try:
            with self.provider.credentials():
                out = self._mech.step(token)
        except (SpnegoError, ValueError, KeyError, IndexError, TypeError, AttributeError, struct.error,
                StopIteration, OverflowError) as exc:
            # AttributeError: pyspnego's GSSAPI acceptor reading flags of a context MIT refused (impacket's AP-REQ);
            # struct.error: its NTLM parser given a token shorter than a message header; StopIteration: its SPNEGO
            # acceptor given a first token naming no mechanism (NegTokenInit without mechTypes, a NegTokenResp);
            # OverflowError: an NTLMv2 TimeStamp past any datetime (MS-NLMP 2.2.2.7) in its FileTime parsing
            self.failed = True
            why = f"{type(exc).__name__} from the {_PROTOCOLS[self.auth_type]} acceptor"
            deferred = _deferred_gss_error(self._mech)
            if deferred:        # MIT's own reason ("Request is a replay"), not pyspnego's AttributeError
                why = f"{deferred} (from the {_PROTOCOLS[self.auth_type]} acceptor)"
            self.provider.note_refused_logon(self.auth_type, token, why)
            raise AuthError(why) from None
        if self._mech.complete:
            self._check_capabilities()
            self.complete = True
            self.principal = self._principal()
        elif self._inner_complete_without_integrity():
            # SPNEGO over NTLM negotiated without signing: there is no key to make a mechListMIC with, so the
            # exchange ends here (Windows, Samba raw_protocol test_spnego_connect_bind_none); pyspnego would wait
            # for a MIC and answer with an unkeyed one, which Samba's client rejects.
            self._check_capabilities()
            self.complete = True
            self.principal = self._principal()
            from spnego._spnego import NegState, NegTokenResp
            return NegTokenResp(neg_state=NegState.accept_complete).pack()
        return out or b""

    def _inner_complete_without_integrity(self) -> bool:
        if self.auth_type != RPC_C_AUTHN_GSS_NEGOTIATE:
            return False
        try:
            inner = self._mech._context             # NegotiateProxy: the negotiated mechanism's context
        except (AttributeError, KeyError, StopIteration):
            return False
        return bool(inner.complete) and not inner.context_attr & ContextReq.integrity

    def _check_capabilities(self) -> None:
        """MS-RPCE 3.2.1.4.1.1: a context lacking the capability its level needs is an error. Windows fails the
        security leg when privacy lacks confidentiality, but completes an integrity (or packet) context negotiated
        without signing and fails its first protected request (Samba raw_protocol test_spnego_*_bind_none)."""
        attr = self._mech.context_attr
        self._can_sign = bool(attr & ContextReq.integrity)
        if self.auth_level == RPC_C_AUTHN_LEVEL_PKT_PRIVACY and not attr & ContextReq.confidentiality:
            self.failed = True
            raise AuthError(f"the negotiated context cannot protect level {self.auth_level}")
        # MS-RPCE 3.3.1.5.2.2 (3.2.1.4.1.1): packet needs Replay Detect, integrity and privacy Sequence Detect; the
        # lack of one is a security provider error. Without it a Kerberos context accepts a resent PDU (NTLM's
        # signing brings both). Checked only for a context that signs: one without signing fails its first request.
        needed = ContextReq.sequence_detect if self.auth_level >= RPC_C_AUTHN_LEVEL_PKT_INTEGRITY else \
            ContextReq.replay_detect if self.auth_level >= RPC_C_AUTHN_LEVEL_PKT else ContextReq.none
        if self._can_sign and needed and not attr & needed:
            self.failed = True
            why = f"the negotiated context lacks {needed.name} for level {self.auth_level}"
            self.provider.note_refused_logon(self.auth_type, b"", why)
            raise AuthError(why)

    def _anonymous_logon(self) -> bytes:
        # An anonymous AUTHENTICATE has no session key, so it can be honoured only where nothing is signed
        # (MS-NLMP 3.2.5.1.2); pyspnego does not accept it, so the runtime completes the context itself.
        if not self.provider.policy.allow_anonymous_ntlm or self.auth_level > RPC_C_AUTHN_LEVEL_PKT:
            self.failed = True
            raise AuthError("anonymous NTLM logon refused")
        self.complete = True
        self._anonymous = True
        self.principal = ANONYMOUS
        return b""

    def _principal(self) -> Principal:
        name = self._mech.client_principal or ""
        if "\\" in name:
            domain, user = name.split("\\", 1)
        elif "@" in name:
            user, domain = name.split("@", 1)
        else:
            domain, user = "", name
        users = self.provider.policy.users
        sid = users.sid_of(domain, user) if users is not None else None
        return Principal(domain=domain, user=user, sid=sid, authenticated=True)

    # -- PDU protection (MS-RPCE 3.3.1.5.2.2) --

    def _whole_pdu(self) -> bool:
        """Whether header and sec_trailer are signed: when the connection negotiated header signing (MS-RPCE
        3.3.1.5.2.2, read at each PDU: a later bind or alter_context can switch it on), and always with NTLM with
        extended session security, whose signature covers every input buffer, signed or not (MS-NLMP 3.4.6,
        3.4.6.1: "for NTLMv2, all of the input data buffers"; Windows, Samba and impacket sign so)."""
        if self._signs_every_buffer is None:
            self._signs_every_buffer = self._mechanism_signs_every_buffer()
        return self._signs_every_buffer or self.header_sign

    def _mechanism_signs_every_buffer(self) -> bool:
        if self.auth_type in (RPC_C_AUTHN_WINNT, RPC_C_AUTHN_GSS_NEGOTIATE):
            inner = getattr(self._mech, "_context", self._mech)     # SPNEGO: the negotiated mechanism
            flags = getattr(inner, "_context_attr", 0)
            if getattr(inner, "negotiated_protocol", "ntlm") == "ntlm":
                return bool(flags & _NTLMSSP_EXTENDED_SESSION_SECURITY)
        return False

    def unprotect(self, header: bytes, body: bytes, trailer: bytes, signature: bytes) -> bytes:
        """Verify (integrity) or unseal and verify (privacy) one fragment; returns the plain body (stub + pad)."""
        if not self._can_sign:
            raise AuthError("the security context was negotiated without integrity")
        whole = self._whole_pdu()
        try:
            if self.auth_level == RPC_C_AUTHN_LEVEL_PKT_PRIVACY:
                iov = ([(BufferType.sign_only, header), (BufferType.data, body), (BufferType.sign_only, trailer)]
                       if whole else [(BufferType.data, body)])
                iov.append((BufferType.header, signature))
                result = self._mech.unwrap_iov(iov)
                if not result.encrypted:
                    # MS-RPCE 3.3.1.5.2.2: at privacy the body MUST be encrypted; a GSS Wrap token without the
                    # Sealed flag (RFC 4121 4.2.6.2) checks out but carried the stub in clear
                    raise AuthError("verifier does not check out (the privacy-level stub was not sealed)")
                return next(b.data for b in result.buffers if b.type == BufferType.data)
            self._mech.verify(header + body + trailer if whole else body, signature)
            if self.kerberos:
                self._mic_size = len(signature)
            return body
        except (SpnegoError, ValueError) as exc:
            raise AuthError(f"verifier does not check out ({type(exc).__name__})") from None

    def protect(self, header: bytes, body: bytes, trailer: bytes) -> tuple[bytes, bytes]:
        """Sign (integrity) or seal and sign (privacy) one fragment; returns (body to send, signature)."""
        whole = self._whole_pdu()
        if self.auth_level == RPC_C_AUTHN_LEVEL_PKT_PRIVACY:
            iov = ([(BufferType.sign_only, header), (BufferType.data, body), (BufferType.sign_only, trailer)]
                   if whole else [(BufferType.data, body)])
            iov.append(BufferType.header)
            result = self._mech.wrap_iov(iov)
            sealed = next(b.data for b in result.buffers if b.type == BufferType.data)
            signature = next(b.data for b in result.buffers if b.type == BufferType.header)
            return sealed, signature
        return body, self._mech.sign(header + body + trailer if whole else body)


def _spnego_init_mechs(token: bytes) -> list[str]:
    """The mechTypes of a SPNEGO NegTokenInit ([] when it is not one)."""
    try:
        from spnego._spnego import NegTokenInit, unpack_token
        message = unpack_token(token)
    except Exception:
        return []
    return list(message.mech_types or []) if isinstance(message, NegTokenInit) else []


def _ntlm_account(token: bytes) -> str | None:
    """DOMAIN\\user of an NTLM AUTHENTICATE_MESSAGE (MS-NLMP 2.2.1.3), control characters escaped; None otherwise."""
    if token[8:12] != b"\x03\x00\x00\x00":
        return None
    try:
        from spnego._ntlm_raw.messages import Authenticate
        message = Authenticate.unpack(token)
        name = f"{message.domain_name or ''}\\{message.user_name or ''}"
    except Exception:   # noqa: BLE001 - a token the acceptor refused may be malformed in any way
        return None
    return printable(name[:256])


def _deferred_gss_error(mech) -> str | None:
    """MIT's message for an acceptor step python-gssapi deferred (its __DEFER_STEP_ERRORS__: the GSSError waits in
    the context's _last_err while pyspnego, reading actual_flags, raises AttributeError); None when there is none."""
    for _ in range(3):                  # NegotiateProxy -> GSSAPIProxy -> gssapi.SecurityContext
        try:
            mech = getattr(mech, "_context", None)
        except Exception:   # noqa: BLE001 - NegotiateProxy._context of an exchange that never chose a mechanism
            return None
        err = getattr(mech, "_last_err", None)
        if err is not None:
            try:
                messages = err.get_all_statuses(err.min_code, False) if err.min_code else \
                    err.get_all_statuses(err.maj_code, True)
            except Exception:   # noqa: BLE001
                messages = [str(err)]
            return printable("; ".join(m.decode(errors="replace") if isinstance(m, bytes) else str(m)
                                       for m in messages)[:256])
    return None


def _kerberos_ticket_service(token: bytes) -> str | None:
    """service@REALM of the ticket in a Kerberos AP-REQ (raw, or SPNEGO's mechToken), clear text in the ticket
    (RFC 4120 5.3), control characters escaped; None otherwise."""
    try:
        from spnego._asn1 import unpack_asn1
        from spnego._kerberos import KerberosV5Msg, KrbApReq
        from spnego._spnego import NegTokenInit, unpack_token
        if token[:1] in (b"\x60", b"\xa0"):   # SPNEGO: the AP-REQ is the NegTokenInit's mechToken
            message = unpack_token(token)
            token = message.mech_token or b"" if isinstance(message, NegTokenInit) else b""
        if token[:1] != b"\x6e":       # [APPLICATION 14] AP-REQ
            return None
        ap_req = KerberosV5Msg.unpack(unpack_asn1(unpack_asn1(token)[0].b_data)[0])
        if not isinstance(ap_req, KrbApReq):
            return None
        ticket = ap_req.ticket
        name = "/".join(part.decode("utf-8", "replace") for part in ticket.sname.value)
        return printable(f"{name}@{ticket.realm.decode('utf-8', 'replace')}"[:256])
    except Exception:   # noqa: BLE001 - a token the acceptor refused may be malformed in any way
        return None


def _spnego_inner(token: bytes) -> bytes:
    """The mechanism token inside a SPNEGO NegTokenResp (b"" when it is not one)."""
    try:
        from spnego._spnego import NegTokenResp, unpack_token
        message = unpack_token(token)
    except Exception:
        return b""
    return (message.response_token or b"") if isinstance(message, NegTokenResp) else b""


def _is_anonymous_authenticate(token: bytes) -> bool:
    """An NTLM AUTHENTICATE_MESSAGE with empty user name and empty NT / one-zero-byte LM response (MS-NLMP 3.2.5.1.2)."""
    if len(token) < 52 or token[:8] != b"NTLMSSP\x00" or token[8:12] != b"\x03\x00\x00\x00":
        return False
    try:
        from spnego._ntlm_raw.messages import Authenticate
        auth = Authenticate.unpack(token)
        # the fields decode when read: a user name that is not UTF-16 raises UnicodeDecodeError here
        return not auth.user_name and not auth.nt_challenge_response and \
            auth.lm_challenge_response in (None, b"", b"\x00")
    except Exception:   # noqa: BLE001 - not an anonymous AUTHENTICATE; the acceptor judges (and refuses) it
        return False
