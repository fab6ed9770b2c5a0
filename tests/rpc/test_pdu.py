"""PDU encodings checked against impacket's structures, both directions (C706 12.6; MS-RPCE 2.2.2)."""
from __future__ import annotations

import struct
import uuid

import pytest
from impacket.dcerpc.v5 import rpcrt
from impacket.uuid import uuidtup_to_bin

from qm2qm.rpc import faults as F
from qm2qm.rpc import pdu as P
from qm2qm.rpc.events import ContextItem
from qm2qm.rpc.interface import NDR20, NDR64

IFACE = (uuid.UUID("1088a980-eae5-11d0-8d9b-00a02453c337"), 1, 0)
NDR = (NDR20[0], 2, 0)
N64 = (NDR64[0], 1, 0)
BTFN = (uuid.UUID("6cb71c2c-9812-4540-0300-000000000000"), 1, 0)


def test_syntax_id_matches_impacket_uuidtup_to_bin():
    assert P.encode_syntax(NDR) == uuidtup_to_bin(("8a885d04-1ceb-11c9-9fe8-08002b104860", "2.0"))
    assert P.encode_syntax(N64) == rpcrt.DCERPC.NDR64Syntax
    assert P.decode_syntax(P.encode_syntax(IFACE), 0) == IFACE
    assert P.encode_syntax(None) == bytes(20)


def test_bind_built_by_impacket_is_parsed():
    bind = rpcrt.MSRPCBind()
    bind["max_tfrag"] = 4280
    bind["max_rfrag"] = 5840
    bind["assoc_group"] = 0x11223344
    for ctx_id, syntax in ((0, NDR), (1, N64)):
        item = rpcrt.CtxItem()
        item["ContextID"] = ctx_id
        item["TransItems"] = 1
        item["AbstractSyntax"] = P.encode_syntax(IFACE)
        item["TransferSyntax"] = P.encode_syntax(syntax)
        bind.addCtxItem(item)
    header = rpcrt.MSRPCHeader()
    header["type"] = rpcrt.MSRPC_BIND
    header["call_id"] = 3
    header["pduData"] = bind.getData()
    raw = header.get_packet()
    body = P.parse_bind_body(raw, len(raw))
    assert (body.max_xmit_frag, body.max_recv_frag, body.assoc_group_id) == (4280, 5840, 0x11223344)
    assert body.items == (ContextItem(0, IFACE, (NDR,)), ContextItem(1, IFACE, (N64,)))


def test_bind_built_here_is_parsed_by_impacket_and_back():
    items = (ContextItem(0, IFACE, (NDR,)), ContextItem(1, IFACE, (N64,)), ContextItem(2, IFACE, (BTFN,)))
    raw = P.build_bind(5, items, max_xmit_frag=5840, max_recv_frag=4280, assoc_group_id=7)
    header = rpcrt.MSRPCHeader(raw)
    assert (header["type"], header["call_id"], header["frag_len"]) == (rpcrt.MSRPC_BIND, 5, len(raw))
    parsed = rpcrt.MSRPCRelayBind(header["pduData"])
    assert [i["ContextID"] for i in parsed.getCtxItems()] == [0, 1, 2]
    assert parsed.getCtxItems()[2]["TransferSyntax"] == P.encode_syntax(BTFN)
    assert P.parse_bind_body(raw, len(raw)).items == items


def test_bind_item_with_several_transfer_syntaxes_round_trips():
    items = (ContextItem(4, IFACE, (NDR, N64)),)
    raw = P.build_bind(1, items, alter_context=True)
    assert raw[2] == F.PTYPE_ALTER_CONTEXT
    assert P.parse_bind_body(raw, len(raw)).items == items


@pytest.mark.parametrize("cut", [20, 27, 28 + 10, 28 + 43])
def test_truncated_bind_body_names_the_problem(cut):
    raw = P.build_bind(1, (ContextItem(0, IFACE, (NDR,)),))
    with pytest.raises(P.PduError):
        P.parse_bind_body(raw, cut)


def test_bind_ack_parsed_by_impacket():
    raw = P.build_bind_ack(9, alter_context=False, max_xmit_frag=5840, max_recv_frag=5840, assoc_group_id=0xABCDEF,
                           secondary_address="2105",
                           results=[(2, 2, None), (0, 0, N64), (3, 2, None)])
    ack = rpcrt.MSRPCBindAck(raw)
    assert (ack["type"], ack["call_id"], ack["frag_len"]) == (rpcrt.MSRPC_BINDACK, 9, len(raw))
    assert (ack["max_tfrag"], ack["max_rfrag"], ack["assoc_group"]) == (5840, 5840, 0xABCDEF)
    assert (ack["SecondaryAddrLen"], ack["SecondaryAddr"]) == (5, "2105")
    got = [(i["Result"], i["Reason"], i["TransferSyntax"]) for i in ack.getCtxItems()]
    assert got == [(2, 2, bytes(20)), (0, 0, P.encode_syntax(N64)), (3, 2, bytes(20))]
    assert raw.index(b"2105\x00") + 5 + 1 == 32          # "2105\0" ends at 31, one pad byte to 4-alignment


def test_alter_context_resp_has_empty_secondary_address_and_two_pad_bytes():
    raw = P.build_bind_ack(2, alter_context=True, max_xmit_frag=4280, max_recv_frag=4280, assoc_group_id=5,
                           secondary_address="", results=[(0, 0, NDR)])
    assert raw[2] == rpcrt.MSRPC_ALTERCTX_R
    assert raw[24:28] == b"\x00\x00\x00\x00"           # length 0 + 2 pad bytes
    assert raw[28] == 1                                  # n_results at offset 28
    ack = rpcrt.MSRPCBindAck(raw)
    assert ack["assoc_group"] == 5
    assert ack.getCtxItems()[0]["TransferSyntax"] == P.encode_syntax(NDR)


def test_bind_nak_parsed_by_impacket():
    raw = P.build_bind_nak(4, F.BIND_NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED)
    header = rpcrt.MSRPCHeader(raw)
    assert (header["type"], header["call_id"], header["frag_len"]) == (rpcrt.MSRPC_BINDNAK, 4, len(raw))
    nak = rpcrt.MSRPCBindNak(header["pduData"])
    assert nak["RejectedReason"] == 8
    assert nak["SupportedVersions"][:3] == b"\x01\x05\x00"    # one version: 5.0


def test_fault_parsed_by_impacket():
    raw = P.build_fault(77, F.NCA_S_UNK_IF, context_id=3, did_not_execute=True)
    resp = rpcrt.MSRPCRespHeader(raw)
    assert (resp["type"], resp["call_id"], resp["frag_len"], resp["ctx_id"]) == (rpcrt.MSRPC_FAULT, 77, 32, 3)
    assert resp["flags"] == rpcrt.PFC_FIRST_FRAG | rpcrt.PFC_LAST_FRAG | rpcrt.PFC_DID_NOT_EXECUTE
    assert resp["alloc_hint"] == 24                    # as Samba dcesrv_fault_with_flags
    assert struct.unpack_from("<II", raw, 24) == (0x1C010003, 0)


def test_single_fragment_response_parsed_by_impacket():
    out = bytearray()
    P.append_response(out, 12, 1, b"abcdef", 5840)
    resp = rpcrt.MSRPCRespHeader(bytes(out))
    assert (resp["type"], resp["call_id"], resp["alloc_hint"], resp["ctx_id"]) == (rpcrt.MSRPC_RESPONSE, 12, 6, 1)
    assert resp["flags"] == rpcrt.PFC_FIRST_FRAG | rpcrt.PFC_LAST_FRAG
    assert resp["pduData"] == b"abcdef"


def split_pdus(data: bytes) -> list[bytes]:
    """Cut a byte stream into PDUs by frag_length."""
    pdus, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<H", data, pos + 8)
        pdus.append(data[pos:pos + length])
        pos += length
    return pdus


@pytest.mark.parametrize("size", [0, 5808, 5809, 5816, 4325376 + 48])
def test_fragmented_response_alloc_hint_is_remaining_bytes(size):
    stub = bytes(range(256)) * (size // 256) + bytes(size % 256)
    out = bytearray()
    P.append_response(out, 3, 257, stub, 5840)
    pdus = split_pdus(bytes(out))
    chunk = P.response_chunk_size(5840)
    assert chunk == 5808 and chunk % 16 == 0
    remaining = size
    joined = bytearray()
    for index, raw in enumerate(pdus):
        if 2 <= index < len(pdus) - 2:          # impacket's Structure is slow: it checks the edges, struct the rest
            assert struct.unpack_from("<IH", raw, 16) == (remaining, 1) and raw[3] == 0
            joined += raw[24:]
            remaining -= len(raw) - 24
            continue
        resp = rpcrt.MSRPCRespHeader(raw)
        assert resp["alloc_hint"] == remaining
        assert resp["ctx_id"] == 1                         # p_cont_id & 0xFF as Windows/Samba
        assert resp["frag_len"] <= 5840
        first = index == 0
        last = index == len(pdus) - 1
        assert bool(resp["flags"] & rpcrt.PFC_FIRST_FRAG) == first
        assert bool(resp["flags"] & rpcrt.PFC_LAST_FRAG) == last
        joined += resp["pduData"]
        remaining -= len(resp["pduData"])
    assert bytes(joined) == stub
    assert len(pdus) == max(1, -(-size // chunk))              # Samba dcesrv_reply: chunks of 5808, even if 5816 fit


@pytest.mark.parametrize("object_uuid", [None, uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")])
def test_request_parsed_by_impacket(object_uuid):
    raw = P.build_request(8, 2, 5, b"stubdata", object_uuid=object_uuid)
    req = rpcrt.MSRPCRequestHeader(raw)
    assert (req["type"], req["call_id"], req["ctx_id"], req["op_num"], req["alloc_hint"]) == (0, 8, 2, 5, 8)
    assert req["pduData"] == b"stubdata"
    if object_uuid is None:
        assert not req["flags"] & rpcrt.PFC_OBJECT_UUID
    else:
        assert req["flags"] & rpcrt.PFC_OBJECT_UUID
        assert req["uuid"] == object_uuid.bytes_le


@pytest.mark.parametrize("ptype", [F.PTYPE_CO_CANCEL, F.PTYPE_ORPHANED, F.PTYPE_SHUTDOWN])
def test_header_only_pdus_parsed_by_impacket(ptype):
    header = rpcrt.MSRPCHeader(P.build_header_only(ptype, 99))
    assert (header["type"], header["call_id"], header["frag_len"], header["auth_len"]) == (ptype, 99, 16, 0)
    assert header["representation"] == 0x10


def test_fragment_request_sets_flags_and_alloc_hint():
    stub = bytes(20000)
    frags = P.fragment_request(1, 0, 2, stub, 5840)
    hints = [rpcrt.MSRPCRequestHeader(f)["alloc_hint"] for f in frags]
    assert hints == [20000, 20000 - 5808, 20000 - 2 * 5808, 20000 - 3 * 5808]
    flags = [f[3] & 3 for f in frags]
    assert flags == [1, 0, 0, 2]


def test_sec_trailer_position_from_the_end():
    header = rpcrt.MSRPCHeader()
    header["type"] = rpcrt.MSRPC_BIND
    header["pduData"] = b"\x00" * 12
    trailer = rpcrt.SEC_TRAILER()
    trailer["auth_type"] = 10
    trailer["auth_level"] = 6
    trailer["auth_ctx_id"] = 0x55
    header["sec_trailer"] = trailer.getData()
    header["auth_data"] = b"N" * 40
    raw = header.get_packet()
    parsed = P.parse_sec_trailer(raw, len(raw), 40)
    assert (parsed.auth_type, parsed.auth_level, parsed.auth_context_id) == (10, 6, 0x55)
    with pytest.raises(P.PduError):
        P.parse_sec_trailer(raw, 30, 40)


# --- properties ---------------------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

syntax_ids = st.tuples(st.uuids(), st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
context_items = st.builds(ContextItem, st.integers(0, 0xFFFF), syntax_ids,
                          st.lists(syntax_ids, min_size=1, max_size=4).map(tuple))


@settings(max_examples=100, deadline=None)
@given(items=st.lists(context_items, min_size=1, max_size=6).map(tuple), alter=st.booleans(),
       xmit=st.integers(0, 0xFFFF), recv=st.integers(0, 0xFFFF), group=st.integers(0, 0xFFFFFFFF))
def test_bind_round_trip(items, alter, xmit, recv, group):
    raw = P.build_bind(9, items, alter_context=alter, max_xmit_frag=xmit, max_recv_frag=recv, assoc_group_id=group)
    body = P.parse_bind_body(raw, len(raw))
    assert (body.max_xmit_frag, body.max_recv_frag, body.assoc_group_id, body.items) == (xmit, recv, group, items)


@settings(max_examples=60, deadline=None)
@given(size=st.integers(0, 40000), max_xmit=st.integers(2048, 5840), ctx=st.integers(0, 0xFFFF))
def test_response_fragments_reassemble(size, max_xmit, ctx):
    stub = bytes(i & 0xFF for i in range(size))
    out = bytearray()
    P.append_response(out, 1, ctx, stub, max_xmit)
    joined, remaining = bytearray(), size
    for raw in split_pdus(bytes(out)):
        assert len(raw) <= max_xmit
        (hint,) = struct.unpack_from("<I", raw, 16)
        assert hint == remaining and raw[20] == ctx & 0xFF
        joined += raw[24:]
        remaining -= len(raw) - 24
    assert bytes(joined) == stub
