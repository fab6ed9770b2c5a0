"""Kerberos AP-REQ framing for DCE-style acceptors (MS-RPCE 2.2.3.5; RFC 2743 3.1; RFC 4121 4.1).

Every RPC initiator runs Kerberos in DCE style (MS-RPCE 2.2.3.5: the DCE Style protocol variable), and MIT's
acceptor takes a DCE-style AP-REQ only *raw* ("only DCE_STYLE clients are allowed to send raw AP-REQs",
accept_sec_context.c: a framed one is GSS_S_DEFECTIVE_TOKEN). impacket frames its DCE-style AP-REQ in the
InitialContextToken (0x60, krb5 OID, TOK_ID 01 00), which Windows accepts. So the server hands MIT the AP-REQ
without that framing, for auth_type 16 and inside SPNEGO's mechToken.
"""
from __future__ import annotations

_APPLICATION_0 = 0x60
_KRB5_OIDS = (bytes.fromhex("06092a864886f712010202"),      # 1.2.840.113554.1.2.2
              bytes.fromhex("06092a864882f712010202"))      # 1.2.840.48018.1.2.2 (MS KRB5)
_TOK_ID_AP_REQ = b"\x01\x00"


def _der_length(data: bytes, pos: int) -> tuple[int, int] | None:
    """(length, offset after the length octets) of a DER length at pos; None when it does not parse."""
    if pos >= len(data):
        return None
    first = data[pos]
    if first < 0x80:
        return first, pos + 1
    count = first & 0x7F
    if not 1 <= count <= 4 or pos + 1 + count > len(data):
        return None
    return int.from_bytes(data[pos + 1:pos + 1 + count], "big"), pos + 1 + count


def raw_ap_req(token: bytes) -> bytes:
    """The AP-REQ inside a framed krb5 InitialContextToken; any other token unchanged."""
    if len(token) < 16 or token[0] != _APPLICATION_0:
        return token
    parsed = _der_length(token, 1)
    if parsed is None or parsed[0] + parsed[1] != len(token):
        return token
    pos = parsed[1]
    for oid in _KRB5_OIDS:
        if token.startswith(oid + _TOK_ID_AP_REQ, pos):
            return token[pos + len(oid) + len(_TOK_ID_AP_REQ):]
    return token


def spnego_init_with_raw_ap_req(token: bytes) -> bytes:
    """A SPNEGO NegTokenInit whose mechToken is a framed krb5 AP-REQ, repacked with the raw AP-REQ; any other
    token unchanged (the mechListMIC covers mechTypes only, RFC 4178 4.2.1, so it still checks out)."""
    try:
        from spnego._spnego import NegTokenInit, unpack_token
        message = unpack_token(token)
    except Exception:
        return token
    if not isinstance(message, NegTokenInit) or not message.mech_token:
        return token
    raw = raw_ap_req(message.mech_token)
    if raw is message.mech_token:
        return token
    message.mech_token = raw
    return message.pack()
