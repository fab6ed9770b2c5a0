"""Malformed and out-of-sequence input, one row per case, each with its specific answer (MS-RPCE 3.3.3.5; C706 12.6)."""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

import pytest

from qm2qm.rpc import faults as F
from qm2qm.rpc import pdu as P
from qm2qm.rpc.events import CallRequest, ConnectionTerminated, ContextItem
from tests.rpc.test_connection import BTFN3, IFACE, NDR, bind, new_connection, split_pdus

FL = F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG
ITEM = ContextItem(0, IFACE, (NDR,))


def header(ptype, flags=FL, frag_length=None, auth_length=0, call_id=1, vers=5, minor=0,
           drep=b"\x10\x00\x00\x00", body=b""):
    length = 16 + len(body) if frag_length is None else frag_length
    return struct.pack("<BBBB4sHHI", vers, minor, ptype, flags, drep, length, auth_length, call_id) + body


def request(call_id=1, ctx=0, opnum=1, stub=b"", flags=FL, alloc_hint=None, **kw):
    body = struct.pack("<IHH", len(stub) if alloc_hint is None else alloc_hint, ctx, opnum) + stub
    return header(F.PTYPE_REQUEST, flags=flags, call_id=call_id, body=body, **kw)


def bind_pdu(items=(ITEM,), call_id=1, **kw):
    raw = P.build_bind(call_id, items, **kw)
    return raw


def with_auth(raw: bytes, auth_type: int, auth_level: int, token: bytes = b"T" * 16) -> bytes:
    trailer = struct.pack("<BBBBI", auth_type, auth_level, 0, 0, 1)
    body = raw[16:] + trailer + token
    return header(raw[2], flags=raw[3], auth_length=len(token), call_id=struct.unpack_from("<I", raw, 12)[0],
                  body=body)


def raw_bind(count: int, items: bytes) -> bytes:
    return header(F.PTYPE_BIND, body=struct.pack("<HHIB3x", 5840, 5840, 0, count) + items)


# Expected answers
@dataclass(frozen=True)
class Nak:
    reason: int


@dataclass(frozen=True)
class Fault:
    call_id: int
    status: int
    did_not_execute: bool
    closes: bool
    context_id: int = 0


@dataclass(frozen=True)
class Close:                 # ConnectionTerminated without any reply
    pass


@dataclass(frozen=True)
class Silent:                # no event, no reply, connection open (waiting for more bytes or dropped)
    pass


@dataclass(frozen=True)
class Case:
    name: str
    bound: bool              # bind first (accepted) before sending data
    data: bytes
    expect: object


FRAG = F.PFC_FIRST_FRAG
LAST = F.PFC_LAST_FRAG
CASES = [
    # framing / header
    Case("truncated header waits", False, bind_pdu()[:10], Silent()),
    Case("truncated body waits", True, request(stub=b"x" * 40)[:50], Silent()),
    Case("frag_length below header", True, header(F.PTYPE_REQUEST, frag_length=8), Close()),
    Case("frag_length zero", False, header(F.PTYPE_BIND, frag_length=0), Close()),
    Case("request frag_length above max_frag", True, header(F.PTYPE_REQUEST, frag_length=5841, call_id=4),
         Fault(4, F.NCA_S_PROTO_ERROR, False, True)),
    Case("request frag_length below request header", True, header(F.PTYPE_REQUEST, frag_length=20, call_id=4,
                                                                  body=b"\x00" * 4),
         Fault(4, F.NCA_S_PROTO_ERROR, True, True)),
    Case("rpc_vers 4 bind", False, header(F.PTYPE_BIND, vers=4), Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    Case("rpc_vers_minor 1 bind", False, bind_pdu()[:1] + b"\x01" + bind_pdu()[2:],
         Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    Case("rpc_vers_minor 1 request", True, request(call_id=3, minor=1), Fault(3, F.NCA_S_PROTO_ERROR, True, True)),
    Case("rpc_vers_minor 2 bind", False, bind_pdu()[:1] + b"\x02" + bind_pdu()[2:],
         Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    Case("rpc_vers 6 request", True, request(vers=6), Close()),
    Case("rpc_vers_minor 3 request", True, request(call_id=3, minor=3), Fault(3, F.NCA_S_PROTO_ERROR, True, True)),
    Case("not RPC at all", False, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", Close()),
    Case("big-endian drep bind", False, header(F.PTYPE_BIND, drep=b"\x00\x00\x00\x00", call_id=0x01000000),
         Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    Case("EBCDIC drep request", True, request(call_id=2, drep=b"\x11\x00\x00\x00"),
         Fault(2, F.NCA_S_PROTO_ERROR, True, True)),
    Case("VAX float drep request", True, request(call_id=2, drep=b"\x10\x01\x00\x00"),
         Fault(2, F.NCA_S_PROTO_ERROR, True, True)),
    Case("auth_length larger than the PDU", True, request(call_id=6, auth_length=200),
         Fault(6, F.NCA_S_PROTO_ERROR, True, True)),
    Case("bind auth_length larger than the PDU", False, header(F.PTYPE_BIND, auth_length=100, body=bytes(12)),
         Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    # sequencing
    Case("request before bind", False, request(call_id=9), Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    Case("alter_context before bind", False, bind_pdu(alter_context=True, call_id=2),
         Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    Case("co_cancel before bind", False, header(F.PTYPE_CO_CANCEL, call_id=3),
         Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    Case("request with rpc_vers_minor 1 before bind", False, request(call_id=9, minor=1),
         Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    Case("request with EBCDIC drep before bind", False, request(call_id=9, drep=b"\x11\x00\x00\x00"),
         Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    Case("large request before bind", False, request(call_id=9, stub=bytes(7000)),
         Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    Case("second bind", True, bind_pdu(call_id=2), Nak(F.BIND_NAK_REASON_NOT_SPECIFIED)),
    Case("shutdown from client", True, header(F.PTYPE_SHUTDOWN, call_id=5), Fault(5, F.NCA_S_PROTO_ERROR, True, True)),
    Case("rpc_auth_3 without auth", True, header(F.PTYPE_AUTH3, call_id=5, auth_length=4,
                                                 body=bytes(4) + struct.pack("<BBBBI", 10, 6, 0, 0, 0) + bytes(4)),
         Fault(5, F.NCA_S_PROTO_ERROR, True, True)),
    Case("bind_ack from client", True, header(F.PTYPE_BIND_ACK, call_id=5), Fault(5, F.NCA_S_PROTO_ERROR, True, True)),
    Case("response from client", True, header(F.PTYPE_RESPONSE, call_id=5, body=bytes(8)),
         Fault(5, F.NCA_S_PROTO_ERROR, True, True)),
    Case("unknown PTYPE", True, header(99, call_id=5), Fault(5, F.NCA_S_PROTO_ERROR, True, True)),
    # bind bodies
    Case("bind with zero items", False, raw_bind(0, b""), Nak(F.BIND_NAK_REASON_NOT_SPECIFIED)),
    Case("bind item without transfer syntax", False,
         raw_bind(1, struct.pack("<HBx", 0, 0) + P.encode_syntax(IFACE)),
         Nak(F.BIND_NAK_REASON_NOT_SPECIFIED)),
    Case("bind items truncated", False, raw_bind(3, struct.pack("<HBx", 0, 1) + P.encode_syntax(IFACE)),
         Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    Case("bind body shorter than fixed part", False, header(F.PTYPE_BIND, body=bytes(6)),
         Nak(F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)),
    Case("two BTFN items", False, bind_pdu((ITEM, ContextItem(1, IFACE, (BTFN3,)), ContextItem(2, IFACE, (BTFN3,)))),
         Nak(F.BIND_NAK_REASON_NOT_SPECIFIED)),
    Case("bind asking for NTLM privacy", False, with_auth(bind_pdu(), 10, 6),
         Nak(F.BIND_NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED)),
    Case("bind asking for Kerberos connect", False, with_auth(bind_pdu(), 16, 2),
         Nak(F.BIND_NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED)),
    Case("bind with invalid auth level 7", False, with_auth(bind_pdu(), 10, 7), Nak(F.BIND_NAK_REASON_NOT_SPECIFIED)),
    Case("bind with auth level none", False, with_auth(bind_pdu(), 0, 1), Nak(F.BIND_NAK_REASON_NOT_SPECIFIED)),
    Case("alter_context with zero items", True, header(F.PTYPE_ALTER_CONTEXT, call_id=2,
                                                       body=struct.pack("<HHIB3x", 5840, 5840, 0, 0)),
         Fault(2, F.NCA_S_PROTO_ERROR, True, True)),
    Case("alter_context asking for auth", True, with_auth(bind_pdu(alter_context=True, call_id=2), 10, 6),
         Fault(2, F.RPC_S_UNKNOWN_AUTHN_SERVICE, True, True)),
    Case("alter_context item without transfer syntax", True,
         header(F.PTYPE_ALTER_CONTEXT, call_id=2, body=struct.pack("<HHIB3x", 5840, 5840, 0, 1)
                + struct.pack("<HBx", 1, 0) + P.encode_syntax(IFACE)),
         Fault(2, F.NCA_S_PROTO_ERROR, True, True)),
    # requests
    Case("unknown context id", True, request(call_id=7, ctx=9), Fault(7, F.NCA_S_UNK_IF, True, False)),
    Case("opnum out of range", True, request(call_id=7, opnum=11), Fault(7, F.NCA_S_OP_RNG_ERROR, True, False)),
    Case("stray auth trailer on request", True,
         request(call_id=7, stub=bytes(8) + struct.pack("<BBBBI", 10, 6, 0, 0, 0) + bytes(16), auth_length=16,
                 frag_length=24 + 8 + 8 + 16),
         Fault(7, F.RPC_S_ACCESS_DENIED, False, True)),
    Case("oversized alloc_hint", True, request(call_id=8, alloc_hint=0xFFFFFFFF, flags=FRAG),
         Fault(8, F.RPC_S_ACCESS_DENIED, False, True)),
    Case("PENDING_CANCEL on first fragment", True, request(call_id=8, flags=FL | F.PFC_PENDING_CANCEL),
         Fault(8, F.RPC_S_NO_CALL_ACTIVE, True, True)),
    Case("object UUID flag without room for it", True,
         request(call_id=8, flags=FL | F.PFC_OBJECT_UUID, stub=b"1234"),
         Fault(8, F.NCA_S_PROTO_ERROR, True, True)),
    Case("oversized alloc_hint on a later fragment", True,
         request(call_id=8, flags=FRAG, stub=b"ab") + request(call_id=8, flags=0, alloc_hint=8 * 1024 * 1024 + 1),
         Fault(8, F.RPC_S_ACCESS_DENIED, False, True)),
    Case("huge alloc_hint on a single-fragment request is only a hint", True,
         request(call_id=8, alloc_hint=0xFFFFFFFF), Silent()),
    Case("middle fragment without a first", True, request(call_id=500, flags=0),
         Fault(500, F.NCA_S_PROTO_ERROR, False, True)),
    Case("last fragment without a first", True, request(call_id=500, flags=LAST),
         Fault(500, F.NCA_S_PROTO_ERROR, False, True)),
    Case("interleaved first fragments", True, request(call_id=1, flags=FRAG) + request(call_id=2, flags=FRAG),
         Fault(1, F.NCA_S_PROTO_ERROR, False, True)),
    Case("the same call's first fragment again", True, request(call_id=1, flags=FRAG) * 2,
         Fault(1, F.NCA_S_PROTO_ERROR, False, True)),
    Case("a whole request under the call_id being reassembled", True,
         request(call_id=1, flags=FRAG) + request(call_id=1, flags=FL), Fault(1, F.NCA_S_PROTO_ERROR, False, True)),
    Case("fragment of another call mid-reassembly", True, request(call_id=1, flags=FRAG) + request(call_id=2, flags=0),
         Fault(1, F.NCA_S_PROTO_ERROR, False, True)),
    Case("call_id reused while outstanding", True, request(call_id=3) + request(call_id=3),
         Fault(3, F.NCA_S_PROTO_ERROR, True, True)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_malformed_input_gets_its_specific_answer(case: Case):
    conn = new_connection()
    if case.bound:
        bind(conn, call_id=100)
    events = conn.receive_data(case.data)
    out = conn.data_to_send()
    expect = case.expect
    terminated = [e for e in events if isinstance(e, ConnectionTerminated)]
    if isinstance(expect, Silent):
        assert not terminated and not conn.closed and out == b""
        assert not [e for e in events if not isinstance(e, CallRequest)]
        return
    if isinstance(expect, Close):
        assert terminated and conn.closed and out == b""
        return
    if isinstance(expect, Nak):
        assert terminated and conn.closed
        (pdu,) = split_pdus(out)
        assert pdu[2] == F.PTYPE_BIND_NAK
        assert struct.unpack_from("<HBBB", pdu, 16) == (expect.reason, 1, 5, 0)
        return
    faults = [p for p in split_pdus(out) if p[2] == F.PTYPE_FAULT]
    assert faults, out
    pdu = faults[-1]
    call_id, = struct.unpack_from("<I", pdu, 12)
    status, = struct.unpack_from("<I", pdu, 24)
    assert (call_id, status) == (expect.call_id, expect.status)
    assert bool(pdu[3] & F.PFC_DID_NOT_EXECUTE) == expect.did_not_execute
    assert struct.unpack_from("<H", pdu, 20)[0] == expect.context_id
    assert conn.closed == expect.closes
    assert bool(terminated) == expect.closes
    if terminated:
        assert terminated[0].reason          # a readable reason for the log


@pytest.mark.parametrize("again", [FRAG, FL], ids=["first", "first+last"])
def test_a_second_first_fragment_of_one_call_runs_nothing_and_nothing_after_it(again):
    """MS-RPCE 3.3.3.5.2 / 3.3.3.5.7: first-only, first(+last) again, then last of call 1 used to dispatch the call
    twice (the second first fragment replaced the call being reassembled); now the connection ends at it."""
    conn = new_connection()
    bind(conn)
    events = conn.receive_data(request(call_id=1, flags=FRAG) + request(call_id=1, flags=again)
                               + request(call_id=1, flags=LAST))
    assert [type(e) for e in events] == [ConnectionTerminated]
    assert "second first fragment" in events[0].reason


def test_unknown_context_fault_then_the_tail_fragments_are_dropped_and_connection_continues():
    conn = new_connection()
    bind(conn)
    frags = P.fragment_request(10, 9, 1, bytes(9000), 2048)
    assert conn.receive_data(frags[0]) == []
    assert struct.unpack_from("<I", conn.data_to_send(), 24)[0] == F.NCA_S_UNK_IF
    assert conn.receive_data(b"".join(frags[1:])) == []
    assert conn.data_to_send() == b"" and not conn.closed
    assert conn.receive_data(P.build_request(11, 0, 1, b"ok"))[0].stub == b"ok"


def test_old_call_fragment_within_window_is_ignored_beyond_it_is_an_error():
    conn = new_connection()
    bind(conn)
    conn.receive_data(P.build_request(400, 0, 1, b""))
    conn.send_response(400, b"")
    conn.data_to_send()
    assert conn.receive_data(request(call_id=300, flags=LAST)) == []            # 100 behind: dropped
    assert conn.data_to_send() == b"" and not conn.closed
    events = conn.receive_data(request(call_id=200, flags=LAST))                 # 200 behind: protocol error
    assert isinstance(events[-1], ConnectionTerminated)
    assert struct.unpack_from("<I", conn.data_to_send(), 24)[0] == F.NCA_S_PROTO_ERROR


def test_nothing_is_parsed_after_termination_even_in_the_same_read():
    conn = new_connection()
    bind(conn)
    events = conn.receive_data(header(F.PTYPE_SHUTDOWN, call_id=5) + P.build_request(6, 0, 1, b""))
    assert [type(e) for e in events] == [ConnectionTerminated]


def test_buffered_bytes_are_bounded_by_the_fragment_limit():
    conn = new_connection()
    bind(conn)
    partial = request(stub=bytes(5816))[:-1]                                     # 5839 of 5840 bytes
    assert conn.receive_data(partial) == [] and not conn.closed
    assert len(conn._buf) <= 5840
    events = conn.receive_data(request(stub=bytes(5816))[-1:] + header(F.PTYPE_REQUEST, frag_length=6000))
    # the pending PDU completes; the next header claims 6000 > 5840 and is refused before its body is awaited
    assert [type(e) for e in events] == [CallRequest, ConnectionTerminated]


def test_bind_with_object_uuid_like_garbage_in_reserved_fields_is_still_parsed():
    raw = bytearray(P.build_bind(1, (ITEM,)))
    raw[25:28] = b"\xff\xff\xff"                     # reserved bytes after n_context_elem
    raw[31] = 0xEE                                   # item reserved byte
    conn = new_connection()
    (request_event,) = conn.receive_data(bytes(raw))
    assert request_event.items == (ITEM,)


def test_later_fragments_p_cont_id_and_opnum_are_ignored():
    conn = new_connection()
    bind(conn)
    events = conn.receive_data(request(call_id=1, opnum=3, stub=b"ab", flags=FRAG)
                               + request(call_id=1, ctx=7, opnum=9, stub=b"cd", flags=LAST))
    assert [(e.opnum, e.context_id, e.stub) for e in events] == [(3, 0, b"abcd")]


def test_object_uuid_value_reaches_the_event():
    conn = new_connection()
    bind(conn)
    obj = uuid.UUID("11111111-2222-3333-4444-555555555555")
    (call,) = conn.receive_data(P.build_request(2, 0, 1, b"s", object_uuid=obj))
    assert call.object_uuid == obj and call.stub == b"s"
