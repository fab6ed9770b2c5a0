"""The auth verifier of a PDU: sec_trailer, auth padding and auth_value (MS-RPCE 2.2.2.11, 2.2.2.12, 3.3.1.5.2.2)."""
from __future__ import annotations

from qm2qm.rpc import pdu as P
from qm2qm.rpc.auth.security import AuthError, SecurityContext
from qm2qm.rpc.faults import PFC_FIRST_FRAG, PFC_LAST_FRAG, PTYPE_RESPONSE

AUTH_PAD_ALIGNMENT = 16         # responses: stub padded to 16 as Windows and Samba do (MS-RPCE 2.2.2.11)


def auth_trailer(auth_type: int, auth_level: int, pad: int, context_id: int, token: bytes) -> bytes:
    """sec_trailer + auth_value (MS-RPCE 2.2.2.11)."""
    return P.SEC_TRAILER.pack(auth_type, auth_level, pad, 0, context_id) + token


def unprotect_fragment(pdu: bytes | bytearray | memoryview, body_start: int, frag_length: int, auth_length: int,
                       trailer: P.SecTrailer, security: SecurityContext) -> bytes:
    """The plain stub of one authenticated request fragment: verified from level 3 on, unsealed at level 6, the
    auth padding removed. AuthError when the verifier does not check out; P.PduError when the padding cannot fit."""
    trailer_start = frag_length - auth_length - P.SEC_TRAILER_SIZE
    if trailer_start < body_start:
        raise P.PduError(f"auth_length {auth_length} overlaps the request header")
    body = bytes(pdu[body_start:trailer_start])
    if trailer.auth_pad_length > len(body):
        raise P.PduError(f"auth_pad_length {trailer.auth_pad_length} exceeds the {len(body)}-byte stub")
    if security.verifies_requests:
        expected = security.request_signature_size
        if expected is not None and auth_length != expected:
            raise AuthError(f"auth_length {auth_length}, the mechanism signs with {expected} bytes")
        body = security.unprotect(bytes(pdu[:body_start]), body, bytes(pdu[trailer_start:trailer_start + 8]),
                                  bytes(pdu[trailer_start + 8:frag_length]))
    return body[:len(body) - trailer.auth_pad_length]


def append_protected_response(out: bytearray, call_id: int, context_id: int, stub: bytes, max_xmit_frag: int,
                              security: SecurityContext) -> int:
    """Response fragments each carrying a verifier (levels 3–6), stub chunks of a multiple of 16 bytes
    (C706 12.6.4.10; MS-RPCE 2.2.2.11); returns how many."""
    sig_size = security.signature_size
    room = max_xmit_frag - P.RESPONSE_HEADER_SIZE - P.SEC_TRAILER_SIZE - sig_size
    chunk = room - room % AUTH_PAD_ALIGNMENT
    total = len(stub)
    pos = 0
    count = 0
    while True:
        count += 1
        part = stub[pos:pos + chunk]
        last = pos + len(part) >= total
        flags = (PFC_FIRST_FRAG if pos == 0 else 0) | (PFC_LAST_FRAG if last else 0)
        pad = -len(part) % AUTH_PAD_ALIGNMENT
        body = part + bytes(pad)
        length = P.RESPONSE_HEADER_SIZE + len(body) + P.SEC_TRAILER_SIZE + sig_size
        header = P.RESPONSE_HEADER.pack(P.RPC_VERS, P.RPC_VERS_MINOR, PTYPE_RESPONSE, flags, P.DREP_LE_ASCII_IEEE,
                                        length, sig_size, call_id, total - pos, context_id & 0xFF, 0, 0)
        trailer = P.SEC_TRAILER.pack(security.auth_type, security.auth_level, pad, 0, security.context_id)
        body, signature = security.protect(header, body, trailer)
        out += header
        out += body
        out += trailer
        out += signature
        pos += len(part)
        if last:
            return count
