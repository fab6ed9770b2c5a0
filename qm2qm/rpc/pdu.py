"""Connection-oriented PDU encodings: common header, bind family, request/response/fault (C706 12.6; MS-RPCE 2.2.2)."""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Sequence

from qm2qm.rpc.events import ContextItem, SyntaxId
from qm2qm.rpc.faults import (
    PFC_DID_NOT_EXECUTE, PFC_FIRST_FRAG, PFC_LAST_FRAG, PFC_OBJECT_UUID, PTYPE_ALTER_CONTEXT,
    PTYPE_ALTER_CONTEXT_RESP, PTYPE_BIND, PTYPE_BIND_ACK, PTYPE_BIND_NAK, PTYPE_FAULT, PTYPE_REQUEST,
    PTYPE_RESPONSE,
)

RPC_VERS = 5
RPC_VERS_MINOR = 0
# packed_drep: little-endian integers, ASCII characters, IEEE floats (C706 14.1; NDR64 requires it, MS-RPCE 2.2.5)
DREP_LE_ASCII_IEEE = b"\x10\x00\x00\x00"

# rpc_vers, rpc_vers_minor, PTYPE, pfc_flags, drep[0], drep[1], (drep[2..3] skipped), frag_length, auth_length, call_id
HEADER = struct.Struct("<BBBBBBxxHHI")
HEADER_SIZE = HEADER.size                      # 16
_HEADER_OUT = struct.Struct("<BBBB4sHHI")
REQUEST_FIELDS = struct.Struct("<IHH")         # alloc_hint, p_cont_id, opnum (C706 12.6.4.9)
REQUEST_HEADER_SIZE = 24
RESPONSE_HEADER = struct.Struct("<BBBB4sHHIIHBB")  # common header + alloc_hint, p_cont_id, cancel_count, reserved
RESPONSE_HEADER_SIZE = RESPONSE_HEADER.size    # 24
FAULT_SIZE = 32
FAULT_ALLOC_HINT = 24                          # Samba dcesrv_fault_with_flags; Windows sends a non-zero value
SEC_TRAILER = struct.Struct("<BBBBI")          # auth_type, auth_level, auth_pad_length, auth_reserved, auth_context_id
SEC_TRAILER_SIZE = SEC_TRAILER.size            # 8
_SYNTAX = struct.Struct("<16sHH")
SYNTAX_SIZE = _SYNTAX.size                     # 20
_BIND_FIXED = struct.Struct("<HHIB3x")         # max_xmit_frag, max_recv_frag, assoc_group_id, n_context_elem
_ITEM_FIXED = struct.Struct("<HBx")            # p_cont_id, n_transfer_syn, reserved
_RESULT = struct.Struct("<HH")
_ZERO_SYNTAX = bytes(SYNTAX_SIZE)


class PduError(Exception):
    """A PDU body that cannot be decoded; ``str()`` says which field was wrong."""


@dataclass(frozen=True, slots=True)
class BindBody:
    """Decoded rpc_bind / rpc_alter_context body (C706 12.6.4.3)."""
    max_xmit_frag: int
    max_recv_frag: int
    assoc_group_id: int
    items: tuple[ContextItem, ...]


@dataclass(frozen=True, slots=True)
class SecTrailer:
    """sec_trailer / auth_verifier_co_t (MS-RPCE 2.2.2.11)."""
    auth_type: int
    auth_level: int
    auth_pad_length: int
    auth_context_id: int


def encode_syntax(syntax: SyntaxId | None) -> bytes:
    """p_syntax_id_t: GUID in wire byte order + u16 major + u16 minor (C706 12.6.3.1); None → 20 zero bytes."""
    if syntax is None:
        return _ZERO_SYNTAX
    return _SYNTAX.pack(syntax[0].bytes_le, syntax[1], syntax[2])


def decode_syntax(buf: bytes | bytearray | memoryview, offset: int) -> SyntaxId:
    """Inverse of encode_syntax (C706 12.6.3.1)."""
    raw, major, minor = _SYNTAX.unpack_from(buf, offset)
    return (uuid.UUID(bytes_le=bytes(raw)), major, minor)


def pack_header(ptype: int, flags: int, frag_length: int, call_id: int, auth_length: int = 0) -> bytes:
    """The 16-byte common header (C706 12.6.3.1) with little-endian drep."""
    return _HEADER_OUT.pack(RPC_VERS, RPC_VERS_MINOR, ptype, flags, DREP_LE_ASCII_IEEE, frag_length, auth_length,
                            call_id)


def parse_sec_trailer(pdu: bytes | bytearray | memoryview, frag_length: int, auth_length: int) -> SecTrailer:
    """The sec_trailer at frag_length − auth_length − 8 (MS-RPCE 2.2.2.11); PduError if it cannot fit."""
    start = frag_length - auth_length - SEC_TRAILER_SIZE
    if start < HEADER_SIZE:
        raise PduError(f"auth_length {auth_length} does not fit in frag_length {frag_length}")
    auth_type, auth_level, pad, _reserved, ctx_id = SEC_TRAILER.unpack_from(pdu, start)
    return SecTrailer(auth_type, auth_level, pad, ctx_id)


def parse_bind_body(pdu: bytes | bytearray | memoryview, end: int) -> BindBody:
    """Decode a bind / alter_context PDU body between offset 16 and ``end`` (C706 12.6.4.3, p_cont_list_t)."""
    if end >= HEADER_SIZE + 9 and pdu[HEADER_SIZE + 8] == 0:
        # an empty p_cont_list (answered with bind_nak 0); Samba's encoder omits its reserved bytes
        max_xmit, max_recv, group = struct.unpack_from("<HHI", pdu, HEADER_SIZE)
        return BindBody(max_xmit, max_recv, group, ())
    if end < HEADER_SIZE + _BIND_FIXED.size:
        raise PduError(f"bind body truncated: {end - HEADER_SIZE} bytes, need {_BIND_FIXED.size}")
    max_xmit, max_recv, group, count = _BIND_FIXED.unpack_from(pdu, HEADER_SIZE)
    items = []
    pos = HEADER_SIZE + _BIND_FIXED.size
    for index in range(count):
        if pos + _ITEM_FIXED.size + SYNTAX_SIZE > end:
            raise PduError(f"context item {index} truncated")
        context_id, n_syntaxes, = _ITEM_FIXED.unpack_from(pdu, pos)
        abstract = decode_syntax(pdu, pos + _ITEM_FIXED.size)
        pos += _ITEM_FIXED.size + SYNTAX_SIZE
        if pos + n_syntaxes * SYNTAX_SIZE > end:
            raise PduError(f"context item {index} (p_cont_id {context_id}) transfer syntaxes truncated")
        syntaxes = tuple(decode_syntax(pdu, pos + i * SYNTAX_SIZE) for i in range(n_syntaxes))
        pos += n_syntaxes * SYNTAX_SIZE
        items.append(ContextItem(context_id, abstract, syntaxes))
    return BindBody(max_xmit, max_recv, group, tuple(items))


def build_bind_ack(call_id: int, *, alter_context: bool, max_xmit_frag: int, max_recv_frag: int,
                   assoc_group_id: int, secondary_address: str,
                   results: Sequence[tuple[int, int, SyntaxId | None]], flags: int = PFC_FIRST_FRAG | PFC_LAST_FRAG,
                   auth: tuple[int, int, int, bytes] | None = None) -> bytes:
    """rpc_bind_ack / rpc_alter_context_resp (C706 12.6.4.4): port_any_t secondary address, 4-aligned result list.

    An empty ``secondary_address`` is sent as length 0 with no bytes (alter_context_resp, as Windows/Samba).
    ``auth`` = (auth_type, auth_level, auth_context_id, token) appends the sec_trailer and auth_value
    (MS-RPCE 2.2.2.11), the body padded to 4 before it."""
    addr = secondary_address.encode("ascii") + b"\x00" if secondary_address else b""
    body = bytearray(struct.pack("<HHIH", max_xmit_frag, max_recv_frag, assoc_group_id, len(addr)))
    body += addr
    body += bytes(-(HEADER_SIZE + len(body)) % 4)
    body += struct.pack("<B3x", len(results))
    for result, reason, syntax in results:
        body += _RESULT.pack(result, reason)
        body += encode_syntax(syntax)
    ptype = PTYPE_ALTER_CONTEXT_RESP if alter_context else PTYPE_BIND_ACK
    auth_length = 0
    if auth is not None:
        auth_type, auth_level, context_id, token = auth
        pad = -(HEADER_SIZE + len(body)) % 4
        body += bytes(pad) + SEC_TRAILER.pack(auth_type, auth_level, pad, 0, context_id) + token
        auth_length = len(token)
    return pack_header(ptype, flags, HEADER_SIZE + len(body), call_id, auth_length) + bytes(body)


def build_bind_nak(call_id: int, reason: int) -> bytes:
    """rpc_bind_nak (C706 12.6.4.5, MS-RPCE 2.2.2.9): reject reason + p_rt_versions_supported_t {5.0}, padded to 24."""
    body = struct.pack("<HBBB3x", reason, 1, RPC_VERS, RPC_VERS_MINOR)
    return pack_header(PTYPE_BIND_NAK, PFC_FIRST_FRAG | PFC_LAST_FRAG, HEADER_SIZE + len(body), call_id) + body


def build_fault(call_id: int, status: int, *, context_id: int = 0, cancel_count: int = 0,
                did_not_execute: bool = False) -> bytes:
    """rpc_fault (C706 12.6.4.7, MS-RPCE 2.2.2.8): no stub; alloc_hint 24 and p_cont_id as Samba's dcesrv_fault."""
    flags = PFC_FIRST_FRAG | PFC_LAST_FRAG | (PFC_DID_NOT_EXECUTE if did_not_execute else 0)
    return (RESPONSE_HEADER.pack(RPC_VERS, RPC_VERS_MINOR, PTYPE_FAULT, flags, DREP_LE_ASCII_IEEE, FAULT_SIZE, 0,
                                 call_id, FAULT_ALLOC_HINT, context_id & 0xFFFF, cancel_count & 0xFF, 0)
            + struct.pack("<II", status, 0))


def response_chunk_size(max_xmit_frag: int) -> int:
    """Stub bytes per response fragment: max_xmit_frag − 24 rounded down to 16 (Samba; MS-RPCE 2.2.2.11)."""
    chunk = max_xmit_frag - RESPONSE_HEADER_SIZE
    return chunk - chunk % 16


def one_fragment_response_header(call_id: int, context_id: int, stub_length: int) -> bytes:
    """The header of a response whose whole stub fits one fragment (C706 12.6.4.10): alloc_hint is the stub length
    (MS-RPCE 2.2.2.6), p_cont_id modulo 256 as Windows/Samba write it."""
    return RESPONSE_HEADER.pack(RPC_VERS, RPC_VERS_MINOR, PTYPE_RESPONSE, PFC_FIRST_FRAG | PFC_LAST_FRAG,
                                DREP_LE_ASCII_IEEE, RESPONSE_HEADER_SIZE + stub_length, 0, call_id, stub_length,
                                context_id & 0xFF, 0, 0)


def append_response(out: bytearray, call_id: int, context_id: int, stub: bytes | bytearray | memoryview,
                    max_xmit_frag: int) -> int:
    """Append the response PDUs for ``stub`` to ``out``, fragmented at max_xmit_frag (C706 12.6.4.10); returns
    how many.

    Each fragment's alloc_hint is the stub bytes remaining from it on (MS-RPCE 2.2.2.6); p_cont_id is written
    modulo 256 as Windows/Samba do."""
    total = len(stub)
    ctx8 = context_id & 0xFF
    chunk = response_chunk_size(max_xmit_frag)
    if total <= chunk:
        out += one_fragment_response_header(call_id, context_id, total)
        out += stub
        return 1
    view = memoryview(stub)
    pos = 0
    pack = RESPONSE_HEADER.pack
    count = 0
    while pos < total:
        n = min(chunk, total - pos)
        flags = (PFC_FIRST_FRAG if pos == 0 else 0) | (PFC_LAST_FRAG if pos + n == total else 0)
        out += pack(RPC_VERS, RPC_VERS_MINOR, PTYPE_RESPONSE, flags, DREP_LE_ASCII_IEEE, RESPONSE_HEADER_SIZE + n, 0,
                    call_id, total - pos, ctx8, 0, 0)
        out += view[pos:pos + n]
        pos += n
        count += 1
    return count


def build_header_only(ptype: int, call_id: int, flags: int = PFC_FIRST_FRAG | PFC_LAST_FRAG) -> bytes:
    """A body-less PDU: shutdown (12.6.4.11), co_cancel (12.6.4.6), orphaned (12.6.4.8) without auth verifier."""
    return pack_header(ptype, flags, HEADER_SIZE, call_id)


# --- client-side builders (used by the client, scripts and tests; the server never sends these) ---

def build_bind(call_id: int, items: Sequence[ContextItem], *, alter_context: bool = False,
               max_xmit_frag: int = 5840, max_recv_frag: int = 5840, assoc_group_id: int = 0,
               flags: int = PFC_FIRST_FRAG | PFC_LAST_FRAG) -> bytes:
    """rpc_bind / rpc_alter_context without authentication (C706 12.6.4.3); an item may offer several syntaxes."""
    body = bytearray(_BIND_FIXED.pack(max_xmit_frag, max_recv_frag, assoc_group_id, len(items)))
    for item in items:
        body += _ITEM_FIXED.pack(item.context_id, len(item.transfer_syntaxes))
        body += encode_syntax(item.abstract_syntax)
        for syntax in item.transfer_syntaxes:
            body += encode_syntax(syntax)
    ptype = PTYPE_ALTER_CONTEXT if alter_context else PTYPE_BIND
    return pack_header(ptype, flags, HEADER_SIZE + len(body), call_id) + bytes(body)


def build_request(call_id: int, context_id: int, opnum: int, stub: bytes, *, object_uuid: uuid.UUID | None = None,
                  flags: int = PFC_FIRST_FRAG | PFC_LAST_FRAG, alloc_hint: int | None = None) -> bytes:
    """One rpc_request fragment (C706 12.6.4.9); PFC_OBJECT_UUID is set when object_uuid is given."""
    obj = b""
    if object_uuid is not None:
        flags |= PFC_OBJECT_UUID
        obj = object_uuid.bytes_le
    length = REQUEST_HEADER_SIZE + len(obj) + len(stub)
    return (pack_header(PTYPE_REQUEST, flags, length, call_id)
            + REQUEST_FIELDS.pack(len(stub) if alloc_hint is None else alloc_hint, context_id, opnum) + obj + stub)


def fragment_request(call_id: int, context_id: int, opnum: int, stub: bytes, max_xmit_frag: int) -> list[bytes]:
    """A request split into fragments with alloc_hint = bytes remaining (MS-RPCE 2.2.2.6)."""
    chunk = response_chunk_size(max_xmit_frag)
    if len(stub) <= chunk:
        return [build_request(call_id, context_id, opnum, stub)]
    out = []
    for pos in range(0, len(stub), chunk):
        part = stub[pos:pos + chunk]
        flags = (PFC_FIRST_FRAG if pos == 0 else 0) | (PFC_LAST_FRAG if pos + len(part) == len(stub) else 0)
        out.append(build_request(call_id, context_id, opnum, part, flags=flags, alloc_hint=len(stub) - pos))
    return out


# --- read-side parsers of the PDUs a server sends (the client and the capture reader; the server never parses
# these). Appended here so every reader of the wire shares one set of header and trailer layouts. ---

_BIND_ACK_FIXED = struct.Struct("<HHIH")       # max_xmit_frag, max_recv_frag, assoc_group_id, sec_addr length
_FAULT_STATUS = struct.Struct("<I")            # rpc_fault status, after the 24-byte response-style header


@dataclass(frozen=True, slots=True)
class BindAckBody:
    """Decoded rpc_bind_ack / rpc_alter_context_resp body (C706 12.6.4.4): results are (result, reason, syntax)."""
    max_xmit_frag: int
    max_recv_frag: int
    assoc_group_id: int
    secondary_address: bytes
    results: tuple[tuple[int, int, SyntaxId], ...]


def parse_bind_ack_body(pdu: bytes | bytearray | memoryview, end: int) -> BindAckBody:
    """Decode a bind_ack / alter_context_resp body between offset 16 and ``end`` (C706 12.6.4.4, port_any_t
    secondary address, 4-aligned p_result_list_t); PduError names the field that does not fit."""
    if end < HEADER_SIZE + _BIND_ACK_FIXED.size:
        raise PduError(f"bind_ack body truncated: {end - HEADER_SIZE} bytes, need {_BIND_ACK_FIXED.size}")
    max_xmit, max_recv, group, addr_len = _BIND_ACK_FIXED.unpack_from(pdu, HEADER_SIZE)
    pos = HEADER_SIZE + _BIND_ACK_FIXED.size
    if pos + addr_len > end:
        raise PduError(f"bind_ack secondary address length {addr_len} exceeds the PDU")
    address = bytes(pdu[pos:pos + addr_len])
    pos += addr_len
    pos += -pos % 4
    if pos + 4 > end:
        raise PduError("bind_ack result list truncated")
    count = pdu[pos]
    pos += 4
    if pos + count * (_RESULT.size + SYNTAX_SIZE) > end:
        raise PduError(f"bind_ack has {count} results, the PDU holds {(end - pos) // (_RESULT.size + SYNTAX_SIZE)}")
    results = []
    for _ in range(count):
        result, reason = _RESULT.unpack_from(pdu, pos)
        results.append((result, reason, decode_syntax(pdu, pos + _RESULT.size)))
        pos += _RESULT.size + SYNTAX_SIZE
    return BindAckBody(max_xmit, max_recv, group, address, tuple(results))


def stub_bounds(pdu: bytes | bytearray | memoryview, stub_offset: int) -> tuple[int, int, SecTrailer | None]:
    """(start, end, sec_trailer or None) of the stub of a request/response PDU: the auth verifier and the auth
    padding before it are cut off (MS-RPCE 2.2.2.11); PduError if the trailer overlaps the PDU's own header."""
    frag_length, auth_length = struct.unpack_from("<HH", pdu, 8)
    if not auth_length:
        return stub_offset, frag_length, None
    trailer = parse_sec_trailer(pdu, frag_length, auth_length)
    start = frag_length - auth_length - SEC_TRAILER_SIZE
    if start < stub_offset:
        raise PduError(f"auth_length {auth_length} does not fit in frag_length {frag_length}")
    return stub_offset, max(stub_offset, start - trailer.auth_pad_length), trailer


def parse_fault_status(pdu: bytes | bytearray | memoryview) -> int:
    """The status of an rpc_fault PDU (C706 12.6.4.7; values MS-RPCE 2.2.2.8 / MS-ERREF)."""
    if len(pdu) < RESPONSE_HEADER_SIZE + _FAULT_STATUS.size:
        raise PduError(f"fault PDU of {len(pdu)} bytes has no status")
    return _FAULT_STATUS.unpack_from(pdu, RESPONSE_HEADER_SIZE)[0]
